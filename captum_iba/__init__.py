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
reproduction and the ``captum-iba`` command) is imported on its own.

The names below are imported on first use (PEP 562), so ``import captum_iba``
(and ``captum-iba --help``) loads neither torch nor Captum until a name is
used.
"""

import importlib
import warnings
from typing import Any, Dict, List

from captum_iba.version import __version__

#: Public name -> the module it comes from.
_EXPORTS: Dict[str, str] = {
    **dict.fromkeys(
        (
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
        ),
        "captum_iba.attr",
    ),
    **dict.fromkeys(
        (
            "PAPER_LEVELS",
            "degradation_test",
            "DegradationOptions",
            "DegradationResult",
            "Comparison",
            "compare",
        ),
        "captum_iba.metrics",
    ),
    **dict.fromkeys(
        (
            "TokenScorer",
            "IBAScorer",
            "IntegratedGradientsScorer",
            "CaptumLimeScorer",
            "LimeTextScorer",
            "RandomScorer",
            "make_scorers",
            "run_degradation_suite",
        ),
        "captum_iba.evaluation",
    ),
    **dict.fromkeys(
        (
            "text_heatmap_html",
            "save_html",
            "visualize_text_records",
            "layer_token_heatmap",
            "plot_degradation_curves",
            "plot_layer_sweep",
            "plot_beta_sweep",
        ),
        "captum_iba.visualization",
    ),
    **dict.fromkeys(("METHODS", "PRIORS"), "captum_iba.registry"),
}

__all__: List[str] = [*_EXPORTS, "__version__"]

#: Internal names once exported here: still importable, with a warning.
_MOVED = {"WelfordEstimator": "captum_iba.attr.dataset_prior"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _MOVED:
        warnings.warn(
            f"captum_iba.{name} is internal; import it from {_MOVED[name]}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'captum_iba' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
