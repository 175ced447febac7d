"""IBA itself: the equations, the noise priors, the Captum class, token scores.

* :mod:`~captum_iba.attr.bottleneck` - the paper's equations (2)-(5) and
  Appendix A's beta, one function each;
* :mod:`~captum_iba.attr.priors` - where the noise statistics come from, and
  the one list of prior names;
* :mod:`~captum_iba.attr.iba` - :class:`InformationBottleneckAttribution`,
  the Captum layer method, with its options validated once
  (:class:`IBAOptions`);
* :mod:`~captum_iba.attr.text` - per-token scores, layer maps, encoder layers.
"""

from captum_iba.attr.bottleneck import NATS_PER_BIT
from captum_iba.attr.iba import IBAOptions, InformationBottleneckAttribution
from captum_iba.attr.priors import (
    PRIOR_NAMES,
    DatasetPrior,
    NoisePrior,
    PaperPrior,
    ReferencePrior,
    resolve_prior,
)
from captum_iba.attr.text import (
    default_layer_index,
    encoder_layers,
    layer_token_map,
    resolve_layer,
    token_attributions,
)

__all__ = [
    "NATS_PER_BIT",
    "PRIOR_NAMES",
    "DatasetPrior",
    "IBAOptions",
    "InformationBottleneckAttribution",
    "NoisePrior",
    "PaperPrior",
    "ReferencePrior",
    "default_layer_index",
    "encoder_layers",
    "layer_token_map",
    "resolve_layer",
    "resolve_prior",
    "token_attributions",
]
