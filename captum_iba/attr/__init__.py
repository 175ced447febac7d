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
* :mod:`~captum_iba.attr.llm` - generative LLMs (causal LMs) through
  Captum's LLM API, and the batch route (:func:`explain_answers`) on prompts
  and answers laid out by :mod:`~captum_iba.attr.llm_batch`;
* :mod:`~captum_iba.attr.inseq_method` - IBA as an inseq method (optional);
* :mod:`~captum_iba.attr.text` - per-token scores, layer maps, encoder layers;
* :mod:`~captum_iba.attr.amortized` - amortized IBA: an explainer fitted once
  per model and layer (:class:`AmortizedExplainer`), then
  :class:`AmortizedInformationBottleneckAttribution` at the cost of a forward
  pass (the network: :mod:`~captum_iba.attr.explainer`, its fit:
  :mod:`~captum_iba.attr.amortized_fit`, its files:
  :mod:`~captum_iba.attr.amortized_store`).

The names below are imported on first use, so importing one module of the
package (``captum_iba.attr.text``) does not import the others.
"""

from captum_iba._utils.lazy import exports, lazy_names

#: The public names, each with its module (imported on first use).
_NAMES = exports(
    amortized=["AmortizedExplainer", "AmortizedInformationBottleneckAttribution"],
    bottleneck=["NATS_PER_BIT"],
    dataset_prior=["DatasetPrior"],
    explainer=["ExplainerSettings"],
    iba=["InformationBottleneckAttribution"],
    llm=[
        "AnswerScores",
        "CausalLMLogLikelihood",
        "LLMInformationBottleneckAttribution",
        "explain_answers",
        "prompt_target_batch",
    ],
    llm_batch=["PromptBatch", "greedy_answers", "prompt_batch"],
    objectives=["OBJECTIVE_NAMES", "resolve_objective"],
    options=["CONFIGS", "IBAOptions"],
    priors=[
        "PRIOR_NAMES",
        "BaselinePrior",
        "NoisePrior",
        "PaperPrior",
        "ReferencePrior",
        "resolve_prior",
    ],
    text=[
        "LayerRef",
        "default_layer_index",
        "encoder_layers",
        "is_decoder",
        "layer_token_map",
        "paper_layer_index",
        "resolve_layer",
        "token_attributions",
    ],
)
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())
