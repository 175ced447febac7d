r"""The cost-faithfulness picture: a method's faithfulness against what it costs.

:func:`plot_cost_faithfulness` draws one point per method (and IBA
configuration): CPU-seconds per instance on a log x axis, a faithfulness score
(AOPC by default) on the y axis, with its confidence interval as an error bar.
Methods in the upper left are both cheap and faithful; the Pareto front (no
other method is both cheaper and more faithful) is drawn as a line.
"""

import math
import os
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

__all__ = ["pareto_front", "plot_cost_faithfulness"]

#: ``name -> (cost, score)`` or ``name -> (cost, score, (low, high))``.
Points = Mapping[str, Tuple[Any, ...]]


def _unpack(name: str, value: Sequence[Any]) -> Tuple[float, float, float, float]:
    if len(value) not in (2, 3):
        raise ValueError(
            f"{name!r}: expected (cost, score) or (cost, score, (low, high)); "
            f"got {value!r}"
        )
    cost, score = float(value[0]), float(value[1])
    low, high = (score, score) if len(value) == 2 else map(float, value[2])
    if not (math.isfinite(cost) and cost >= 0 and math.isfinite(score)):
        raise ValueError(f"{name!r}: cost must be >= 0 and finite, score finite")
    return cost, score, low, high


def pareto_front(points: Points) -> list:
    """The names no other method beats on both cost (lower) and score (higher).

    Args:
        points (Mapping): ``name -> (cost, score[, (low, high)])``.

    Returns:
        list[str]: The front, from the cheapest to the most expensive.
    """
    pts = {k: _unpack(k, v)[:2] for k, v in points.items()}
    front = [
        k
        for k, (c, s) in pts.items()
        if not any(
            (c2 <= c and s2 >= s) and (c2 < c or s2 > s) for c2, s2 in pts.values()
        )
    ]
    return sorted(front, key=lambda k: pts[k][0])


def plot_cost_faithfulness(
    points: Points,
    *,
    highlight: Sequence[str] = (),
    min_cost: float = 1e-3,
    xlabel: str = "CPU-seconds per instance (one thread, log scale)",
    ylabel: str = "AOPC (higher is more faithful)",
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[Union[str, "os.PathLike[str]"]] = None,
    dpi: int = 150,
) -> Figure:
    """One point per method: cost on a log axis, faithfulness with its interval.

    Each point is labelled with its name; past 14 points (too many names to
    place without hiding one another) with its number in order of cost, and
    a key right of the axes names them.

    Args:
        points (Mapping): ``name -> (cost, score)`` or ``name -> (cost, score,
            (low, high))``, e.g. mean CPU-seconds per instance and AOPC with
            its 95 % bootstrap interval.
        highlight (Sequence[str]): Names drawn larger, in red (e.g. IBA's
            configurations).
        min_cost (float): Costs below it (free methods such as random) are
            drawn at it. Default 1e-3.
        xlabel (str): The x label.
        ylabel (str): The y label.
        title (str, optional): The axes title.
        ax (matplotlib.axes.Axes, optional): Draw into these axes.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure.
    """
    if not points:
        raise ValueError("no point to plot")
    data = {k: _unpack(k, v) for k, v in points.items()}
    keyed = len(data) > _ROOMY  # too many for names: numbers and a key
    if ax is None:
        fig = Figure(figsize=(9.4 if keyed else 6.2, 4.2), layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    front = pareto_front(points)
    xs = [max(data[k][0], min_cost) for k in front]
    ax.plot(xs, [data[k][1] for k in front], "-", color="0.75", zorder=1)
    for name, (cost, score, low, high) in data.items():
        mark = name in highlight
        ax.errorbar(
            max(cost, min_cost),
            score,
            yerr=np.array([[score - low], [high - score]]),
            fmt="o",
            color="tab:red" if mark else "tab:blue",
            markersize=7 if mark else 5,
            capsize=2,
            zorder=3,
        )
    ax.set_xscale("log")
    ax.margins(x=0.1)  # room for the labels of the cheapest and dearest points
    left, right = ax.get_xlim()  # and more on the right: a label reads rightwards
    ax.set_xlim(left, right * (right / left) ** (0.05 if keyed else 0.2))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.25)
    if title:
        ax.set_title(title)
    by_cost = sorted(data, key=lambda k: (data[k][0], k))
    texts = {k: str(i + 1) if keyed else k for i, k in enumerate(by_cost)}
    if keyed:  # first: the key narrows the axes the labels are placed in
        _key(ax, [(texts[k], k, k in highlight) for k in by_cost])
    _place_labels(ax, data, highlight, min_cost, texts)
    if save_path is not None:
        fig.savefig(os.fspath(save_path), dpi=dpi)
    return fig


