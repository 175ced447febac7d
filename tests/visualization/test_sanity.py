"""Tests for captum_iba.visualization.sanity: the randomisation curves."""

import math

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

from captum_iba.metrics import RandomizationResult
from captum_iba.visualization import plot_randomization

STAGES = ["head", "layer 0", "embeddings"]


def result(values, method="m"):
    rho = torch.tensor(values, dtype=torch.float64)
    S, B = rho.shape
    return RandomizationResult(
        stages=list(STAGES[:S]),
        spearman=rho,
        spearman_abs=rho.abs(),
        target=torch.zeros(B, dtype=torch.long),
        n_tokens=torch.full((B,), 5),
        predictions=torch.zeros(S + 1, B, dtype=torch.long),
        target_probs=torch.full((S + 1, B), 0.5, dtype=torch.float64),
        randomized=[["w"]] * S,
        method=method,
    )


def test_one_curve_per_method_per_panel_with_the_means(tmp_path):
    backend = matplotlib.get_backend()
    flat = result([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    falling = result([[0.8, 0.6], [0.2, -0.2], [-0.5, math.nan]])
    path = tmp_path / "sub" / "sanity.png"
    fig = plot_randomization({"ids": flat, "grad": falling}, save_path=path)
    assert isinstance(fig, Figure) and path.stat().st_size > 0
    signed, absolute = fig.axes
    assert [t.get_text() for t in signed.get_xticklabels()] == STAGES
    lines = {ln.get_label(): ln.get_ydata() for ln in signed.get_lines()}
    assert list(lines["ids"]) == [1.0, 1.0, 1.0]
    assert list(lines["grad"]) == pytest.approx([0.7, 0.0, -0.5])
    grad_abs = [ln for ln in absolute.get_lines() if ln.get_label() == "grad"][0]
    assert list(grad_abs.get_ydata()) == pytest.approx([0.7, 0.2, 0.5])
    assert signed.get_ylim()[0] < -0.5  # the band below -0.25 is shown
    assert matplotlib.get_backend() == backend


def test_draws_into_given_axes():
    fig = Figure()
    ax = fig.add_subplot(1, 1, 1)
    out = plot_randomization({"a": result([[0.5], [0.1]])}, ["spearman"], axes=ax)
    assert out is fig and len(ax.get_lines()) == 2  # the curve and the zero line


def test_bad_inputs():
    with pytest.raises(ValueError, match="no result"):
        plot_randomization({})
    with pytest.raises(TypeError, match="expected a RandomizationResult"):
        plot_randomization({"a": [1, 2]})
    with pytest.raises(ValueError, match="share their stages"):
        plot_randomization({"a": result([[1.0]]), "b": result([[1.0], [1.0]])})
    with pytest.raises(ValueError, match="variant must be"):
        plot_randomization({"a": result([[1.0]])}, ["pearson"])
    with pytest.raises(ValueError, match="1 axes for 2 variants"):
        plot_randomization({"a": result([[1.0]])}, axes=Figure().add_subplot(1, 1, 1))
