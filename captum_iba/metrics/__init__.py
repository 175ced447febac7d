r"""Degradation metrics: how fast a classifier's confidence falls as tokens go.

The degradation test of Jiang et al. (2020), Section 4.1, removes the tokens an
attribution method ranks highest, level by level, and records the target-class
probability of the original model on every degraded input
(:func:`degradation_test`). A :class:`DegradationResult` keeps the
per-instance values and computes what papers report (Table 1's absolute drop,
AOPC, ERASER comprehensiveness and sufficiency, log-odds, accuracy);
:func:`compare` sets several methods side by side with the normalised drop
:math:`\bar d = (\bar p - m) / (o - m)` of Figure 1 (:func:`normalized_drop`),
:math:`m` the lowest fully degraded mean probability across the methods.

Modules:

* :mod:`~captum_iba.metrics.degradation` - :func:`degradation_test`, and how many
  tokens a level removes;
* :mod:`~captum_iba.metrics.result` - :class:`DegradationResult` and
  :func:`normalized_drop`;
* :mod:`~captum_iba.metrics.compare` - :class:`Comparison` and :func:`compare`;
* :mod:`~captum_iba.metrics.randomization` - the model-randomisation sanity
  check of Adebayo et al. (2018): :func:`cascading_randomization`, its stages
  and re-initialisation;
* :mod:`~captum_iba.metrics.randomization_result` - :class:`RandomizationResult`
  and :func:`rank_correlation`;
* ``_inputs`` (argument checks) and ``_removal`` (ranks, level counts, degraded
  inputs, the batched model calls): internal.
"""

from captum_iba.metrics.compare import Comparison, compare
from captum_iba.metrics.degradation import PAPER_LEVELS, degradation_test
from captum_iba.metrics.randomization import (
    cascade_stages,
    cascading_randomization,
    reinitialize,
)
from captum_iba.metrics.randomization_result import (
    RandomizationResult,
    rank_correlation,
)
from captum_iba.metrics.result import DegradationResult, normalized_drop

__all__ = [
    "PAPER_LEVELS",
    "DegradationResult",
    "Comparison",
    "degradation_test",
    "compare",
    "normalized_drop",
    "RandomizationResult",
    "cascade_stages",
    "cascading_randomization",
    "rank_correlation",
    "reinitialize",
]
