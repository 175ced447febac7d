"""The evaluation harness: attribution methods as per-token scorers, compared.

* :mod:`~captum_iba.evaluation.scorers` - the scorer base class and the
  lookups in the one registry of method names (:data:`captum_iba.registry.METHODS`);
* :mod:`~captum_iba.evaluation.resolve` - names and shared resources (a layer,
  priors, a seed) resolved once into scorers (:func:`build_scorers`);
* :mod:`~captum_iba.evaluation.ig`, :mod:`~captum_iba.evaluation.lime`,
  :mod:`~captum_iba.evaluation.iba` - the paper's methods;
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
* :mod:`~captum_iba.evaluation.layer_choice` - choosing IBA's layer for a model
  and task from a small held-in degradation test.
"""

from captum_iba.evaluation.scorers import (
    METHODS,
    RandomScorer,
    TokenScorer,
    build_scorer,
    register_scorer,
    scorer_class,
    scorer_names,
)

from captum_iba.evaluation.ig import IntegratedGradientsScorer  # isort: skip
from captum_iba.evaluation.lime import CaptumLimeScorer, LimeTextScorer  # isort: skip
from captum_iba.evaluation.iba import IBAScorer  # isort: skip
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
from captum_iba.evaluation.corpus import (  # isort: skip
    CorpusLike,
    corpus_order,
    encode,
    encode_instances,
    encoded_batches,
    fit_dataset_prior,
)
from captum_iba.evaluation.presets import (  # isort: skip
    FAIR_TEST_SETTINGS,
    PAPER_TEST_SETTINGS,
    PRESETS,
    SETTINGS,
    Preset,
    get_preset,
)
from captum_iba.evaluation.resolve import Resources, build_scorers  # isort: skip
from captum_iba.evaluation.loop import (  # isort: skip
    CorpusJob,
    merge_records,
    run_units,
    score_unit,
    scorer_degradation,
    work_units,
)
from captum_iba.evaluation.layer_choice import LayerChoice, choose_layer  # isort: skip
from captum_iba.evaluation.suite import (  # isort: skip
    evaluate_corpus,
    make_scorers,
    run_corpus,
    run_degradation_suite,
)

__all__ = [
    "AttnLRPScorer",
    "CaptumScorer",
    "CorpusJob",
    "GradientXActivationScorer",
    "KernelShapScorer",
    "LayerChoice",
    "LeaveOneOutScorer",
    "OcclusionMaskScorer",
    "OcclusionScorer",
    "Resources",
    "SamplingScorer",
    "ShapleySamplingScorer",
    "attnlrp_available",
    "build_scorer",
    "build_scorers",
    "choose_layer",
    "FAIR_TEST_SETTINGS",
    "METHODS",
    "PAPER_TEST_SETTINGS",
    "PRESETS",
    "SETTINGS",
    "CaptumLimeScorer",
    "CorpusLike",
    "IBAScorer",
    "IntegratedGradientsScorer",
    "LimeTextScorer",
    "Preset",
    "RandomScorer",
    "TokenScorer",
    "corpus_order",
    "encode",
    "encode_instances",
    "encoded_batches",
    "evaluate_corpus",
    "fit_dataset_prior",
    "get_preset",
    "make_scorers",
    "merge_records",
    "register_scorer",
    "run_corpus",
    "run_degradation_suite",
    "run_units",
    "score_unit",
    "scorer_class",
    "scorer_degradation",
    "scorer_names",
    "work_units",
]

#: Names of earlier releases, still importable with a warning.
_MOVED = {
    "IBAFaithfulScorer": "captum_iba.evaluation.iba",
    "SCORERS": "captum_iba.evaluation.scorers",
}


def __getattr__(name: str):  # noqa: ANN202
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
