"""IBA itself: the equations, the noise priors, the Captum class, token scores.

* :mod:`~captum_iba.attr.bottleneck` - the paper's equations (2)-(5) and
  Appendix A's beta, one function each;
* :mod:`~captum_iba.attr.priors` - where the noise statistics come from, and
  the one list of prior names;
* :mod:`~captum_iba.attr.iba` - :class:`InformationBottleneckAttribution`,
  the Captum layer method;
* :mod:`~captum_iba.attr.options` - its options, validated once
  (:class:`IBAOptions`);
* :mod:`~captum_iba.attr.objectives` - the task loss, following the output
  (cross-entropy of logits, probabilities, scores, log-probabilities);
* :mod:`~captum_iba.attr.llm` - generative LLMs through Captum's LLM API,
  and batched prompts with their continuations;
* :mod:`~captum_iba.attr.inseq_method` - IBA as an inseq method (optional);
* :mod:`~captum_iba.attr.text` - per-token scores, layer maps, encoder layers.
"""

from captum_iba.attr.bottleneck import NATS_PER_BIT
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.llm import (
    CausalLMLogLikelihood,
    LLMInformationBottleneckAttribution,
    prompt_target_batch,
)
from captum_iba.attr.objectives import OBJECTIVE_NAMES, resolve_objective
from captum_iba.attr.options import IBAOptions
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
    paper_layer_index,
    resolve_layer,
    token_attributions,
)

__all__ = [
    "NATS_PER_BIT",
    "OBJECTIVE_NAMES",
    "CausalLMLogLikelihood",
    "LLMInformationBottleneckAttribution",
    "PRIOR_NAMES",
    "DatasetPrior",
    "IBAOptions",
    "InformationBottleneckAttribution",
    "NoisePrior",
    "PaperPrior",
    "ReferencePrior",
    "default_layer_index",
    "paper_layer_index",
    "encoder_layers",
    "layer_token_map",
    "resolve_layer",
    "prompt_target_batch",
    "resolve_objective",
    "resolve_prior",
    "token_attributions",
]
