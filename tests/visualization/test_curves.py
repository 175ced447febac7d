"""Tests for captum_iba.visualization.curves: degradation curves and sweeps."""

import os
import tempfile
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch
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

    def test_normalized_drop_is_the_metrics_one(self) -> None:
        from captum_iba.metrics import result as metrics_result

        curves = {"a": _curve(5), "b": _curve(1, o=0.7, end=0.5)}
        with mock.patch.object(
            metrics_result, "normalized_drop", wraps=metrics_result.normalized_drop
        ) as spy:
            d = viz.normalized_drop(curves)
        self.assertEqual(spy.call_count, 1)
        values = [np.asarray(v, dtype=np.float64) for _, v in curves.values()]
        expected, m = metrics_result.normalized_drop(values)
        self.assertAlmostEqual(m, 0.3 + 0.6 * np.exp(-5))
        for (_, got), want in zip(d.values(), expected):
            np.testing.assert_array_equal(got, want)
