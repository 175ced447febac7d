r"""Degradation curves: the paper's Figures 1 and 2.

:func:`degradation_curves` turns ``{name: (levels, values)}``, ``{name:
result}`` (e.g. :class:`captum_iba.metrics.DegradationResult`) or a
comparison object into plain curves, optionally as the normalised drop
:math:`\bar d` (:func:`normalized_drop`, whose arithmetic is
:func:`captum_iba.metrics.result.normalized_drop`).
:func:`plot_degradation_curves` draws one line per method (Figure 1);
:func:`plot_layer_sweep` and :func:`plot_beta_sweep` one per layer or beta
(Figure 2). Figures are made without ``pyplot``; pass ``ax=`` to draw into
existing axes.
"""

import math
import numbers
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from captum_iba.metrics import result as metrics_result
from captum_iba.visualization._inputs import ArrayLike, PathLike, as_array, save_figure

__all__ = [
    "degradation_curves",
    "normalized_drop",
    "plot_beta_sweep",
    "plot_degradation_curves",
    "plot_layer_sweep",
]

Curve = Tuple[np.ndarray, np.ndarray]


def _curve_pair(name: Any, value: Any) -> Curve:
    levels, values = value
    lv = as_array(levels, f"levels of {name!r}").reshape(-1)
    vals = as_array(values, f"values of {name!r}").reshape(-1)
    if lv.shape != vals.shape:
        raise ValueError(
            f"curve {name!r}: {lv.size} levels but {vals.size} values; they must "
            "match one to one"
        )
    if lv.size == 0:
        raise ValueError(f"curve {name!r} is empty")
    return lv, vals


