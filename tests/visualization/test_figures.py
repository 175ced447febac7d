"""Tests for captum_iba.visualization.figures: the layers x tokens map."""

import os
import tempfile

import numpy as np
import torch
from captum.testing.helpers.basic import BaseTest
from matplotlib.figure import Figure

from captum_iba import visualization as viz

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
            normalize=None,
        )
        ax = fig.axes[0]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["a", "bc", "d"])
        self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["4", "9"])
        self.assertEqual(float(ax.get_images()[0].get_array()[0, 1]), 2.0)
        self.assertEqual(ax.get_ylabel(), "layer")

    def test_default_scale_shows_contrast(self) -> None:
        """IBA-like capacities (large, close together) are min-max scaled per
        layer by default; signed scores get a diverging scale."""
        caps = torch.tensor([[1900.0, 2000.0, 2100.0], [10.0, 30.0, 20.0]])
        fig = viz.layer_token_heatmap(caps, ["a", "b", "c"])
        drawn = np.asarray(fig.axes[0].get_images()[0].get_array())
        np.testing.assert_allclose(drawn, [[0.0, 0.5, 1.0], [0.0, 1.0, 0.5]])
        self.assertEqual(fig.axes[1].get_ylabel(), "min-max scaled per layer")
        signed = torch.tensor([[-2.0, 1.0, 0.5], [4.0, -1.0, 0.0]])
        fig = viz.layer_token_heatmap(signed, ["a", "b", "c"])
        image = fig.axes[0].get_images()[0]
        np.testing.assert_allclose(
            np.asarray(image.get_array()), [[-1.0, 0.5, 0.25], [1.0, -0.25, 0.0]]
        )
        self.assertEqual(image.get_clim(), (-1.0, 1.0))
        self.assertEqual(image.get_cmap().name, "RdBu_r")
        self.assertIn("diverging", fig.axes[1].get_ylabel())

    def test_beta_rows(self) -> None:
        fig = viz.layer_token_heatmap(
            torch.rand(3, 4),
            ["a", "b", "c", "d"],
            layer_labels=["1e-07", "1e-05", "0.001"],
            layout=viz.LayerMapLayout(ylabel="beta"),
            normalize="layer",
        )
        self.assertEqual(fig.axes[0].get_ylabel(), "beta")
        self.assertEqual(fig.axes[1].get_ylabel(), "min-max scaled per beta")

    def test_old_layout_keywords_warn_and_draw_the_same(self) -> None:
        """``ylabel=``, ``cmap=`` ... (earlier releases' arguments) are the
        layout's fields: a DeprecationWarning at the caller naming the new
        form, the same figure; over a given ``layout``."""
        scores, tokens = torch.rand(2, 3), ["a", "b", "c"]
        layout = viz.LayerMapLayout(ylabel="beta", cmap="magma", unit="bits")
        new = viz.layer_token_heatmap(scores, tokens, normalize=None, layout=layout)
        with self.assertWarnsRegex(
            DeprecationWarning, r"layout=LayerMapLayout\(cmap"
        ) as w:
            old = viz.layer_token_heatmap(
                scores, tokens, normalize=None, ylabel="beta", cmap="magma", unit="bits"
            )
        self.assertEqual(w.filename, __file__)
        for fig in (old, new):
            self.assertEqual(fig.axes[0].get_ylabel(), "beta")
            self.assertEqual(fig.axes[0].get_images()[0].get_cmap().name, "magma")
            self.assertIn("bits", fig.axes[1].get_ylabel())
        with self.assertWarns(DeprecationWarning):
            over = viz.layer_token_heatmap(scores, tokens, layout=layout, cmap="gray")
        self.assertEqual(over.axes[0].get_images()[0].get_cmap().name, "gray")
        with self.assertRaisesRegex(TypeError, "layout must be a LayerMapLayout"):
            viz.layer_token_heatmap(scores, tokens, layout={"ylabel": "beta"})

    def test_bad_inputs(self) -> None:
        with self.assertRaisesRegex(ValueError, r"layer_token_map\(...\)\[i\]"):
            viz.layer_token_heatmap(torch.ones(2, 3, 4), ["a"] * 4)
        with self.assertRaisesRegex(ValueError, "3 tokens but 4"):
            viz.layer_token_heatmap(torch.ones(3, 4), ["a"] * 3)
        with self.assertRaisesRegex(ValueError, "layer labels"):
            viz.layer_token_heatmap(torch.ones(3, 2), ["a", "b"], layer_labels=[1])
        with self.assertRaisesRegex(ValueError, "normalize"):
            viz.layer_token_heatmap(torch.ones(3, 2), ["a", "b"], normalize="rows")
