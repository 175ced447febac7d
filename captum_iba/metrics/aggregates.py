r"""The aggregates of a degradation test, as pure functions of its tensors.

One home per aggregate. Each takes the per-instance state of a test (``B``
instances, ``K`` levels; see
:class:`~captum_iba.metrics.result.DegradationResult`) and computes in float64:

* :func:`mean_curve`, :func:`full_curve` - :math:`\bar p_j` (Figure 1 before
  normalisation), with :math:`o` prepended;
* :func:`drop_curve` and :func:`absolute_drop` - :math:`o - \bar p_j`
  (Table 1: the first level);
* :func:`aopc` - area over the perturbation curve (Samek et al., 2017);
* :func:`comprehensiveness`, :func:`sufficiency` - ERASER's (DeYoung et al.,
  2020), in their AOPC form;
* :func:`log_odds_curve`, :func:`log_odds_score` - the change of the target
  log-odds (Shrikumar et al., 2017);
* :func:`accuracy`, :func:`accuracy_curve` - the share still predicted as the
  target;
* :func:`normalized_drop` - :math:`\bar d = (\bar p - m) / (o - m)` of Figure 1,
  across methods.

The scalar aggregates a result reports are registered in :data:`AGGREGATES`
with :func:`register_aggregate`: a function whose parameters are named after
the result's fields (``original_probs``, ``probs``, ``kept_probs``, ...), with
its column, better direction and legend sentence. Registered, one is a key of
:meth:`DegradationResult.summary` and an attribute of the result
(``result.aopc``), and a column of :func:`~captum_iba.metrics.compare`'s table
and legend, after the others.

Because each depends only on the per-instance tensors, a test split into shards
is merged by concatenating the tensors (:meth:`DegradationResult.concat`) and
computing again. The formulas are written out in ``docs/metrics.rst``.
"""

import inspect
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

import numpy as np
import torch
from torch import Tensor

from captum_iba._utils.registry import Entry, Registry

__all__ = [
    "AGGREGATES",
    "BETTER",
    "absolute_drop",
    "accuracy",
    "accuracy_curve",
    "aopc",
    "comprehensiveness",
    "drop_curve",
    "full_curve",
    "log_odds_curve",
    "log_odds_score",
    "mean",
    "mean_curve",
    "normalized_drop",
    "original_accuracy",
    "original_probability",
    "first_level_drop",
    "register_aggregate",
    "registered",
    "sufficiency",
    "value_of",
]

#: A mean-probability curve: a 1-D float Tensor or numpy array.
CurveT = TypeVar("CurveT", Tensor, np.ndarray)
F = TypeVar("F", bound=Callable[..., Any])

#: The scalar aggregates a result reports, by name, in the order of its
#: summary and of the comparison's columns (:func:`register_aggregate`).
AGGREGATES = Registry("aggregate")
#: A better direction -> its mark in the comparison's table.
BETTER = {"higher": "↑", "lower": "↓"}


def register_aggregate(
    name: str,
    *,
    column: Optional[str] = None,
    better: Optional[str] = None,
    legend: str = "",
    attribute: Optional[str] = None,
) -> Callable[[F], F]:
    """Decorator: register a scalar aggregate in :data:`AGGREGATES`.

    The function's parameters name the fields of a
    :class:`~captum_iba.metrics.result.DegradationResult` it is computed from
    (``original_probs``, ``probs``, ``kept_probs``, ``log_odds``, ``target``,
    ...); it returns a float. It becomes the key ``name`` of the result's
    :meth:`~captum_iba.metrics.result.DegradationResult.summary` (None when a
    field it needs was not computed), the result's attribute ``attribute``
    and, with a ``column``, a column of the comparison's table and legend.

    Args:
        name (str): Its key in summaries (unique in any case).
        column (str, optional): The table's column head; ``{first}`` becomes
            the first removal level (e.g. ``"11.1 %"``). Default None: not in
            the table.
        better (str, optional): ``"higher"`` or ``"lower"`` (marked ↑ or ↓
            after the head); None: no direction.
        legend (str): What the column means, one sentence (``{first}`` as in
            ``column``); required with a ``column``.
        attribute (str, optional): The result's attribute. Default ``name``.

    Returns:
        Callable: The decorator; it returns the function unchanged.

    Raises:
        ValueError: On a name taken, an unknown ``better``, or a column
            without a legend.

    Examples::

        >>> @register_aggregate("end_drop", column="drop @ end",
        ...                     better="higher", legend="the fall at the last level.")
        ... def end_drop(original_probs, probs):
        ...     return float(drop_curve(original_probs, probs)[-1])
    """
    if better is not None and better not in BETTER:
        raise ValueError(f"better must be one of {sorted(BETTER)} or None: {better!r}")
    if column is not None and not legend:
        raise ValueError(f"aggregate {name!r}: a column needs a legend sentence")

    def register(func: F) -> F:
        facts = dict(
            column=column,
            better=better,
            legend=legend,
            attribute=attribute or name,
            fields=tuple(inspect.signature(func).parameters),
        )
        summary = (func.__doc__ or "").strip().split("\n")[0]
        AGGREGATES.add(name, func, summary, facts=facts)
        return func

    return register


