import os
import tempfile
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch
from captum.attr import visualization as captum_viz
from captum.testing.helpers.basic import BaseTest
from matplotlib.figure import Figure

from captum_iba import visualization as viz

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LEVELS = [k / 9 for k in range(10)]


def _curve(rate, o=0.9, end=0.3):
    return LEVELS, [end + (o - end) * np.exp(-rate * lv) for lv in LEVELS]


class _Result:
    """Duck-typed stand-in for metrics.DegradationResult (levels + full_curve)."""

    def __init__(self, values):
        self.levels = LEVELS[1:]
        self.full_curve = torch.tensor(values, dtype=torch.float64)


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
        with self.assertRaisesRegex(ValueError, "finite"):
            viz.scale_scores([1.0, float("inf")])
        with self.assertRaisesRegex(ValueError, "method"):
            viz.scale_scores([1.0], method="sum")


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
        np.testing.assert_allclose(recs[0].word_attributions, [0.25, 1.0, 0.5])
        np.testing.assert_allclose(recs[1].word_attributions, [0.25, -1.0, 0.5, 0.0])
        self.assertAlmostEqual(recs[0].attr_score, 7.0)  # padding not counted
        self.assertEqual([r.attr_class for r in recs], ["1", "0"])
        page = viz.text_heatmap_html(tokens, scores, token_mask=mask)
        self.assertNotIn("[PAD]", page)

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


class TestLayerTokenHeatmap(BaseTest):
    def test_figure_and_png(self) -> None:
        layer_map = torch.rand(6, 12)
        tokens = ["[CLS]"] + [f"w{i}" for i in range(9)] + ["[SEP]", "[PAD]"]
        mask = torch.ones(12)
        mask[-1] = 0
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "map.png")
            fig = viz.layer_token_heatmap(
                layer_map, tokens, token_mask=mask, normalize="layer", save_path=path
            )
            with open(path, "rb") as fh:
                self.assertEqual(fh.read(8), PNG_MAGIC)
        self.assertIsInstance(fig, Figure)
        panel = fig.axes[0]
        self.assertEqual(len(fig.axes), 2)  # one panel + colour bar
        image = panel.get_images()[0].get_array()
        self.assertEqual(image.shape, (6, 11))  # padding column dropped
        self.assertAlmostEqual(float(image.max()), 1.0)
        self.assertAlmostEqual(float(image[0].min()), 0.0)
        labels = [t.get_text() for t in panel.get_yticklabels()]
        self.assertEqual(labels, ["1", "2", "3", "4", "5", "6"])

    def test_long_input_wraps_into_panels(self) -> None:
        tokens = [f"t{i}" for i in range(300)]
        fig = viz.layer_token_heatmap(np.random.rand(12, 300), tokens)
        panels = [ax for ax in fig.axes if ax.get_images()]
        self.assertGreater(len(panels), 1)
        shown = sum(
            int((~np.ma.getmaskarray(ax.get_images()[0].get_array()[0])).sum())
            for ax in panels
        )
        self.assertEqual(shown, 300)
        self.assertLessEqual(fig.get_figwidth(), 16.0)

    def test_merge_and_labels(self) -> None:
        fig = viz.layer_token_heatmap(
            torch.ones(2, 4),
            ["a", "b", "##c", "d"],
            merge_subwords=True,
            layer_labels=[4, 9],
        )
        ax = fig.axes[0]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["a", "bc", "d"])
        self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["4", "9"])
        self.assertEqual(float(ax.get_images()[0].get_array()[0, 1]), 2.0)
        self.assertEqual(ax.get_ylabel(), "layer")

    def test_beta_rows(self) -> None:
        fig = viz.layer_token_heatmap(
            torch.rand(3, 4),
            ["a", "b", "c", "d"],
            layer_labels=["1e-07", "1e-05", "0.001"],
            ylabel="beta",
            normalize="layer",
        )
        self.assertEqual(fig.axes[0].get_ylabel(), "beta")
        self.assertEqual(fig.axes[1].get_ylabel(), "min-max scaled per beta")

    def test_bad_inputs(self) -> None:
        with self.assertRaisesRegex(ValueError, r"layer_token_map\(...\)\[i\]"):
            viz.layer_token_heatmap(torch.ones(2, 3, 4), ["a"] * 4)
        with self.assertRaisesRegex(ValueError, "3 tokens but 4"):
            viz.layer_token_heatmap(torch.ones(3, 4), ["a"] * 3)
        with self.assertRaisesRegex(ValueError, "layer labels"):
            viz.layer_token_heatmap(torch.ones(3, 2), ["a", "b"], layer_labels=[1])
        with self.assertRaisesRegex(ValueError, "normalize"):
            viz.layer_token_heatmap(torch.ones(3, 2), ["a", "b"], normalize="rows")


