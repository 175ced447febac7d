"""Tests for captum_iba.visualization.style: one HeatmapStyle, old keywords kept."""

import dataclasses
import os
import tempfile

import numpy as np
import torch
from captum.testing.helpers.basic import BaseTest

from captum_iba import visualization as viz
from captum_iba.visualization import DEFAULT_SKIP_TOKENS, HeatmapStyle

TOKENS = [["[CLS]", "un", "##like", "##ly", "<b>", "[SEP]", "[PAD]"]] * 2
SCORES = torch.tensor(
    [[0.5, 1.0, -2.0, 0.25, 3.0, 0.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]
)
MASK = torch.tensor([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]])


class TestHeatmapStyle(BaseTest):
    def test_defaults_and_frozen(self) -> None:
        style = HeatmapStyle()
        self.assertEqual(style.skip_tokens, DEFAULT_SKIP_TOKENS)
        self.assertFalse(style.merge_subwords)
        self.assertEqual(style.subword_prefix, "##")
        self.assertEqual(style.scale, "auto")
        with self.assertRaisesRegex(ValueError, "scale must be one of"):
            HeatmapStyle(scale="sum")
        self.assertEqual(HeatmapStyle(skip_tokens=["a", "b"]).skip_tokens, ("a", "b"))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            style.scale = "minmax"  # type: ignore[misc]

    def test_unknown_keyword_rejected(self) -> None:
        with self.assertRaisesRegex(TypeError, "'merge_subword'"):
            HeatmapStyle.resolve(None, {"merge_subword": True}, "text_heatmap_html")
        with self.assertRaisesRegex(TypeError, "text_heatmap_html.*'colour'"):
            viz.text_heatmap_html(["a"], [1.0], colour="red")
        with self.assertRaisesRegex(TypeError, "heatmap_records.*'merge'"):
            viz.heatmap_records(["a"], [1.0], merge=True)
        # options a function never took stay unknown to it
        with self.assertRaisesRegex(TypeError, "prepare_tokens.*'scale'"):
            viz.prepare_tokens(["a"], [1.0], scale="minmax")
        with self.assertRaisesRegex(TypeError, "layer_token_heatmap.*'scale'"):
            viz.layer_token_heatmap(torch.ones(2, 1), ["a"], scale="minmax")
        with self.assertRaisesRegex(TypeError, "HeatmapStyle"):
            viz.text_heatmap_html(["a"], [1.0], style={"scale": "minmax"})

    def test_keywords_and_style_give_identical_html(self) -> None:
        options = dict(
            skip_tokens=["[PAD]", "[CLS]"],
            merge_subwords=True,
            subword_prefix="##",
            scale="minmax",
        )
        kw = dict(token_mask=MASK, label=[1, 0], pred=1, pred_prob=0.75)
        old = viz.text_heatmap_html(TOKENS, SCORES, **kw, **options)
        new = viz.text_heatmap_html(TOKENS, SCORES, **kw, style=HeatmapStyle(**options))
        self.assertEqual(old, new)
        self.assertIn("unlikely", new)
        self.assertNotIn("[CLS]", new)
        # keywords apply over a style
        over = viz.text_heatmap_html(
            TOKENS, SCORES, **kw, style=HeatmapStyle(scale="max"), **options
        )
        self.assertEqual(over, old)
        self.assertEqual(
            viz.text_heatmap_html(TOKENS[0], SCORES[0], merge_subwords=True),
            viz.text_heatmap_html(
                TOKENS[0], SCORES[0], style=HeatmapStyle(merge_subwords=True)
            ),
        )
        with tempfile.TemporaryDirectory() as tmp:
            a = viz.save_html(
                os.path.join(tmp, "a.html"), TOKENS[0], SCORES[0], **options
            )
            b = viz.save_html(
                os.path.join(tmp, "b.html"),
                TOKENS[0],
                SCORES[0],
                style=HeatmapStyle(**options),
            )
            with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
                self.assertEqual(fa.read(), fb.read())

    def test_style_in_records_tokens_and_layer_map(self) -> None:
        style = HeatmapStyle(
            skip_tokens=("[CLS]", "[SEP]", "[PAD]"), merge_subwords=True
        )
        options = dict(skip_tokens=("[CLS]", "[SEP]", "[PAD]"), merge_subwords=True)
        words, kept = viz.prepare_tokens(TOKENS[0], SCORES[0], style=style)
        words2, kept2 = viz.prepare_tokens(TOKENS[0], SCORES[0], **options)
        self.assertEqual(words, ["unlikely", "<b>"])
        self.assertEqual(words, words2)
        np.testing.assert_array_equal(kept, kept2)
        recs = viz.heatmap_records(TOKENS, SCORES, style=style)
        recs2 = viz.heatmap_records(TOKENS, SCORES, **options)
        for r, r2 in zip(recs, recs2):
            self.assertEqual(r.raw_input_ids, r2.raw_input_ids)
            self.assertTrue(torch.equal(r.word_attributions, r2.word_attributions))
        fig = viz.layer_token_heatmap(SCORES, TOKENS[0], style=style)
        fig2 = viz.layer_token_heatmap(SCORES, TOKENS[0], **options)
        labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        self.assertEqual(labels, ["unlikely", "<b>"])
        self.assertEqual(labels, [t.get_text() for t in fig2.axes[0].get_xticklabels()])
        np.testing.assert_array_equal(
            fig.axes[0].get_images()[0].get_array(),
            fig2.axes[0].get_images()[0].get_array(),
        )