def _key(ax: Axes, rows: Sequence[Tuple[str, str, bool]]) -> None:
    """The key of a numbered plot, right of the axes: ``(number, name,
    highlighted)`` per point, in the numbers' order."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], linestyle="", marker="o", markersize=4,
               color="tab:red" if mark else "tab:blue")
        for _, _, mark in rows
    ]  # fmt: skip
    ax.legend(
        handles,
        [f"{number}  {name}" for number, name, _ in rows],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=6.5,
        frameon=False,
        handletextpad=0.3,
        borderaxespad=0.0,
    )


def _beside(*dys: int) -> list:
    """Places beside the point, right then left, at each height ``dy``."""
    return [
        ("point", dx, dy, "left" if dx > 0 else "right", "baseline")
        for dy in dys
        for dx in (6, -6)
    ]


#: The most points labelled by name; more are numbered, with a key.
_ROOMY = 14

#: Where a label may go (tried in this order): ``(anchor, dx, dy, ha, va)``,
#: the offset in points from the point (``"point"``) or from the top or bottom
#: of its error bar, centred above or below it (when both sides are taken).
_PLACES = [
    *_beside(3, -11, 11),
    ("high", 0, 4, "center", "bottom"),
    ("low", 0, -4, "center", "top"),
    *_beside(-19, 19, -27),
]


def _place_labels(
    ax: Axes,
    data: Mapping[str, Tuple[float, ...]],
    highlight: Any,
    min_cost: float,
    texts: Mapping[str, str],
) -> None:
    """Labels (``texts``: each point's) next to their points, each at the
    first place where it overlaps no label, point or error bar placed before
    it and stays inside the axes (if none is free, the place hiding the
    least of them)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ax.get_figure()
    canvas = fig.canvas
    if hasattr(canvas, "get_renderer"):
        renderer = canvas.get_renderer()
    else:  # a bare Figure: measure with Agg, then give the figure its canvas back
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.set_canvas(canvas)
    fig.draw_without_rendering()  # the final layout, before measuring
    to_px = ax.transData.transform
    taken = []  # pixel boxes of the markers and error bars, then of the labels
    for cost, _score, low, high in data.values():
        (x, y0), (_, y1) = to_px(
            [(max(cost, min_cost), low), (max(cost, min_cost), high)]
        )
        taken.append(Bbox.from_extents(x - 5, min(y0, y1) - 5, x + 5, max(y0, y1) + 5))
    frame = ax.get_window_extent(renderer)
    for name, (cost, score, low, high) in sorted(data.items(), key=lambda kv: kv[1][0]):
        x = max(cost, min_cost)
        anchors = {"point": (x, score), "high": (x, high), "low": (x, low)}
        text = ax.annotate(
            texts[name],
            (x, score),
            textcoords="offset points",
            xytext=_PLACES[0][1:3],
            fontsize=7.5,
            color="tab:red" if name in highlight else "0.15",
        )
        best = None  # (cost, place): the place that hides the least
        for place in _PLACES:
            box = _put(text, anchors, place, renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1
            inside = inside and frame.y0 <= box.y0 and box.y1 <= frame.y1
            hidden = sum(_overlap(box, other) for other in taken)
            cost = hidden + (0.0 if inside else box.width * box.height)
            if best is None or cost < best[0]:
                best = (cost, place)
            if cost == 0:
                break
        taken.append(_put(text, anchors, best[1], renderer))


def _put(text: Any, anchors: Mapping[str, Tuple[float, float]], place: Tuple,
         renderer: Any) -> Bbox:  # fmt: skip
    """Moves ``text`` to ``place`` (an entry of :data:`_PLACES`); its box."""
    anchor, dx, dy, ha, va = place
    text.xy = anchors[anchor]
    text.set_position((dx, dy))
    text.set_horizontalalignment(ha)
    text.set_verticalalignment(va)
    return text.get_window_extent(renderer)


def _overlap(a: Bbox, b: Bbox) -> float:
    """The area two boxes share (0 when they only touch: ``Bbox.overlaps``
    counts touching)."""
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(
        0.0, min(a.y1, b.y1) - max(a.y0, b.y0)
    )
