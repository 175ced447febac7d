"""captum-iba: Information Bottleneck Attribution for transformers, for Captum.

The public names, by layer (each layer imports only the ones above it):

* :mod:`captum_iba.attr` - IBA: the Captum layer method, its noise priors,
  per-token reductions;
* :mod:`captum_iba.metrics` - the degradation test and its aggregates;
* :mod:`captum_iba.evaluation` - attribution methods as per-token scorers and
  the comparison harness;
* :mod:`captum_iba.visualization` - token heatmaps, layer maps and curves.

The application layer (:mod:`captum_iba.app`: corpora, fine-tuning, the
reproduction and the ``captum-iba`` command) is imported on its own.
"""

import warnings
from typing import Any

# attr: the method
from captum_iba.attr import (
    NATS_PER_BIT,
    DatasetPrior,
    IBAOptions,
    InformationBottleneckAttribution,
    NoisePrior,
    PaperPrior,
    ReferencePrior,
    encoder_layers,
    layer_token_map,
    token_attributions,
)

# evaluation: methods compared on one harness
from captum_iba.evaluation import (
    CaptumLimeScorer,
    IBAScorer,
    IntegratedGradientsScorer,
    LimeTextScorer,
    RandomScorer,
    TokenScorer,
    make_scorers,
    run_degradation_suite,
)

# metrics: faithfulness
from captum_iba.metrics import (
    PAPER_LEVELS,
    Comparison,
    DegradationResult,
    compare,
    degradation_test,
)
from captum_iba.version import __version__

# visualization: pictures
from captum_iba.visualization import (
    layer_token_heatmap,
    plot_beta_sweep,
    plot_degradation_curves,
    plot_layer_sweep,
    save_html,
    text_heatmap_html,
    visualize_text_records,
)

__all__ = [
    # attr
    "InformationBottleneckAttribution",
    "IBAOptions",
    "NoisePrior",
    "PaperPrior",
    "ReferencePrior",
    "DatasetPrior",
    "NATS_PER_BIT",
    "token_attributions",
    "layer_token_map",
    "encoder_layers",
    # metrics
    "PAPER_LEVELS",
    "degradation_test",
    "DegradationResult",
    "Comparison",
    "compare",
    # evaluation
    "TokenScorer",
    "IBAScorer",
    "IntegratedGradientsScorer",
    "CaptumLimeScorer",
    "LimeTextScorer",
    "RandomScorer",
    "make_scorers",
    "run_degradation_suite",
    # visualization
    "text_heatmap_html",
    "save_html",
    "visualize_text_records",
    "layer_token_heatmap",
    "plot_degradation_curves",
    "plot_layer_sweep",
    "plot_beta_sweep",
    "__version__",
]

#: Internal names once exported here: still importable, with a warning.
_MOVED = {"WelfordEstimator": "captum_iba.attr.priors"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        warnings.warn(
            f"captum_iba.{name} is internal; import it from {_MOVED[name]}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'captum_iba' has no attribute {name!r}")