def registered() -> List[Entry]:
    """list[Entry]: The registered aggregates, in registration order."""
    return [AGGREGATES.entry(name) for name in AGGREGATES.names()]


def value_of(entry: Entry, state: Any) -> Optional[float]:
    """The aggregate ``entry`` of ``state`` (a result: the fields it names are
    its attributes); None when one of them is None (not computed)."""
    arguments = [getattr(state, field) for field in entry.facts["fields"]]
    if any(a is None for a in arguments):
        return None
    return entry.target(*arguments)


def mean(x: Tensor) -> float:
    """float: The mean of ``x`` in float64; NaN when ``x`` is empty."""
    return float(x.double().mean()) if x.numel() else float("nan")


def mean_curve(probs: Tensor) -> Tensor:
    r"""Tensor: ``(K,)`` the mean target probability :math:`\bar p_j` at each level,
    from ``probs`` ``(B, K)``."""
    return probs.double().mean(0)


def full_curve(original_probs: Tensor, probs: Tensor) -> Tensor:
    """Tensor: ``(K + 1,)`` :func:`mean_curve` with the mean original probability
    ``o`` (level 0) prepended; ``original_probs`` is ``(B,)``."""
    return torch.cat([original_probs.double().mean(0, keepdim=True), mean_curve(probs)])


def drop_curve(original_probs: Tensor, probs: Tensor) -> Tensor:
    """Tensor: ``(K,)`` the mean drop ``o_i - p_ij`` at each level (positive = a
    drop)."""
    return (original_probs.double()[:, None] - probs.double()).mean(0)


def absolute_drop(original_probs: Tensor, probs: Tensor, level_index: int = 0) -> float:
    """float: The mean drop of the target probability at one level (Table 1 of the
    paper at ``level_index=0``, the first level)."""
    return float(drop_curve(original_probs, probs)[level_index])


def log_odds_curve(original_log_odds: Tensor, log_odds: Tensor) -> Tensor:
    """Tensor: ``(K,)`` the mean change of the target log-odds at each level,
    ``mean(logodds(p_k) - logodds(o))``."""
    return (log_odds.double() - original_log_odds.double()[:, None]).mean(0)


def accuracy(preds: Tensor, target: Tensor) -> float:
    """float: The share of instances predicted as the target, ``preds`` and
    ``target`` ``(B,)``."""
    return mean((preds == target).double())


def accuracy_curve(preds: Tensor, target: Tensor) -> Tensor:
    """Tensor: ``(K,)`` the share of instances predicted as the target at each
    level, ``preds`` ``(B, K)`` and ``target`` ``(B,)``."""
    return (preds == target[:, None]).double().mean(0)


# ---- the registered aggregates, in the order of summaries and tables --------------


@register_aggregate(
    "original_probability",
    column="p(class)",
    legend="mean probability of the explained class before any removal.",
)
def original_probability(original_probs: Tensor) -> float:
    """float: ``o``, the mean target probability on the original inputs."""
    return mean(original_probs)


@register_aggregate(
    "first_level_drop",
    column="drop @ {first}",
    better="higher",
    legend="how much it falls when each method's top {first} of the tokens are "
    "removed (the paper's Table 1).",
)
def first_level_drop(original_probs: Tensor, probs: Tensor) -> float:
    """float: :func:`absolute_drop` at the first level (Table 1)."""
    return absolute_drop(original_probs, probs, 0)


