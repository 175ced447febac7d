"""Tests for captum_iba.visualization._inputs: token choice and scaling."""

import numpy as np
import torch
from captum.testing.helpers.basic import BaseTest

from captum_iba import visualization as viz


class TestPrepareTokens(BaseTest):
    def test_padding_skipped_by_mask_and_token(self) -> None:
        tokens = ["[CLS]", "good", "[SEP]", "[PAD]", "x"]
        scores = torch.tensor([1.0, 2.0, 3.0, 100.0, 50.0])
        mask = torch.tensor([1, 1, 1, 1, 0])
        words, kept = viz.prepare_tokens(tokens, scores, token_mask=mask)
        self.assertEqual(words, ["[CLS]", "good", "[SEP]"])
        np.testing.assert_allclose(kept, [1.0, 2.0, 3.0])
        words, _ = viz.prepare_tokens(tokens, scores, skip_tokens=["[CLS]", "[SEP]"])
        self.assertEqual(words, ["good", "[PAD]", "x"])

    def test_merge_word_pieces_sums(self) -> None:
        words, merged = viz.merge_word_pieces(
            ["[CLS]", "un", "##like", "##ly", "film", "##s", "[SEP]"],
            [0.5, 1.0, 2.0, 3.0, 1.0, 0.5, 0.0],
        )
        self.assertEqual(words, ["[CLS]", "unlikely", "films", "[SEP]"])
        np.testing.assert_allclose(merged, [0.5, 6.0, 1.5, 0.0])

    def test_merge_word_pieces_rows_and_leading_piece(self) -> None:
        words, merged = viz.merge_word_pieces(
            ["##a", "b", "##c"], np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        )
        self.assertEqual(words, ["##a", "bc"])
        np.testing.assert_allclose(merged, [[1.0, 5.0], [4.0, 11.0]])

    def test_bad_inputs(self) -> None:
        with self.assertRaisesRegex(ValueError, "3 tokens but 2 scores"):
            viz.prepare_tokens(["a", "b", "c"], [1.0, 2.0])
        with self.assertRaisesRegex(ValueError, "shape"):
            viz.prepare_tokens(["a"], torch.ones(1, 1, 1))
        with self.assertRaisesRegex(ValueError, "token_mask"):
            viz.prepare_tokens(["a", "b"], [1.0, 2.0], token_mask=[1, 1, 0])
        with self.assertRaisesRegex(ValueError, "NaN"):
            viz.prepare_tokens(["a", "b"], [1.0, float("nan")])
        with self.assertRaisesRegex(TypeError, "one string"):
            viz.prepare_tokens("ab", [1.0, 2.0])

    def test_scale_scores(self) -> None:
        scaled = viz.scale_scores(torch.tensor([0.0, 2.0, 8.0, 4.0]))
        np.testing.assert_allclose(scaled, [0.0, 0.25, 1.0, 0.5])
        signed = viz.scale_scores([-4.0, 2.0])
        np.testing.assert_allclose(signed, [-1.0, 0.5])
        np.testing.assert_allclose(viz.scale_scores([0.0, 0.0]), [0.0, 0.0])
        mm = viz.scale_scores([2.0, 4.0, 3.0], method="minmax")
        np.testing.assert_allclose(mm, [0.0, 1.0, 0.5])
        # the default, "auto": min-max when unsigned, score / max |score| if not
        np.testing.assert_allclose(viz.scale_scores([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])
        mx = viz.scale_scores([2.0, 4.0, 3.0], method="max")
        np.testing.assert_allclose(mx, [0.5, 1.0, 0.75])
        with self.assertRaisesRegex(ValueError, "finite"):
            viz.scale_scores([1.0, float("inf")])
        with self.assertRaisesRegex(ValueError, "method"):
            viz.scale_scores([1.0], method="sum")
