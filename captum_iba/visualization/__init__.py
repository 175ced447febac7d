r"""Figures for IBA: token heatmaps, layer x token maps and degradation curves.

Three kinds of pictures, all built on plain inputs (lists of tokens, arrays of
scores, dicts of curves) so that any attribution method can be drawn the same
way:

* **Token heatmaps** (:func:`text_heatmap_html`, :func:`save_html`,
  :func:`visualize_text_records`) reuse Captum's text visualisation
  (:class:`captum.attr.visualization.VisualizationDataRecord` and its HTML
  formatters). Scores are divided by their largest magnitude over the tokens
  shown, so that they fall in Captum's colour range [-1, 1]: IBA capacities
  (always >= 0) become [0, 1], with the most informative token fully green.
  Every token and label is HTML-escaped (Captum's formatter inserts text as
  markup), padding is left out, and word pieces can be merged into words.
  Works without IPython; only :func:`visualize_text_records` uses it.
  Which tokens are shown (padding, special tokens, word pieces) and how
  scores are scaled is one :class:`HeatmapStyle`, given as ``style=`` or as
  the same options in keywords.
* **Layer x token maps** (:func:`layer_token_heatmap`), the paper's Figure 3,
  from a ``(n_layers, L)`` array such as ``layer_token_map(attrs)[i]``.
* **Degradation curves** (:func:`plot_degradation_curves`, and the layer and
  beta sweeps :func:`plot_layer_sweep` and :func:`plot_beta_sweep`), the paper's
  Figures 1 and 2, from ``{name: (levels, values)}`` or from result objects of
  :mod:`captum_iba.metrics` (see :func:`degradation_curves` for what such an
  object must provide).

* **The model-randomisation check** (:func:`plot_randomization`): the rank
  correlation of each method's attributions on the trained and on the
  progressively randomised model, per stage of the cascade (Adebayo et al.,
  2018), from :class:`captum_iba.metrics.RandomizationResult` objects.

Figures are :class:`matplotlib.figure.Figure` objects created without
``pyplot``, so they need no display and never change the global matplotlib
backend: save them with ``save_path=`` (or ``fig.savefig``), or let a notebook
show the returned figure. To draw a curve plot into an existing
``pyplot`` axes, pass ``ax=``.

Modules: :mod:`~captum_iba.visualization.text` (HTML heatmaps),
:mod:`~captum_iba.visualization.style` (:class:`HeatmapStyle`),
:mod:`~captum_iba.visualization.figures` (the layers x tokens map),
:mod:`~captum_iba.visualization.curves` (degradation curves and sweeps),
:mod:`~captum_iba.visualization.sanity` (the randomisation check), and
``_inputs`` (checks of arrays, masks and tokens; :func:`prepare_tokens`).
"""

from captum_iba._utils.lazy import exports, lazy_names

#: The public names, each with its module (imported on first use: the
#: terminal listing's scaling loads no plotting module).
_NAMES = exports(
    _inputs=["merge_word_pieces", "prepare_tokens", "scale_scores"],
    curves=[
        "degradation_curves",
        "normalized_drop",
        "plot_beta_sweep",
        "plot_degradation_curves",
        "plot_layer_sweep",
    ],
    figures=["LayerMapLayout", "layer_token_heatmap"],
    sanity=["plot_randomization"],
    style=["DEFAULT_SKIP_TOKENS", "HeatmapStyle"],
    text=[
        "heatmap_records",
        "save_html",
        "text_heatmap_html",
        "visualize_text_records",
    ],
    tradeoff=["pareto_front", "plot_cost_faithfulness"],
)
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())
