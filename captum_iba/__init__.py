"""captum-iba: Information Bottleneck Attribution for transformers, for Captum."""

from captum_iba.attribution import InformationBottleneckAttribution
from captum_iba.bottleneck import NATS_PER_BIT
from captum_iba.priors import (
    DatasetPrior,
    NoisePrior,
    PaperPrior,
    ReferencePrior,
    WelfordEstimator,
)
from captum_iba.text import encoder_layers, layer_token_map, token_attributions
from captum_iba.version import __version__

__all__ = [
    "DatasetPrior",
    "InformationBottleneckAttribution",
    "NATS_PER_BIT",
    "NoisePrior",
    "PaperPrior",
    "ReferencePrior",
    "WelfordEstimator",
    "__version__",
    "encoder_layers",
    "layer_token_map",
    "token_attributions",
]
