"""captum-iba: Information Bottleneck Attribution for transformers, for Captum."""

from captum_iba.attribution import InformationBottleneckAttribution
from captum_iba.baselines import (
    CaptumLimeScorer,
    IBAScorer,
    IntegratedGradientsScorer,
    LimeTextScorer,
    RandomScorer,
    TokenScorer,
    make_scorers,
    run_degradation_suite,
)
from captum_iba.bottleneck import NATS_PER_BIT
from captum_iba.metrics import (
    PAPER_LEVELS,
    Comparison,
    DegradationResult,
    compare,
    degradation_test,
)
from captum_iba.priors import (
    DatasetPrior,
    NoisePrior,
    PaperPrior,
    ReferencePrior,
    WelfordEstimator,
)
from captum_iba.text import encoder_layers, layer_token_map, token_attributions
from captum_iba.version import __version__
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
    "CaptumLimeScorer",
    "Comparison",
    "DatasetPrior",
    "DegradationResult",
    "IBAScorer",
    "InformationBottleneckAttribution",
    "IntegratedGradientsScorer",
    "LimeTextScorer",
    "NATS_PER_BIT",
    "NoisePrior",
    "PAPER_LEVELS",
    "PaperPrior",
    "RandomScorer",
    "ReferencePrior",
    "TokenScorer",
    "WelfordEstimator",
    "__version__",
    "compare",
    "degradation_test",
    "encoder_layers",
    "layer_token_map",
    "make_scorers",
    "run_degradation_suite",
    "token_attributions",
    "layer_token_heatmap",
    "plot_beta_sweep",
    "plot_degradation_curves",
    "plot_layer_sweep",
    "save_html",
    "text_heatmap_html",
    "visualize_text_records",
]