class TestCurves(BaseTest):
    def test_degradation_curves_png(self) -> None:
        curves = {"IBA": _curve(5), "IG": _curve(3), "Random": _curve(0.5)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "deg.png")
            fig = viz.plot_degradation_curves(curves, save_path=path)
            with open(path, "rb") as fh:
                self.assertEqual(fh.read(8), PNG_MAGIC)
        self.assertEqual(len(fig.axes), 1)
        ax = fig.axes[0]
        self.assertEqual(len(ax.get_lines()), 3)
        self.assertEqual(
            [t.get_text() for t in ax.get_legend().get_texts()], ["IBA", "IG", "Random"]
        )
        np.testing.assert_allclose(ax.get_lines()[0].get_xdata()[-1], 100.0)

    def test_normalized_drop(self) -> None:
        curves = {
            "a": ([0, 0.5, 1], [0.8, 0.5, 0.2]),
            "b": ([0, 0.5, 1], [0.6, 0.5, 0.4]),
        }
        d = viz.normalized_drop(curves)
        np.testing.assert_allclose(d["a"][1], [1.0, 0.5, 0.0])
        np.testing.assert_allclose(d["b"][1], [1.0, 0.75, 0.5])
        with self.assertRaisesRegex(ValueError, "level 0"):
            viz.normalized_drop({"a": ([0.5, 1], [0.5, 0.2])})

    def test_result_objects_duck_typed(self) -> None:
        full = _curve(5)[1]
        results = {
            "full": _Result(full),
            "curve": SimpleNamespace(
                levels=LEVELS[1:], curve=full[1:], original_probability=full[0]
            ),
            "mean": SimpleNamespace(levels=LEVELS[1:], mean_curve=lambda: full[1:]),
            "pair": (LEVELS, full),
        }
        curves = viz.degradation_curves(results)
        for name in ("full", "curve", "pair"):
            np.testing.assert_allclose(curves[name][0], LEVELS)
            np.testing.assert_allclose(curves[name][1], full)
        np.testing.assert_allclose(curves["mean"][0], LEVELS[1:])
        fig = viz.plot_degradation_curves(results)
        self.assertEqual(len(fig.axes[0].get_lines()), 4)
        with self.assertRaisesRegex(TypeError, "levels"):
            viz.degradation_curves({"x": object()})
        with self.assertRaisesRegex(TypeError, "no mean curve"):
            viz.degradation_curves({"x": SimpleNamespace(levels=[0.5])})

    def test_comparison_object(self) -> None:
        comp = SimpleNamespace(
            levels=[0.5, 1.0],
            m=0.2,
            normalized_curves={"a": torch.tensor([1.0, 0.5, 0.0])},
        )
        curves = viz.degradation_curves(comp, normalized=True)
        np.testing.assert_allclose(curves["a"][0], [0.0, 0.5, 1.0])
        with self.assertRaisesRegex(ValueError, "normalized=True"):
            viz.degradation_curves(comp)
        fig = viz.plot_degradation_curves(comp, normalized=True)
        self.assertIn("bar{d}", fig.axes[0].get_ylabel())

    def test_curve_bad_inputs(self) -> None:
        with self.assertRaisesRegex(ValueError, "3 levels but 2 values"):
            viz.plot_degradation_curves({"a": ([0, 0.5, 1], [0.5, 0.2])})
        with self.assertRaisesRegex(TypeError, "mapping"):
            viz.plot_degradation_curves([1, 2, 3])
        with self.assertRaisesRegex(ValueError, "no curve"):
            viz.plot_degradation_curves({})

    def test_layer_and_beta_sweeps(self) -> None:
        layers = {k: _curve(k / 2) for k in (9, 1, 4)}
        layers["IG"] = _curve(3)
        fig = viz.plot_layer_sweep(layers)
        ax = fig.axes[0]
        self.assertEqual(len(ax.get_lines()), 4)
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        self.assertEqual(labels, ["layer 1", "layer 4", "layer 9", "IG"])
        self.assertEqual(ax.get_lines()[-1].get_linestyle(), "--")

        betas = {1e-3: _curve(1), 1e-5: _curve(2), 1e-7: _curve(3), 2e-4: _curve(4)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "beta.png")
            fig = viz.plot_beta_sweep(betas, save_path=path)
            self.assertTrue(os.path.getsize(path) > 0)
        ax = fig.axes[0]
        self.assertEqual(len(ax.get_lines()), 4)
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        self.assertEqual(labels[0], "$\\beta = 10^{-7}$")
        self.assertEqual(labels[2], "$\\beta = 0.0002$")

    def test_draw_into_given_axes(self) -> None:
        fig = Figure()
        axes = fig.subplots(1, 2)
        out = viz.plot_degradation_curves({"a": _curve(1)}, ax=axes[1])
        self.assertIs(out, fig)
        self.assertEqual(len(axes[1].get_lines()), 1)
        self.assertEqual(len(axes[0].get_lines()), 0)
