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


def test_labels_do_not_overlap_when_points_are_close():
    close = {
        "IBA l3 (old default)": (0.84, 0.396, (0.36, 0.43)),
        "IBA l4 (new default)": (0.19, 0.380, (0.34, 0.42)),
        "LOO": (0.98, 0.424, (0.39, 0.46)),
        "iba-faithful (l1, chosen)": (1.06, 0.513, (0.48, 0.55)),
        "IG": (2.21, 0.524, (0.49, 0.56)),
        "random": (0.0, 0.12),
    }
    fig = plot_cost_faithfulness(close, highlight=["IBA l3 (old default)"])
    ax = fig.axes[0]
    fig.draw_without_rendering()
    boxes = {t.get_text(): t.get_window_extent() for t in ax.texts}
    assert set(boxes) == set(close)
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
    frame = ax.get_window_extent()
    for name, box in boxes.items():  # every label inside the axes
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, name


def test_a_given_figure_keeps_its_canvas():
    from matplotlib.figure import Figure

    fig = Figure()
    canvas = fig.canvas
    plot_cost_faithfulness(POINTS, ax=fig.add_subplot(1, 1, 1))
    assert fig.canvas is canvas


def test_a_label_hemmed_in_by_tall_bars_goes_above_its_own():
    # IMDB's report split: the default's label is too long for either side,
    # AttnLRP's bar on its left and feature ablation's on its right.
    hemmed = {
        "llm-random (n 100)": (0.0, 0.081, (0.065, 0.098)),
        "llm-attnlrp (n 100)": (3.5, 0.166, (0.143, 0.187)),
        "llm-iba-deletion (n 100)": (47.0, 0.161, (0.140, 0.181)),
        "llm-ig (n 100)": (150.0, 0.091, (0.073, 0.108)),
        "llm-ablation (n 24)": (480.0, 0.143, (0.098, 0.188)),
    }
    fig = plot_cost_faithfulness(hemmed, highlight=["llm-iba-deletion (n 100)"])
    ax = fig.axes[0]
    fig.draw_without_rendering()
    boxes = {t.get_text(): t.get_window_extent() for t in ax.texts}
    to_px = ax.transData.transform
    for name, box in boxes.items():
        for other, (cost, _, (low, high)) in hemmed.items():
            (x, y0), (_, y1) = to_px([(max(cost, 1e-3), low), (max(cost, 1e-3), high)])
            bar_crossed = box.x0 < x < box.x1 and box.y0 < y1 and y0 < box.y1
            assert not bar_crossed, (name, other)
        for other, box2 in boxes.items():
            assert other == name or not box.overlaps(box2), (name, other)
    label = boxes["llm-iba-deletion (n 100)"]
    top = to_px([(47.0, 0.181)])[0]
    assert label.x0 < top[0] < label.x1 and label.y0 > top[1]  # centred above


def test_a_crowded_plot_numbers_its_points_and_keys_them():
    """Past 14 points (a context study's 24 methods crowded their names) the
    labels are numbers in order of cost and a key right of the axes names
    them, each number once; 14 or fewer keep their names."""
    crowded = {f"m{i}": (10.0 + i % 5, 0.5 + 0.01 * i, (0.4, 0.8)) for i in range(20)}
    fig = plot_cost_faithfulness(crowded, highlight=["m3"])
    ax = fig.axes[0]
    by_cost = sorted(crowded, key=lambda k: (crowded[k][0], k))
    assert sorted(int(t.get_text()) for t in ax.texts) == list(range(1, 21))
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert key == [f"{i + 1}  {name}" for i, name in enumerate(by_cost)]
    fig.draw_without_rendering()
    assert ax.get_legend().get_window_extent().x0 > ax.get_window_extent().x1
    few = dict(list(crowded.items())[:14])
    ax = plot_cost_faithfulness(few).axes[0]
    assert {t.get_text() for t in ax.texts} == set(few) and ax.get_legend() is None
