"""The cost-faithfulness plot and its Pareto front."""

import pytest

from captum_iba.visualization import pareto_front, plot_cost_faithfulness

POINTS = {
    "random": (0.0, 0.10),
    "cheap-good": (0.02, 0.44, (0.41, 0.47)),
    "dear-best": (3.2, 0.47, (0.44, 0.50)),
    "dominated": (0.7, 0.42),
    "tie-cost-worse": (0.02, 0.30),
}


def test_pareto_front():
    assert pareto_front(POINTS) == ["random", "cheap-good", "dear-best"]
    assert pareto_front({"a": (1.0, 0.5)}) == ["a"]


def test_plot_cost_faithfulness(tmp_path):
    path = tmp_path / "tradeoff.png"
    fig = plot_cost_faithfulness(POINTS, highlight=["cheap-good"], save_path=path)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert {t.get_text() for t in ax.texts} == set(POINTS)
    assert path.stat().st_size > 0
    with pytest.raises(ValueError, match="no point"):
        plot_cost_faithfulness({})
    with pytest.raises(ValueError, match="expected"):
        plot_cost_faithfulness({"x": (1.0,)})
    with pytest.raises(ValueError, match="cost"):
        plot_cost_faithfulness({"x": (-1.0, 0.3)})