def _is_pair(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2


def _result_curve(name: Any, result: Any) -> Curve:
    """The mean-probability curve of a result-like object, level 0 first if known."""
    if not hasattr(result, "levels"):
        raise TypeError(
            f"{name!r}: expected (levels, values) or an object with 'levels' and a "
            f"mean curve ('full_curve', 'curve' or 'mean_curve'); got "
            f"{type(result).__name__}"
        )
    levels = as_array(list(result.levels), f"levels of {name!r}").reshape(-1)
    full = getattr(result, "full_curve", None)
    if full is not None:
        values = as_array(full, f"full_curve of {name!r}").reshape(-1)
        if values.size == levels.size + 1:
            return np.concatenate([[0.0], levels]), values
    for attr in ("curve", "mean_curve"):
        curve = getattr(result, attr, None)
        if curve is None:
            continue
        if callable(curve):
            curve = curve()
        values = as_array(curve, f"{attr} of {name!r}").reshape(-1)
        o = getattr(result, "original_probability", None)
        if o is not None and values.size == levels.size:
            return np.concatenate([[0.0], levels]), np.concatenate([[float(o)], values])
        return _curve_pair(name, (levels, values))
    raise TypeError(
        f"{name!r}: {type(result).__name__} has 'levels' but no mean curve "
        "('full_curve', 'curve' or 'mean_curve')"
    )


def normalized_drop(
    curves: Mapping[Any, Tuple[ArrayLike, ArrayLike]], m: Optional[float] = None
) -> Dict[Any, Curve]:
    r"""The paper's normalised probability drop of mean-probability curves.

    :math:`\bar d = (\bar p - m) / (o - m)` (Section 4), where :math:`o` is a
    curve's value at level 0 (the original inputs) and :math:`m` the lowest
    last-level (fully degraded) value across the curves. Every curve therefore
    starts at 1, and the best method reaches 0. The arithmetic is
    :func:`captum_iba.metrics.result.normalized_drop`'s, as in
    :func:`captum_iba.metrics.compare`.

    Args:
        curves (Mapping): ``name -> (levels, mean probabilities)``, each with
            level 0 first.
        m (float, optional): Override the floor :math:`m`.

    Returns:
        dict: ``name -> (levels, d)``.

    Raises:
        ValueError: If a curve does not start at level 0.
    """
    pairs = {k: _curve_pair(k, v) for k, v in curves.items()}
    if not pairs:
        raise ValueError("no curve given")
    for k, (lv, _) in pairs.items():
        if lv[0] != 0:
            raise ValueError(
                f"curve {k!r} does not start at level 0: the normalised drop needs "
                "the original probability o as the first point (or pass values that "
                "are already normalised, with normalized=False)"
            )
    drops, _ = metrics_result.normalized_drop([v for _, v in pairs.values()], m)
    return {k: (lv, d) for (k, (lv, _)), d in zip(pairs.items(), drops)}


def degradation_curves(
    results: Any, *, normalized: bool = False, m: Optional[float] = None
) -> Dict[Any, Curve]:
    """Plain ``name -> (levels, values)`` curves from any supported input.

    This is the adapter between :mod:`captum_iba.metrics` (or any other
    source) and the plotting functions. ``results`` may be:

    * a mapping ``name -> (levels, values)``: plain arrays, plotted as given
      (``values`` are mean target probabilities, or already normalised drops);
    * a mapping ``name -> result`` where a *result* (duck typing; e.g.
      :class:`captum_iba.metrics.DegradationResult`) has ``levels`` (K
      removal levels) and one of ``full_curve`` (K + 1 mean probabilities,
      level 0 first), ``curve`` or ``mean_curve`` (K values, or a method
      returning them; with ``original_probability`` it is prefixed by level
      0). Pairs and results may be mixed;
    * a comparison object (e.g. :class:`captum_iba.metrics.Comparison`) with
      ``levels`` and ``normalized_curves`` (``name -> K + 1`` normalised drops,
      level 0 first): only with ``normalized=True``, and its own ``m`` is kept.

    Args:
        results: See above.
        normalized (bool, optional): Return the normalised drop
            :math:`\\bar d` (:func:`normalized_drop`) instead of the mean
            probabilities. Default: False.
        m (float, optional): The floor of the normalised drop; default: the
            lowest last-level value across the curves (as
            :func:`captum_iba.metrics.compare` does).

    Returns:
        dict: ``name -> (levels, values)`` as float64 arrays; levels are
        fractions of the removable tokens (or counts, if so run).

    Raises:
        TypeError: On an object that has no levels or curve.
        ValueError: On mismatched levels and values.
    """
    if hasattr(results, "normalized_curves") and hasattr(results, "levels"):
        if not normalized:
            raise ValueError(
                "a comparison object holds only normalised curves: pass "
                "normalized=True, or the results themselves for probabilities"
            )
        levels = as_array(list(results.levels), "levels").reshape(-1)
        out: Dict[Any, Curve] = {}
        for name, curve in results.normalized_curves.items():
            vals = as_array(curve, f"normalized_curves[{name!r}]").reshape(-1)
            lv = (
                np.concatenate([[0.0], levels])
                if vals.size == levels.size + 1
                else levels
            )
            out[name] = _curve_pair(name, (lv, vals))
        return out
    if not isinstance(results, Mapping):
        raise TypeError(
            "results must be a mapping name -> (levels, values) or name -> result "
            f"object, or a comparison object; got {type(results).__name__}"
        )
    curves = {
        k: _curve_pair(k, v) if _is_pair(v) else _result_curve(k, v)
        for k, v in results.items()
    }
    if not curves:
        raise ValueError("no curve given")
    return normalized_drop(curves, m) if normalized else curves


def _new_axes(ax: Optional[Axes], figsize: Tuple[float, float]) -> Tuple[Figure, Axes]:
    if ax is not None:
        return ax.get_figure(), ax  # type: ignore[return-value]
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def _plot_curves(
    curves: Mapping[Any, Curve],
    labels: Mapping[Any, str],
    colors: Mapping[Any, Any],
    styles: Mapping[Any, str],
    *,
    normalized: bool,
    legend_title: Optional[str] = None,
    xlabel: Optional[str] = None,
    ylabel: Optional[str] = None,
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    """One line per curve; the x axis in per cent when the levels are fractions."""
    fig, ax = _new_axes(ax, (5.2, 3.6))
    all_levels = np.unique(np.concatenate([lv for lv, _ in curves.values()]))
    as_percent = bool(all_levels.max() <= 1.0)
    scale = 100.0 if as_percent else 1.0
    for key, (lv, vals) in curves.items():
        ax.plot(
            lv * scale,
            vals,
            styles.get(key, "-"),
            marker="o",
            markersize=3.5,
            linewidth=1.6,
            color=colors.get(key),
            label=labels[key],
        )
    if all_levels.size <= 12:
        ax.set_xticks(all_levels * scale)
        fmt = "{:.0f}%" if as_percent else "{:g}"
        ax.set_xticklabels([fmt.format(x * scale) for x in all_levels], fontsize=8)
    if xlabel is None:
        what = "share of tokens" if as_percent else "tokens"
        xlabel = f"{what} removed (most relevant first)"
    if ylabel is None:
        ylabel = (
            "normalised probability drop $\\bar{d}$"
            if normalized
            else "mean probability of the target"
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    legend_kw: Dict[str, Any] = dict(
        title=legend_title, fontsize=8, title_fontsize=8, frameon=False
    )
    if len(curves) > 5:  # many lines: keep the legend off the curves
        legend_kw.update(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.legend(**legend_kw)
    if title:
        ax.set_title(title)
    if save_path is not None:
        save_figure(fig, save_path, dpi)
    return fig


def plot_degradation_curves(
    results: Any,
    *,
    normalized: bool = False,
    m: Optional[float] = None,
    colors: Optional[Mapping[Any, Any]] = None,
    title: Optional[str] = None,
    xlabel: Optional[str] = None,
    ylabel: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    r"""Degradation curves, one line per attribution method (Figure 1).

    The x axis is the share of tokens removed (most relevant first), in per
    cent when the levels are fractions; the y axis the mean probability of
    the target class, or with ``normalized=True`` the normalised drop
    :math:`\bar d = (\bar p - m)/(o - m)`. A steeper fall is a better method.

    Args:
        results: ``{name: (levels, values)}``, ``{name: result}`` or a
            comparison object; see :func:`degradation_curves`.
        normalized (bool, optional): Plot :math:`\bar d`. Default: False.
        m (float, optional): Floor of :math:`\bar d` (default: the lowest
            fully degraded mean probability across the methods).
        colors (Mapping, optional): ``name -> colour``.
        title (str, optional): Axes title.
        xlabel (str, optional): Override the x label.
        ylabel (str, optional): Override the y label.
        ax (matplotlib.axes.Axes, optional): Draw into these axes (e.g. a panel
            of a ``pyplot`` figure, one per data set); default: a new figure.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure (of ``ax`` when given).

    Examples::

        >>> from captum_iba.metrics import degradation_test
        >>> res = {"IBA": degradation_test(...), "IG": degradation_test(...)}
        >>> plot_degradation_curves(res, normalized=True, save_path="fig1.png")
    """
    curves = degradation_curves(results, normalized=normalized, m=m)
    labels = {k: str(k) for k in curves}
    figure = dict(title=title, ax=ax, save_path=save_path, dpi=dpi)
    return _plot_curves(
        curves,
        labels,
        dict(colors or {}),
        {},
        normalized=normalized,
        xlabel=xlabel,
        ylabel=ylabel,
        **figure,
    )


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _sweep_styles(
    keys: Sequence[Any], cmap: str, log: bool
) -> Tuple[List[Any], Dict[Any, Any], Dict[Any, str]]:
    """Order keys (numbers sorted first), colour numbers along ``cmap``."""
    from matplotlib import colormaps

    nums = sorted((k for k in keys if _is_number(k)), key=float)
    others = [k for k in keys if not _is_number(k)]
    colours: Dict[Any, Any] = {}
    styles: Dict[Any, str] = {}
    cm = colormaps[cmap]
    if nums:
        pos = np.array(
            [math.log10(float(k)) if log and float(k) > 0 else float(k) for k in nums]
        )
        span = pos.max() - pos.min()
        frac = (pos - pos.min()) / span if span > 0 else np.zeros_like(pos)
        for k, f in zip(nums, frac):
            colours[k] = cm(0.05 + 0.85 * f)
    greys = ["0.15", "0.45", "0.65"]
    for i, k in enumerate(others):
        colours[k] = greys[i % len(greys)]
        styles[k] = "--"
    return nums + others, colours, styles


def _beta_label(beta: Any) -> str:
    if not _is_number(beta):
        return str(beta)
    b = float(beta)
    if b > 0:
        e = math.log10(b)
        if abs(e - round(e)) < 1e-9:
            return f"$\\beta = 10^{{{int(round(e))}}}$"
    return f"$\\beta = {b:g}$"


def _plot_sweep(
    results: Mapping[Any, Any],
    normalized: bool,
    m: Optional[float],
    cmap: str,
    log: bool,
    label_of: Callable[[Any], str],
    legend_title: Optional[str],
    figure: Dict[str, Any],
) -> Figure:
    """Curves keyed by a swept number: sorted, coloured along ``cmap``."""
    curves = degradation_curves(results, normalized=normalized, m=m)
    order, colours, styles = _sweep_styles(list(curves), cmap, log=log)
    return _plot_curves(
        {k: curves[k] for k in order},
        {k: label_of(k) for k in order},
        colours,
        styles,
        normalized=normalized,
        legend_title=legend_title,
        **figure,
    )


def _layer_label(layer: Any) -> str:
    return f"layer {layer}" if _is_number(layer) else str(layer)


def plot_layer_sweep(
    results: Mapping[Any, Any],
    *,
    normalized: bool = True,
    m: Optional[float] = None,
    cmap: str = "viridis",
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    r"""Degradation curves of IBA inserted after different layers (Figure 2a).

    Args:
        results (Mapping): ``layer -> (levels, values)`` or ``layer -> result``
            (see :func:`degradation_curves`). Integer keys are layer numbers as
            you want them shown (the paper counts from 1); they are sorted and
            coloured along ``cmap`` from the lowest to the highest layer. Other
            keys (e.g. ``"IG"`` for a reference method) are drawn dashed in grey.
        normalized (bool, optional): Plot the normalised drop :math:`\bar d`
            (as the paper does). Default: True.
        m (float, optional): Floor of :math:`\bar d`.
        cmap (str, optional): Colour map for the layers. Default ``"viridis"``.
        title (str, optional): Axes title.
        ax (matplotlib.axes.Axes, optional): Draw into these axes.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure.
    """
    figure = dict(title=title, ax=ax, save_path=save_path, dpi=dpi)
    return _plot_sweep(
        results, normalized, m, cmap, False, _layer_label, "IB after", figure
    )


def plot_beta_sweep(
    results: Mapping[Any, Any],
    *,
    normalized: bool = True,
    m: Optional[float] = None,
    cmap: str = "plasma",
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    r"""Degradation curves of IBA with different :math:`\beta` (Figure 2b).

    Args:
        results (Mapping): ``beta -> (levels, values)`` or ``beta -> result``
            (see :func:`degradation_curves`). Numeric keys are sorted and
            coloured along ``cmap`` on a log scale, labelled
            :math:`\beta = 10^{k}` for powers of ten. Other keys (e.g.
            ``"X only"`` for the layer output itself as the attribution) are
            drawn dashed in grey.
        normalized (bool, optional): Plot the normalised drop :math:`\bar d`.
            Default: True.
        m (float, optional): Floor of :math:`\bar d`.
        cmap (str, optional): Colour map for the betas. Default ``"plasma"``.
        title (str, optional): Axes title.
        ax (matplotlib.axes.Axes, optional): Draw into these axes.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure.
    """
    figure = dict(title=title, ax=ax, save_path=save_path, dpi=dpi)
    return _plot_sweep(results, normalized, m, cmap, True, _beta_label, None, figure)
