"""The layers x tokens map of the paper's Figure 3.

:func:`layer_token_heatmap` draws a ``(n_layers, L)`` array, such as
``layer_token_map(attrs)[i]``, as a heatmap with one row per layer (or per
beta); long inputs are wrapped into panels that share one colour scale. The
tokens shown are chosen by a :class:`HeatmapStyle`, as in the HTML heatmaps.
The figure is a :class:`matplotlib.figure.Figure` made without ``pyplot``.
"""

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from captum_iba.visualization._inputs import (
    ArrayLike,
    PathLike,
    as_array,
    prepare_tokens,
    save_figure,
)
from captum_iba.visualization.style import TOKEN_OPTIONS, HeatmapStyle

__all__ = ["LayerMapLayout", "layer_token_heatmap"]

#: The ``normalize`` choices of :func:`layer_token_heatmap`.
NORMALIZE = ("auto", "layer", "global", "diverging", None)


@dataclass(frozen=True)
class LayerMapLayout:
    """How :func:`layer_token_heatmap` lays out and labels its figure.

    Attributes:
        tokens_per_row (int, optional): Most tokens per panel. Default: as
            many 0.2-inch columns as ``max_width`` holds (71 at 16 inches); the
            panels are balanced (500 tokens: 8 panels of 63).
        max_width (float): Largest figure width in inches. Default 16.
        cmap (str, optional): Matplotlib colour map. Default ``"viridis"``,
            ``"RdBu_r"`` for the diverging scale.
        unit (str): The scores' unit, for the colour bar. Default ``"nats"``.
        ylabel (str): The y-axis label. Default ``"layer"``; e.g. ``"beta"``
            when the rows are one layer at several betas.
        dpi (int): Resolution of the saved figure. Default 150.

    Examples::

        >>> layout = LayerMapLayout(ylabel="beta", dpi=300)
        >>> layer_token_heatmap(by_beta, tokens, layer_labels=betas, layout=layout)
    """

    tokens_per_row: Optional[int] = None
    max_width: float = 16.0
    cmap: Optional[str] = None
    unit: str = "nats"
    ylabel: str = "layer"
    dpi: int = 150

    @classmethod
    def resolve(
        cls, layout: Optional["LayerMapLayout"], options: Dict[str, Any]
    ) -> "LayerMapLayout":
        """``layout`` (None: the defaults) with its fields given as keywords
        (earlier releases' arguments, taken out of ``options``) over it, with a
        DeprecationWarning naming the new form.

        Raises:
            TypeError: When ``layout`` is not a :class:`LayerMapLayout`.
        """
        if layout is None:
            layout = cls()
        elif not isinstance(layout, cls):
            raise TypeError(
                "layer_token_heatmap(): layout must be a LayerMapLayout; got "
                f"{type(layout).__name__}"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        old = {k: options.pop(k) for k in names if k in options}
        if not old:
            return layout
        spelled = ", ".join(f"{k}=..." for k in old)
        warnings.warn(
            f"layer_token_heatmap's keyword argument(s) {list(old)} are "
            "deprecated since 0.3; removed in 0.4: pass "
            f"layout=LayerMapLayout({spelled})",
            DeprecationWarning,
            stacklevel=3,
        )
        return dataclasses.replace(layout, **old)


def _short(token: str, limit: int = 14) -> str:
    return token if len(token) <= limit else token[: limit - 1] + "\u2026"


def _check_layer_map(
    layer_map: ArrayLike, normalize: Optional[str], labels: Optional[Sequence[Any]]
) -> Tuple[np.ndarray, Sequence[Any]]:
    """The map as a ``(n_layers, L)`` array, and the layer labels (default 1..)."""
    arr = as_array(layer_map, "layer_map")
    if arr.ndim != 2:
        raise ValueError(
            f"layer_map must be (n_layers, L), got shape {arr.shape}; for a batch "
            "from layer_token_map(...), pass one instance: layer_token_map(...)[i]"
        )
    if normalize not in NORMALIZE:
        raise ValueError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
    n_layers = arr.shape[0]
    if labels is None:
        labels = list(range(1, n_layers + 1))
    elif len(labels) != n_layers:
        raise ValueError(f"got {len(labels)} layer labels for {n_layers} layers (rows)")
    return arr, labels


def _normalized(
    values: np.ndarray, normalize: Optional[str], unit: str, ylabel: str
) -> Tuple[np.ndarray, str]:
    """The values as drawn, and the colour bar's label."""
    if normalize == "auto":
        normalize = "diverging" if bool((values < 0).any()) else "layer"
    if normalize == "diverging":
        top = np.abs(values).max(axis=1, keepdims=True)
        values = np.divide(values, top, out=np.zeros_like(values), where=top > 0)
        return values, f"score / largest |score| per {ylabel} (diverging)"
    if normalize == "layer":
        lo = values.min(axis=1, keepdims=True)
        span = values.max(axis=1, keepdims=True) - lo
        values = np.divide(values - lo, span, out=np.zeros_like(values), where=span > 0)
        return values, f"min-max scaled per {ylabel}"
    if normalize == "global":
        lo, span = float(values.min()), float(values.max() - values.min())
        values = (values - lo) / span if span > 0 else np.zeros_like(values)
        return values, "min-max scaled"
    return values, f"capacity ({unit})" if unit else "score"


@dataclass(frozen=True)
class _Grid:
    """Panels and sizes (inches) of a layer map: about 0.2 in per token column,
    labels rotated when dense, long inputs wrapped into balanced panels."""

    n_tokens: int
    n_layers: int
    n_panels: int
    per_panel: int
    width: float
    height: float
    fontsize: float
    step: int  # show every `step`-th token label
    rotation: int

    @classmethod
    def plan(
        cls,
        words: Sequence[str],
        n_layers: int,
        tokens_per_row: Optional[int],
        max_width: float,
        has_title: bool,
    ) -> "_Grid":
        n = len(words)
        if tokens_per_row is None:
            # as many 0.2-inch token columns as max_width holds
            tokens_per_row = max(10, int((max_width - 1.8) / 0.2))
        if tokens_per_row < 1:
            raise ValueError(f"tokens_per_row must be >= 1, got {tokens_per_row}")
        n_panels = math.ceil(n / tokens_per_row)
        per_panel = math.ceil(n / n_panels)  # balanced panels
        label_len = max(len(_short(w)) for w in words)
        cell_w = min(0.45, (max_width - 1.8) / per_panel)
        fontsize = float(np.clip(cell_w * 72 * 0.75, 5.0, 10.0))
        rotation = 90 if cell_w < 0.3 or label_len > 6 else 45
        label_h = (label_len * 0.6 * fontsize / 72) * (1.0 if rotation == 90 else 0.75)
        row_h = min(0.3, max(0.12, 2.4 / n_layers))
        panel_h = n_layers * row_h + label_h + 0.25
        return cls(
            n_tokens=n,
            n_layers=n_layers,
            n_panels=n_panels,
            per_panel=per_panel,
            width=max(5.0, min(max_width, 1.8 + cell_w * per_panel)),
            height=panel_h * n_panels
            + (0.4 if has_title else 0.1)
            + (0.6 if n_panels > 1 else 0),
            fontsize=fontsize,
            # every `step`-th label when even 5 pt labels do not fit
            step=max(1, math.ceil(5.0 / (cell_w * 72 * 0.9))),
            rotation=rotation,
        )

    def span(self, panel: int) -> Tuple[int, int]:
        """The token range ``[lo, hi)`` of a panel."""
        lo = panel * self.per_panel
        return lo, min(self.n_tokens, lo + self.per_panel)

    def panel_block(self, values: np.ndarray, panel: int) -> np.ndarray:
        """A panel's values, NaN-padded to the panel width."""
        lo, hi = self.span(panel)
        block = np.full((self.n_layers, self.per_panel), np.nan)
        block[:, : hi - lo] = values[:, lo:hi]
        return block

    def label_panel(
        self,
        ax: Axes,
        words: Sequence[str],
        panel: int,
        layer_labels: Sequence[Any],
        ylabel: str,
    ) -> None:
        """Token labels below, layer labels on the left, no frame."""
        lo, hi = self.span(panel)
        ax.set_facecolor("white")
        cols = list(range(0, hi - lo, self.step))
        ax.set_xticks(cols)
        ax.set_xticklabels(
            [_short(words[lo + c]) for c in cols],
            rotation=self.rotation,
            ha="center" if self.rotation == 90 else "right",
            rotation_mode="anchor" if self.rotation != 90 else "default",
            fontsize=self.fontsize,
        )
        rows = list(range(0, self.n_layers, max(1, math.ceil(self.n_layers / 24))))
        ax.set_yticks(rows)
        ax.set_yticklabels(
            [str(layer_labels[r]) for r in rows], fontsize=min(9.0, self.fontsize + 1)
        )
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(length=2, pad=1)
        for spine in ax.spines.values():
            spine.set_visible(False)


def layer_token_heatmap(
    layer_map: ArrayLike,
    tokens: Sequence[str],
    *,
    token_mask: Optional[ArrayLike] = None,
    normalize: Optional[str] = "auto",
    layer_labels: Optional[Sequence[Any]] = None,
    title: Optional[str] = None,
    save_path: Optional[PathLike] = None,
    style: Optional[HeatmapStyle] = None,
    layout: Optional["LayerMapLayout"] = None,
    **style_options: Any,
) -> Figure:
    """Plot a layers x tokens attribution map (the paper's Figure 3).

    Row ``i`` is the bottleneck inserted after layer ``layer_labels[i]``
    (default ``i + 1``, the paper's numbering: ``encoder_layers(model)[8]``
    is "layer 9"); the first layer is at the top. Long inputs are wrapped into
    several panels of at most ``tokens_per_row`` tokens that share one colour
    scale; the figure grows with the number of tokens up to ``max_width``
    inches, and token labels are rotated, shortened (14 characters) and, when
    still too dense, thinned.

    Args:
        layer_map (Tensor or array): ``(n_layers, L)`` scores, e.g.
            ``layer_token_map(attributions)[i]`` for instance ``i``.
        tokens (Sequence[str]): The ``L`` tokens.
        token_mask (Tensor or array, optional): ``(L,)``, 0 at padding.
        normalize (str, optional): ``"auto"`` (the default: ``"layer"``
            when every score is >= 0, as IBA's capacities are, else
            ``"diverging"``), ``"layer"`` (each row min-max scaled to [0, 1]
            on its own, as the paper's released code scales a heatmap: where
            *within* a layer the information is), ``"global"`` (all rows
            min-max scaled together), ``"diverging"`` (each row divided by its
            largest magnitude, in [-1, 1], on a diverging colour map) or
            ``None`` (raw scores, one colour scale from the smallest to the
            largest value shown: IBA's capacities are large and close
            together, so rows look uniform). The colour bar says which.
        layer_labels (Sequence, optional): ``n_layers`` labels for the y axis.
        title (str, optional): Figure title.
        save_path (str or PathLike, optional): Also save the figure there (PNG
            unless the suffix says otherwise), at ``layout.dpi``.
        style (HeatmapStyle, optional): Its ``skip_tokens``,
            ``merge_subwords`` and ``subword_prefix`` choose the tokens shown
            (its ``scale`` is not used: see ``normalize``). Default:
            ``HeatmapStyle()``.
        layout (LayerMapLayout, optional): Panels, width, colour map, unit,
            y-axis label and resolution (:class:`LayerMapLayout`). Default:
            ``LayerMapLayout()``; ``LayerMapLayout(ylabel="beta")`` when the
            rows are one layer at several betas (the paper's Appendix E)
            with ``layer_labels`` the beta values.
        **style_options: Those three options as keywords, over ``style``:
            ``skip_tokens`` (Iterable[str]): tokens left out, default
            :data:`DEFAULT_SKIP_TOKENS`; ``merge_subwords`` (bool): merge
            ``"##"`` pieces (scores summed per layer), default False;
            ``subword_prefix`` (str): the continuation marker, default
            ``"##"``. The fields of :class:`LayerMapLayout` as keywords
            (``ylabel=``, ``dpi=`` ..., earlier releases' arguments) still
            work over ``layout``, with a DeprecationWarning.

    Returns:
        matplotlib.figure.Figure: The figure (one axes per panel plus the
        colour bar).

    Raises:
        ValueError: If ``layer_map`` is not 2-D, the tokens, mask or layer
            labels do not match it, or ``normalize`` is unknown.
        TypeError: On a keyword that is not a style option.
    """
    layout = LayerMapLayout.resolve(layout, style_options)
    style = HeatmapStyle.resolve(
        style, style_options, "layer_token_heatmap", TOKEN_OPTIONS
    )
    arr, layer_labels = _check_layer_map(layer_map, normalize, layer_labels)
    words, values = prepare_tokens(tokens, arr, token_mask=token_mask, style=style)
    if not words:
        raise ValueError("no token left to show (all padding or skipped)")
    values, bar_label = _normalized(values, normalize, layout.unit, layout.ylabel)
    grid = _Grid.plan(
        words, arr.shape[0], layout.tokens_per_row, layout.max_width, bool(title)
    )
    fig = Figure(figsize=(grid.width, grid.height), layout="constrained")
    axes = fig.subplots(grid.n_panels, 1, squeeze=False)[:, 0]
    vmin, vmax = float(values.min()), float(values.max())
    if vmax <= vmin:
        vmax = vmin + 1.0
    cmap = layout.cmap
    if "diverging" in bar_label:
        vmin, vmax, cmap = -1.0, 1.0, cmap or "RdBu_r"
    for p, ax in enumerate(axes):
        image = ax.imshow(
            np.ma.masked_invalid(grid.panel_block(values, p)),
            aspect="auto",
            interpolation="nearest",
            cmap=cmap or "viridis",
            vmin=vmin,
            vmax=vmax,
        )
        grid.label_panel(ax, words, p, layer_labels, layout.ylabel)
    if title:
        fig.suptitle(title, fontsize=11)
    if grid.n_panels == 1:
        bar = fig.colorbar(image, ax=list(axes), pad=0.01, fraction=0.04)
    else:  # a short bar above the panels rather than one as tall as the figure
        bar = fig.colorbar(
            image, ax=list(axes), location="top", shrink=0.35, aspect=40, pad=0.01
        )
    bar.set_label(bar_label, fontsize=9)
    bar.ax.tick_params(labelsize=8)
    if save_path is not None:
        save_figure(fig, save_path, layout.dpi)
    return fig
