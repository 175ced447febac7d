"""The evaluation harness: attribution methods as per-token scorers, compared.

* :mod:`~captum_iba.evaluation.scorers` - the scorer base class and the one
  registry of method names (:func:`scorer_class`);
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
* :mod:`~captum_iba.evaluation.suite` - building the methods, scoring a corpus
  and running the degradation test on every method;
* :mod:`~captum_iba.evaluation.layer_choice` - choosing IBA's layer for a model
  and task from a small held-in degradation test.
"""

# Import order = registration order of the scorers.
from captum_iba.evaluation.scorers import (
    SCORERS,
    RandomScorer,
    TokenScorer,
    register_scorer,
    scorer_class,
    scorer_names,
)

from captum_iba.evaluation.ig import IntegratedGradientsScorer  # isort: skip
from captum_iba.evaluation.lime import CaptumLimeScorer, LimeTextScorer  # isort: skip
from captum_iba.evaluation.iba import IBAFaithfulScorer, IBAScorer  # isort: skip
from captum_iba.evaluation.amortized import IBAAmortizedScorer  # isort: skip
from captum_iba.evaluation.loo import LeaveOneOutScorer  # isort: skip
from captum_iba.evaluation.captum_methods import (  # isort: skip
    CaptumScorer,
    GradientXActivationScorer,
    KernelShapScorer,
    OcclusionMaskScorer,
    OcclusionScorer,
    SamplingScorer,
    ShapleySamplingScorer,
)
from captum_iba.evaluation.attnlrp import AttnLRPScorer, attnlrp_available  # isort: skip
from captum_iba.evaluation.corpus import CorpusLike, encode_instances  # isort: skip
from captum_iba.evaluation.presets import (  # isort: skip
    FAIR_TEST_SETTINGS,
    PAPER_TEST_SETTINGS,
    PRESETS,
    SETTINGS,
    Preset,
    get_preset,
)
from captum_iba.evaluation.layer_choice import LayerChoice, choose_layer  # isort: skip
from captum_iba.evaluation.suite import (  # isort: skip
    METHODS,
    corpus_order,
    corpus_scorers,
    encode,
    evaluate_corpus,
    fit_dataset_prior,
    make_scorers,
    resolve_priors,
    run_corpus,
    run_degradation_suite,
    scorer_degradation,
)

__all__ = [
    "AttnLRPScorer",
    "CaptumScorer",
    "GradientXActivationScorer",
    "KernelShapScorer",
    "LayerChoice",
    "LeaveOneOutScorer",
    "OcclusionMaskScorer",
    "OcclusionScorer",
    "SamplingScorer",
    "ShapleySamplingScorer",
    "attnlrp_available",
    "choose_layer",
    "FAIR_TEST_SETTINGS",
    "METHODS",
    "PAPER_TEST_SETTINGS",
    "PRESETS",
    "SCORERS",
    "SETTINGS",
    "CaptumLimeScorer",
    "CorpusLike",
    "IBAAmortizedScorer",
    "IBAFaithfulScorer",
    "IBAScorer",
    "IntegratedGradientsScorer",
    "LimeTextScorer",
    "Preset",
    "RandomScorer",
    "TokenScorer",
    "corpus_order",
    "corpus_scorers",
    "encode",
    "encode_instances",
    "evaluate_corpus",
    "fit_dataset_prior",
    "get_preset",
    "make_scorers",
    "register_scorer",
    "resolve_priors",
    "run_corpus",
    "run_degradation_suite",
    "scorer_class",
    "scorer_degradation",
    "scorer_names",
]