@register_aggregate(
    "aopc",
    column="AOPC",
    better="higher",
    legend="that fall averaged over all removal levels.",
)
def aopc(original_probs: Tensor, probs: Tensor) -> float:
    """float: Area over the perturbation curve (Samek et al., 2017):
    ``1 / (K + 1) * sum_{k=0..K} mean(o - p_k)``, the unperturbed level 0 (a zero
    term) included. With most-relevant-first order higher is better."""
    return float(drop_curve(original_probs, probs).sum() / (int(probs.shape[1]) + 1))


@register_aggregate(
    "comprehensiveness",
    column="comprehensiveness",
    better="higher",
    legend="the same without the level of no removal (ERASER).",
)
def comprehensiveness(original_probs: Tensor, probs: Tensor) -> float:
    """float: ERASER comprehensiveness (DeYoung et al., 2020), AOPC form: the
    mean over the levels (no level 0) and instances of ``o - p(x without the
    first k tokens)``. Higher is better with most-relevant-first order."""
    return mean(original_probs.double()[:, None] - probs.double())


@register_aggregate(
    "sufficiency",
    column="sufficiency",
    better="lower",
    legend="the fall when only the top tokens are kept.",
)
def sufficiency(original_probs: Tensor, kept_probs: Tensor) -> float:
    """float: ERASER sufficiency (DeYoung et al., 2020), AOPC form: the mean
    over the levels and instances of ``o - p(x with only the first k tokens
    kept)``, from ``kept_probs`` ``(B, K)`` (a test run with
    ``compute_sufficiency=True``). Lower is better with most-relevant-first
    order."""
    return mean(original_probs.double()[:, None] - kept_probs.double())


@register_aggregate(
    "log_odds",
    column="log-odds",
    better="lower",
    legend="mean change of the class's log-odds as tokens are removed.",
    attribute="log_odds_score",
)
def log_odds_score(original_log_odds: Tensor, log_odds: Tensor) -> float:
    """float: :func:`log_odds_curve` averaged over the levels (Shrikumar et al.,
    2017; Chen et al., 2019). More negative is better with most-relevant-first
    order."""
    return mean(log_odds_curve(original_log_odds, log_odds))


@register_aggregate("original_accuracy")
def original_accuracy(original_preds: Tensor, target: Tensor) -> float:
    """float: The share of instances predicted as the target on the original
    inputs."""
    return accuracy(original_preds, target)


def normalized_drop(
    curves: Sequence[CurveT],
    m: Optional[float] = None,
    origins: Optional[Sequence[float]] = None,
) -> Tuple[List[CurveT], float]:
    r"""The normalised probability drop :math:`d = (p - m) / (o - m)` (Figure 1).

    :math:`p` is a curve of mean target probabilities, :math:`o` its value on
    the original inputs (level 0) and :math:`m` the floor: by default, as in
    the paper (Section 4), the lowest fully degraded (last-level) mean
    probability across the curves compared. A curve thus starts at 1, and the
    best method's curve ends at 0.

    Args:
        curves (Sequence[Tensor or numpy.ndarray]): Mean-probability curves,
            1-D, in float; level 0 first unless ``origins`` is given.
        m (float, optional): The floor. Default: the smallest last value of
            ``curves``.
        origins (Sequence[float], optional): :math:`o` of each curve. Default:
            each curve's first value.

    Returns:
        (list, float): The normalised curves, of the type of each input (all
        NaN where :math:`|o - m| < 10^{-12}`), and the floor :math:`m` used.

    Raises:
        ValueError: If ``curves`` is empty.

    Examples::

        >>> import numpy as np
        >>> (a, b), m = normalized_drop([np.array([0.8, 0.5, 0.2]),
        ...                              np.array([0.6, 0.5, 0.4])])
        >>> m, a.round(6).tolist(), b.round(6).tolist()
        (0.2, [1.0, 0.5, 0.0], [1.0, 0.75, 0.5])
    """
    if len(curves) == 0:
        raise ValueError("no curve given")
    if m is None:
        m = min(float(curve[-1]) for curve in curves)
    if origins is None:
        origins = [float(curve[0]) for curve in curves]
    out: List[CurveT] = []
    for curve, o in zip(curves, origins):
        denom = o - m
        if abs(denom) < 1e-12:
            out.append(_all_nan(curve))
        else:
            out.append((curve - m) / denom)
    return out, m


def _all_nan(curve: CurveT) -> CurveT:
    if isinstance(curve, Tensor):
        return torch.full_like(curve, float("nan"))
    return np.full_like(curve, np.nan)
