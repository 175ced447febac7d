"""IBA itself: the equations, the noise priors, the Captum class, token scores.

* :mod:`~captum_iba.attr.bottleneck` - the paper's equations (2)-(5) and
  Appendix A's beta, one function each;
* :mod:`~captum_iba.attr.priors` - where the noise statistics come from
  (names registered in :data:`captum_iba.registry.PRIORS`);
  :mod:`~captum_iba.attr.dataset_prior` - the prior fitted on data;
* :mod:`~captum_iba.attr.iba` - :class:`InformationBottleneckAttribution`,
  the Captum layer method;
* :mod:`~captum_iba.attr.options` - its options, the one list of its knobs
  (:class:`IBAOptions`), and the named configurations (:data:`CONFIGS`:
  ``"paper"``, ``"faithful"``);
* :mod:`~captum_iba.attr.objectives` - the task loss, following the output
  (cross-entropy of logits, probabilities, scores, log-probabilities);
* :mod:`~captum_iba.attr.llm` - generative LLMs through Captum's LLM API,
  and batched prompts with their continuations;
* :mod:`~captum_iba.attr.inseq_method` - IBA as an inseq method (optional);
* :mod:`~captum_iba.attr.text` - per-token scores, layer maps, encoder layers.
"""

from captum_iba.attr.bottleneck import NATS_PER_BIT
from captum_iba.attr.dataset_prior import DatasetPrior
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.llm import (
    CausalLMLogLikelihood,
    LLMInformationBottleneckAttribution,
    prompt_target_batch,
)
from captum_iba.attr.objectives import OBJECTIVE_NAMES, resolve_objective
from captum_iba.attr.options import CONFIGS, IBAOptions
from captum_iba.attr.priors import (
    PRIOR_NAMES,
    BaselinePrior,
    NoisePrior,
    PaperPrior,
    ReferencePrior,
    resolve_prior,
)
from captum_iba.attr.text import (
    LayerRef,
    default_layer_index,
    encoder_layers,
    layer_token_map,
    paper_layer_index,
    resolve_layer,
    token_attributions,
)

__all__ = [
    "CONFIGS",
    "NATS_PER_BIT",
    "OBJECTIVE_NAMES",
    "CausalLMLogLikelihood",
    "LLMInformationBottleneckAttribution",
    "PRIOR_NAMES",
    "BaselinePrior",
    "DatasetPrior",
    "IBAOptions",
    "InformationBottleneckAttribution",
    "LayerRef",
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
