"""The model-randomisation sanity check as curves (Adebayo et al., 2018, Fig. 4).

:func:`plot_randomization` draws, for each method, the mean rank correlation
between its attributions on the trained and on the progressively randomised
model, stage by stage (the cascade's order on the x axis: the head first, the
embeddings last), with the 95 % bootstrap interval as a band; one panel per
similarity (signed Spearman, Spearman of absolute values). A method passes
when its curve falls towards 0; one that ignores the model stays at 1.
"""

from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from captum_iba.metrics.randomization_result import VARIANTS, RandomizationResult
from captum_iba.visualization._inputs import PathLike, save_figure

__all__ = ["plot_randomization"]

_TITLES = {
    "spearman": "Spearman rank correlation",
    "spearman_abs": "Spearman rank correlation of |scores|",
}


def _check(results: Mapping[str, Any]) -> Sequence[str]:
    if not results:
        raise ValueError("no result to plot")
    stages = None
    for name, res in results.items():
        if not isinstance(res, RandomizationResult):
            raise TypeError(
                f"{name!r}: expected a RandomizationResult, got {type(res).__name__}"
            )
        if stages is None:
            stages = list(res.stages)
        elif list(res.stages) != stages:
            raise ValueError(
                f"{name!r} has stages {res.stages}, the first result {stages}: "
                "the curves must share their stages"
            )
    return stages or []


def plot_randomization(
    results: Mapping[str, RandomizationResult],
    variants: Sequence[str] = VARIANTS,
    *,
    n_bootstrap: int = 1000,
    title: Optional[str] = None,
    axes: Optional[Union[Axes, Sequence[Axes]]] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    """Mean rank correlation per cascade stage, one curve per method.

    Args:
        results (Mapping[str, RandomizationResult]): Method name -> result of
            :func:`~captum_iba.metrics.cascading_randomization`; all with the
            same stages.
        variants (Sequence[str]): Which similarities, one panel each
            (``"spearman"``, ``"spearman_abs"``). Default both.
        n_bootstrap (int): Resamples of the 95 % interval bands. Default 1000.
        title (str, optional): The figure's title.
        axes (Axes or Sequence[Axes], optional): Draw into these (one per
            variant).
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure.

    Raises:
        ValueError: Without results, for results with different stages, an
            unknown variant, or a number of axes that is not one per variant.
        TypeError: For a value that is not a :class:`RandomizationResult`.
    """
    stages = _check(results)
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be in {VARIANTS}; got {variant!r}")
    if axes is None:
        fig = Figure(figsize=(5.2 * len(variants), 4.2), layout="constrained")
        panels = [
            fig.add_subplot(1, len(variants), i + 1) for i in range(len(variants))
        ]
    else:
        panels = [axes] if isinstance(axes, Axes) else list(axes)
        if len(panels) != len(variants):
            raise ValueError(f"{len(panels)} axes for {len(variants)} variants")
        fig = panels[0].get_figure()  # type: ignore[assignment]
    x = np.arange(len(stages))
    for ax, variant in zip(panels, variants):
        low = -0.25
        for name, res in results.items():
            mean = res.mean(variant).numpy()
            band = res.interval(variant, n_bootstrap=n_bootstrap).numpy()
            (line,) = ax.plot(x, mean, "o-", label=name, markersize=4)
            ax.fill_between(
                x, band[:, 0], band[:, 1], color=line.get_color(), alpha=0.15
            )
            low = min(low, float(np.nanmin(band)) - 0.05)
        ax.axhline(0.0, color="0.5", linewidth=0.8, linestyle="--")
        ax.set_xticks(x)
        ax.set_xticklabels(stages, rotation=45, ha="right")
        ax.set_ylim(low, 1.05)
        ax.set_xlabel("randomised from the top down to (cumulative)")
        ax.set_ylabel(_TITLES[variant])
        ax.grid(alpha=0.3)
    panels[-1].legend(fontsize="small", loc="best")
    if title:
        fig.suptitle(title)
    if save_path is not None:
        save_figure(fig, save_path, dpi)
    return fig
