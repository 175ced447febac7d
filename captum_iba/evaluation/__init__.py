"""The evaluation harness: attribution methods as per-token scorers, compared.

* :mod:`~captum_iba.evaluation.scorers` - the scorer base class (one contract,
  ``scorer.attribute(batch)``, for a classifier's or a causal LM's batch:
  :mod:`~captum_iba.evaluation.batches`) and the lookups in the one registry of
  method names (:data:`captum_iba.registry.METHODS`);
* :mod:`~captum_iba.evaluation.random_scorer` - the floor: seeded random scores;
* :mod:`~captum_iba.evaluation.resolve` - names and shared resources (a layer,
  priors, a seed) resolved once into scorers (:func:`build_scorers`);
* :mod:`~captum_iba.evaluation.ig`, :mod:`~captum_iba.evaluation.lime`,
  :mod:`~captum_iba.evaluation.iba` - the paper's methods;
* :mod:`~captum_iba.evaluation.amortized` - amortized IBA (``iba-amortized``);
* :mod:`~captum_iba.evaluation.loo`,
  :mod:`~captum_iba.evaluation.captum_methods` (any Captum method through one
  adapter, and the occlusion, gradient x activation, KernelSHAP and Shapley
  sampling anchors), :mod:`~captum_iba.evaluation.attnlrp` (optional) - the
  strongest cheap anchors of the faithfulness comparison;
* :mod:`~captum_iba.evaluation.presets` - the ``"paper"`` and ``"fair"``
  configurations, as data;
* :mod:`~captum_iba.evaluation.corpus` - a corpus split's protocol, fixed
  scoring order and encoding;
* :mod:`~captum_iba.evaluation.loop` - the one corpus loop (units scored by
  every method and tested, merged), shared with the corpus engine;
* :mod:`~captum_iba.evaluation.suite` - building the methods, scoring a corpus
  and running the degradation test on every method;
* :mod:`~captum_iba.evaluation.explainers` - any registered method as the
  ``explanation_func`` of the metrics (:func:`method_explainer`, e.g. for the
  model-randomisation check);
* :mod:`~captum_iba.evaluation.layer_choice` - choosing IBA's layer for a model
  and task from a small held-in degradation test.

The names below are imported on first use, so importing one module of the
package does not import the others (``captum-iba explain`` loads only the
methods it runs).
"""

from captum_iba._utils.lazy import exports, lazy_names

#: The public names, each with its module (imported on first use), and the
#: names of earlier releases (their modules warn).
_NAMES = exports(
    scorers=[
        "METHODS",
        "TokenScorer",
        "build_scorer",
        "register_scorer",
        "scorer_class",
        "scorer_names",
        "SCORERS",
    ],
    batches=["TokenBatch"],
    random_scorer=["RandomScorer"],
    ig=["IntegratedGradientsScorer"],
    lime=["CaptumLimeScorer", "LimeTextScorer"],
    iba=["IBAScorer", "IBAFaithfulScorer"],
    amortized=["IBAAmortizedScorer"],
    loo=["LeaveOneOutScorer"],
    captum_methods=[
        "CaptumScorer",
        "GradientXActivationScorer",
        "KernelShapScorer",
        "OcclusionMaskScorer",
        "OcclusionScorer",
        "SamplingScorer",
        "ShapleySamplingScorer",
    ],
    attnlrp=["AttnLRPScorer", "LLMAttnLRPScorer", "attnlrp_available"],
    corpus=[
        "CorpusLike",
        "corpus_order",
        "encode",
        "encode_instances",
        "encoded_batches",
        "fit_dataset_prior",
    ],
    presets=[
        "FAIR_TEST_SETTINGS",
        "PAPER_TEST_SETTINGS",
        "PRESETS",
        "SETTINGS",
        "Preset",
        "get_preset",
    ],
    resolve=["Resources", "build_scorers"],
    llm_scorers=["CaptumLLMScorer", "LLMIBAScorer", "LLMScorer"],
    loop=[
        "CorpusJob",
        "ScorerCall",
        "UnitTensors",
        "degradation_options",
        "merge_records",
        "run_units",
        "score_unit",
        "scorer_degradation",
        "work_units",
    ],
    layer_choice=["LayerChoice", "choose_layer"],
    suite=["evaluate_corpus", "make_scorers", "run_corpus", "run_degradation_suite"],
    explainers=["method_explainer"],
)
#: Earlier releases' names (importable, with a warning from their module).
_MOVED = ("IBAFaithfulScorer", "LLMAttnLRPScorer", "LLMIBAScorer", "SCORERS")
__all__ = sorted(n for n in _NAMES if n not in _MOVED)
__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())
