"""Tests for captum_iba.visualization.text: HTML heatmaps."""

import os
import tempfile
from unittest import mock

import numpy as np
import torch
from captum.attr import visualization as captum_viz
from captum.testing.helpers.basic import BaseTest

from captum_iba import visualization as viz


class TestTextHeatmap(BaseTest):
    def test_tokens_and_labels_escaped(self) -> None:
        page = viz.text_heatmap_html(
            ["[CLS]", "<script>", "alert(1)", "</script>", "&", "[SEP]"],
            [0.1, 1.0, 0.5, 0.2, 0.3, 0.0],
            label="<b>pos</b>",
            pred=1,
            pred_prob=0.9,
            true_label="a & b",
        )
        self.assertNotIn("<script", page)
        self.assertNotIn("</script", page)
        self.assertIn("&lt;script&gt;", page)
        self.assertIn("&lt;/script&gt;", page)
        self.assertIn(" &amp; ", page.replace("\n", " ").replace("  ", " "))
        self.assertNotIn("<b>pos</b>", page)
        self.assertIn("&lt;b&gt;pos&lt;/b&gt;", page)
        self.assertIn("a &amp; b", page)
        self.assertIn("1 (0.90)", page)

    def test_records_scaled_padding_skipped(self) -> None:
        tokens = [["[CLS]", "ok", "[SEP]", "[PAD]"], ["[CLS]", "bad", "news", "[SEP]"]]
        scores = torch.tensor([[1.0, 4.0, 2.0, 99.0], [2.0, -8.0, 4.0, 0.0]])
        mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
        recs = viz.heatmap_records(tokens, scores, token_mask=mask, label=[1, 0])
        self.assertEqual(len(recs), 2)
        self.assertIsInstance(recs[0], captum_viz.VisualizationDataRecord)
        self.assertEqual(recs[0].raw_input_ids, ["[CLS]", "ok", "[SEP]"])
        for r in recs:
            self.assertLessEqual(float(r.word_attributions.abs().max()), 1.0)
        self.assertEqual(float(recs[0].word_attributions.max()), 1.0)
        # one instance is signed: one diverging scale (score / max |score|) for all
        np.testing.assert_allclose(recs[0].word_attributions, [0.25, 1.0, 0.5])
        np.testing.assert_allclose(recs[1].word_attributions, [0.25, -1.0, 0.5, 0.0])
        self.assertAlmostEqual(recs[0].attr_score, 7.0)  # padding not counted
        self.assertEqual([r.attr_class for r in recs], ["1", "0"])
        page = viz.text_heatmap_html(tokens, scores, token_mask=mask)
        self.assertNotIn("[PAD]", page)

    def test_capacities_get_contrast_by_default(self) -> None:
        """IBA's capacities (1,900-2,100 nats) are min-max scaled per instance,
        so the lowest token is pale and the highest saturated; the legend says
        so. With score / max they would all be 0.9-1.0."""
        tokens = ["[CLS]", "a", "gripping", "film", "[SEP]"]
        caps = torch.tensor([1950.0, 1900.0, 2100.0, 2000.0, 1925.0])
        (rec,) = viz.heatmap_records(tokens, caps)
        np.testing.assert_allclose(rec.word_attributions, [0.25, 0.0, 1.0, 0.5, 0.125])
        page = viz.text_heatmap_html(tokens, caps)
        self.assertIn("min-max scale", page)
        (old,) = viz.heatmap_records(tokens, caps, scale="max")
        self.assertGreater(float(old.word_attributions.min()), 0.9)

    def test_signed_scores_get_a_diverging_scale(self) -> None:
        tokens = ["a", "b", "c"]
        ig = torch.tensor([-0.4, 0.1, 0.2])
        (rec,) = viz.heatmap_records(tokens, ig)
        np.testing.assert_allclose(rec.word_attributions, [-1.0, 0.25, 0.5])
        self.assertIn("diverging scale", viz.text_heatmap_html(tokens, ig))

    def test_merge_in_html(self) -> None:
        page = viz.text_heatmap_html(
            ["[CLS]", "un", "##like", "##ly", "[SEP]"],
            [0.0, 1.0, 1.0, 1.0, 0.0],
            merge_subwords=True,
        )
        self.assertIn("unlikely", page)
        self.assertNotIn("##", page)

    def test_bad_inputs(self) -> None:
        with self.assertRaisesRegex(ValueError, "2 tokens but 3 scores"):
            viz.text_heatmap_html(["a", "b"], [1.0, 2.0, 3.0])
        with self.assertRaisesRegex(ValueError, "one token list per instance"):
            viz.text_heatmap_html(["a", "b"], torch.ones(2, 2))
        with self.assertRaisesRegex(ValueError, "1 token lists for 2"):
            viz.text_heatmap_html([["a", "b"]], torch.ones(2, 2))
        with self.assertRaisesRegex(ValueError, "token_attributions"):
            viz.text_heatmap_html([["a"]], torch.ones(1, 1, 4))
        with self.assertRaisesRegex(ValueError, "label has 3 entries"):
            viz.text_heatmap_html([["a"], ["b"]], torch.ones(2, 1), label=[0, 1, 2])

    def test_save_html(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sub", "heat.html")
            out = viz.save_html(path, ["x", "<y>", "é"], [1.0, 2.0, 3.0], title="T&T")
            self.assertEqual(out, path)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        self.assertTrue(text.startswith("<!DOCTYPE html>"))
        self.assertIn('<meta charset="utf-8">', text)
        self.assertIn("<title>T&amp;T</title>", text)
        self.assertIn("&lt;y&gt;", text)
        self.assertIn("é", text)

    def test_visualize_text_records(self) -> None:
        with mock.patch.object(captum_viz, "HAS_IPYTHON", False):
            out = viz.visualize_text_records(["<a>", "b"], [1.0, 0.5])
        self.assertIsInstance(out, str)
        self.assertIn("&lt;a&gt;", out)
        if captum_viz.HAS_IPYTHON:
            with mock.patch.object(captum_viz, "display", lambda *a, **k: None):
                obj = viz.visualize_text_records(["<a>", "b"], [1.0, 0.5], label=1)
            self.assertIn("&lt;a&gt;", obj.data)
            self.assertNotIn("<a>", obj.data)
