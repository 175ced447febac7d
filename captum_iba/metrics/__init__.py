r"""Degradation metrics: how fast a classifier's confidence falls as tokens go.

The degradation test of Jiang et al. (2020), Section 4.1, removes the tokens an
attribution method ranks highest, level by level, and records the target-class
probability of the original model on every degraded input
(:func:`degradation_test`). How it runs is one :class:`DegradationOptions`
(levels, order, removal strategy, special tokens, batching), the removal one of
the strategies :class:`Deletion`, :class:`Replacement` and :class:`CustomRemoval`.
A :class:`DegradationResult` keeps the per-instance values and computes what
papers report (Table 1's absolute drop, AOPC, ERASER comprehensiveness and
sufficiency, log-odds, accuracy) with the functions of
:mod:`~captum_iba.metrics.aggregates`; :func:`compare` sets several methods side
by side with the normalised drop :math:`\bar d = (\bar p - m) / (o - m)` of
Figure 1 (:func:`normalized_drop`), :math:`m` the lowest fully degraded mean
probability across the methods.

Modules:

* :mod:`~captum_iba.metrics.degradation` - :func:`degradation_test`, and how many
  tokens a level removes; :func:`original_logits_of`, the test's first pass
  computed once and given to several tests;
* :mod:`~captum_iba.metrics.options` - :class:`DegradationOptions`, and
  :class:`KnownInputs` (what is known of the data: removable positions,
  original logits);
* :mod:`~captum_iba.metrics.prompts` - :func:`prompt_degradation_test`, the
  test for a causal LM's answer to a prompt (:class:`AnswerOdds`), and
  :func:`choice_degradation_test`, for its choice among a task's answer words;
* :mod:`~captum_iba.metrics.context` - context attribution's metrics of
  ContextCite (Cohen-Wang et al., 2024): the top-k log-probability drop
  (:func:`top_k_drop`) and the linear datamodeling score over random source
  ablations (:func:`linear_datamodeling_score`), both for several methods at
  once with :func:`context_test`;
* :mod:`~captum_iba.metrics.strategies` - the removal strategies and
  :func:`as_removal`;
* :mod:`~captum_iba.metrics.aggregates` - the aggregates, as functions of
  tensors, and :func:`normalized_drop`;
* :mod:`~captum_iba.metrics.result` - :class:`DegradationResult` (state,
  serialisation, :meth:`~DegradationResult.concat`);
* :mod:`~captum_iba.metrics.compare` - :class:`Comparison` and :func:`compare`;
* :mod:`~captum_iba.metrics.randomization` - the model-randomisation sanity
  check of Adebayo et al. (2018): :func:`cascading_randomization` (its
  choices one :class:`RandomizationOptions`), its stages and
  re-initialisation;
* :mod:`~captum_iba.metrics.randomization_result` - :class:`RandomizationResult`
  and :func:`rank_correlation`;
* ``_inputs`` (data checks), ``_removal`` (ranks, level counts, degraded
  inputs, the batched model calls) and ``_compat`` (the old keyword arguments):
  internal.
"""

from captum_iba._utils.lazy import exports, lazy_names

#: The public names, each with its module (imported on first use, so that
#: the degradation test does not load the randomisation check's SciPy).
_NAMES = exports(
    aggregates=["normalized_drop"],
    compare=["Comparison", "compare"],
    context=[
        "ContextResult",
        "SourceAblations",
        "ablate_sources",
        "context_test",
        "linear_datamodeling_score",
        "top_k_drop",
    ],
    degradation=["degradation_test", "original_logits_of"],
    options=[
        "PAPER_LEVELS",
        "DegradationOptions",
        "KnownInputs",
        "RandomizationOptions",
    ],
    prompts=["AnswerOdds", "choice_degradation_test", "prompt_degradation_test"],
    randomization=["cascade_stages", "cascading_randomization", "reinitialize"],
    randomization_result=["RandomizationResult", "rank_correlation"],
    result=["DegradationResult"],
    strategies=[
        "CustomRemoval",
        "Deletion",
        "RemovalStrategy",
        "Replacement",
        "as_removal",
    ],
)
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())
