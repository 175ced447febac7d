"""captum-iba: Information Bottleneck Attribution for transformers, for Captum.

The public names, by layer (each layer imports only the ones above it):

* :mod:`captum_iba.attr` - IBA: the Captum layer method, its options and
  named configurations, its noise priors, per-token reductions;
* :mod:`captum_iba.metrics` - the degradation test and its aggregates;
* :mod:`captum_iba.evaluation` - attribution methods as per-token scorers and
  the comparison harness;
* :mod:`captum_iba.visualization` - token heatmaps, layer maps and curves;
* :mod:`captum_iba.registry` - the names of methods and priors.

The application layer (:mod:`captum_iba.app`: corpora, fine-tuning, the
reproduction and the ``captum-iba`` command) is imported on its own; one of
its functions is named here for a notebook's one line,
:func:`captum_iba.explain` (:func:`captum_iba.app.explanation.explain`; for
a causal LM :func:`captum_iba.explain_answer`),
loaded on first use like the rest, so the core never imports the
application layer.

The names below are imported on first use (PEP 562), so ``import captum_iba``
(and ``captum-iba --help``) loads neither torch nor Captum until a name is
used.
"""

import importlib
import warnings
from typing import Any, List

from captum_iba._utils.lazy import exports, lazy_names
from captum_iba.version import __version__

_NAMES = exports(
    attr=[
        "InformationBottleneckAttribution",
        "IBAOptions",
        "CONFIGS",
        "NoisePrior",
        "PaperPrior",
        "ReferencePrior",
        "BaselinePrior",
        "DatasetPrior",
        "LayerRef",
        "NATS_PER_BIT",
        "token_attributions",
        "layer_token_map",
        "encoder_layers",
    ],
    metrics=[
        "PAPER_LEVELS",
        "degradation_test",
        "DegradationOptions",
        "DegradationResult",
        "Comparison",
        "compare",
    ],
    evaluation=[
        "TokenScorer",
        "IBAScorer",
        "IntegratedGradientsScorer",
        "CaptumLimeScorer",
        "LimeTextScorer",
        "RandomScorer",
        "make_scorers",
        "run_degradation_suite",
    ],
    visualization=[
        "text_heatmap_html",
        "save_html",
        "visualize_text_records",
        "layer_token_heatmap",
        "plot_degradation_curves",
        "plot_layer_sweep",
        "plot_beta_sweep",
    ],
    registry=["METHODS", "PRIORS"],
    # the application layer's one-liner for notebooks (loaded on first use)
    **{"app.explanation": ["explain"], "app.llm_explanation": ["explain_answer"]},
)

__all__: List[str] = [*_NAMES, "__version__"]

#: Internal names once exported here: still importable, with a warning.
_MOVED = {"WelfordEstimator": "attr.dataset_prior"}
_exported, __dir__ = lazy_names(__name__, _NAMES, globals())


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"captum_iba.{name} is deprecated since 0.2; removed in 0.4: it is "
            f"internal; import it from captum_iba.{_MOVED[name]}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(f"captum_iba.{_MOVED[name]}"), name)
    return _exported(name)
