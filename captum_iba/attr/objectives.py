r"""The task loss :math:`\mathcal{L}_{task}` of Eq. (5): what the bottleneck keeps.

The paper explains a classifier: the bottleneck keeps the cross-entropy of the
target class low. Captum users also bring forward functions returning one
score per instance (a one-logit binary head, a regression, a generative
model's log-probability of its continuation) or probabilities. The objective
follows the output:

=====================  ==========================================  =============
name                   loss per noise copy (minimised)             unit
=====================  ==========================================  =============
``"cross_entropy"``    :math:`-\log \mathrm{softmax}(s)_t`         nats
``"probability"``      :math:`-\log p_t` (the output already sums  nats
                       to 1 per row)
``"log_probability"``  :math:`-s_t` (the output is a log-prob)     nats
``"score"``            :math:`-s_t` (keep the selected score       the score's
                       high)                                       own unit
=====================  ==========================================  =============

``"auto"`` (the default) picks ``"cross_entropy"`` for ``(B, C > 1)`` logits
(the paper; results unchanged), ``"probability"`` when every row lies in
[0, 1] and sums to 1, and ``"score"`` for ``(B,)`` or ``(B, 1)`` outputs. A
callable ``(output, target) -> loss`` may be given instead: ``output`` holds
the ``B * n_samples`` noise rows, ``target`` the target of every row (a long
Tensor ``(B * n,)`` or ``(B * n, d)``, or None) and the loss is one value per
row, minimised.

Names are resolved once per ``attribute`` call (:func:`resolve_objective`);
``"auto"`` becomes a concrete objective on the first clean output
(:meth:`Objective.for_output`), which also checks that the output suits it.
"""

from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils.captum_compat import _select_targets
from captum_iba._utils.common import check_target_range

__all__ = [
    "OBJECTIVE_NAMES",
    "KnownForm",
    "Objective",
    "ObjectiveLike",
    "looks_like_probabilities",
    "resolve_objective",
]

ObjectiveFn = Callable[[Tensor, Optional[Tensor]], Tensor]
ObjectiveLike = Union[str, ObjectiveFn, "Objective"]


def looks_like_probabilities(output: Tensor, atol: float = 1e-3) -> bool:
    """True when ``output`` is ``(B, C > 1)`` with rows in [0, 1] summing to 1."""
    if output.dim() != 2 or output.shape[-1] < 2:
        return False
    out = output.detach().float()
    in_range = bool(((out >= 0) & (out <= 1)).all())
    sums = out.sum(dim=-1)
    return in_range and bool(torch.allclose(sums, torch.ones_like(sums), atol=atol))


def _select(output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
    """The selected score of every row: ``output[i, target_i]`` (Captum's rule:
    a list of tuples for multi-dimensional targets), or the output itself."""
    if rows_target is None:
        return output.reshape(output.shape[0], -1)[:, 0]
    rows_target = rows_target.to(output.device)
    if rows_target.dim() == 1:
        return _select_targets(output, rows_target)
    return _select_targets(output, [tuple(r) for r in rows_target.tolist()])


class Objective:
    """A task loss: one value per noise row, minimised by the bottleneck.

    Subclasses implement :meth:`loss`; :meth:`for_output` checks that the
    objective suits the forward's output and :meth:`targets` turns Captum's
    target into one index per instance.
    """

    #: Short name, as in ``objective=`` and the diagnostics.
    name: str = ""
    #: Unit of the loss, for the documentation and error messages.
    unit: str = "nats"

    def for_output(self, clean: Tensor) -> "Objective":
        """The objective to use for this output (checked)."""
        return self

    def targets(self, target: Optional[Tensor], clean: Tensor) -> Optional[Tensor]:
        """Per-instance targets: ``target`` checked, or the default for None.

        Args:
            target (Tensor or None): From :func:`format_target`.
            clean (Tensor): The forward's output on the clean inputs.

        Returns:
            Tensor or None: ``(B,)`` or ``(B, d)`` long, or None for a ``(B,)``
            output (the score itself).
        """
        if clean.dim() == 1:
            if target is not None:
                raise ValueError(
                    "target must be None: forward_func returns one score per "
                    f"instance (shape {tuple(clean.shape)}), there is nothing to "
                    "select."
                )
            return None
        if target is None:
            if clean.dim() != 2:
                raise ValueError(
                    "target=None explains the predicted class and needs (B, C) "
                    f"scores; the forward returned shape {tuple(clean.shape)}: "
                    "pass a target."
                )
            return clean.argmax(dim=1).cpu()
        check_target_range(target, clean.shape)
        return target

    def reads_output(self, target: Optional[Tensor], shape: Tuple[int, ...]) -> bool:
        """Whether :meth:`targets` needs the clean output's values (the
        predicted class of ``target=None``), not only its ``shape``."""
        return target is None and len(shape) == 2

    def loss(self, output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
        """The loss of every row, shape ``(rows,)``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class KnownForm(Objective):
    """An objective resolved and checked on an earlier clean output of the
    same forward function, for a call that skips the clean pass: the first
    output it scores must have that output's trailing shape and suit the
    objective (:meth:`Objective.for_output`), else a ``ValueError``.

    Args:
        objective (Objective): The resolved objective.
        shape (tuple of int): The clean output's shape after the batch.
    """

    def __init__(self, objective: Objective, shape: Tuple[int, ...]) -> None:
        self.objective, self.shape, self.checked = objective, shape, False
        self.name, self.unit = objective.name, objective.unit

    def loss(self, output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
        if not self.checked:
            if tuple(output.shape[1:]) != self.shape:
                raise ValueError(
                    f"forward_func returned shape {tuple(output.shape[1:])} per row, "
                    f"where an earlier call's output had {self.shape}: explain "
                    "outputs of another shape with a new attribution."
                )
            self.objective.for_output(output.detach())
            self.checked = True
        return self.objective.loss(output, rows_target)


def _needs_classes(name: str, clean: Tensor) -> None:
    if clean.dim() < 2 or clean.shape[-1] < 2:
        raise ValueError(
            f"objective={name!r} needs (B, C > 1) class scores; forward_func returned "
            f"shape {tuple(clean.shape)}: with one column the loss would be 0 whatever "
            "the input. Use objective='score' (keep the score high) or 'auto'."
        )


class CrossEntropy(Objective):
    r""":math:`-\log\mathrm{softmax}(s)_t` of class logits (the paper's Eq. 5)."""

    name = "cross_entropy"

    def for_output(self, clean: Tensor) -> Objective:
        _needs_classes(self.name, clean)
        if looks_like_probabilities(clean):
            raise ValueError(
                "objective='cross_entropy' applies log_softmax to logits, but "
                "forward_func returns probabilities (every row in [0, 1], summing "
                "to 1): use objective='probability' (or 'auto'), or return logits."
            )
        return self

    def loss(self, output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
        logp = torch.log_softmax(output.float(), dim=-1)
        return -_select(logp, rows_target)


class Probability(Objective):
    r""":math:`-\log p_t` of an output that already holds probabilities."""

    name = "probability"

    def for_output(self, clean: Tensor) -> Objective:
        _needs_classes(self.name, clean)
        if not looks_like_probabilities(clean):
            raise ValueError(
                "objective='probability' needs probabilities (rows in [0, 1] summing "
                "to 1); forward_func's output is not: use 'cross_entropy' for logits."
            )
        return self

    def loss(self, output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
        p = _select(output.float(), rows_target)
        return -torch.log(p.clamp_min(torch.finfo(torch.float32).tiny))


class Score(Objective):
    r""":math:`-s_t`: keep the selected score (or the ``(B,)`` score) high.

    The loss is the negated score, in the score's own unit, and may be
    negative; choose ``beta`` relative to the score's scale (``beta="auto"``
    uses :math:`10\,|\mathcal{L}_{task}| / \mathcal{L}_{IB}`). To explain a
    low score, negate the forward's output.
    """

    name = "score"
    unit = "the score's unit"

    def reads_output(self, target: Optional[Tensor], shape: Tuple[int, ...]) -> bool:
        return shape[1:] != (1,) and super().reads_output(target, shape)

    def targets(self, target: Optional[Tensor], clean: Tensor) -> Optional[Tensor]:
        if clean.dim() == 2 and clean.shape[1] == 1 and target is None:
            return torch.zeros(clean.shape[0], dtype=torch.long)
        return super().targets(target, clean)

    def loss(self, output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
        return -_select(output.float(), rows_target)


class LogProbability(Score):
    r""":math:`-\log p_t` of an output that already holds log-probabilities."""

    name = "log_probability"
    unit = "nats"

    def for_output(self, clean: Tensor) -> Objective:
        if bool((clean.detach() > 1e-4).any()):
            raise ValueError(
                "objective='log_probability' needs log-probabilities (<= 0); "
                f"forward_func returned values up to {clean.max().item():.4g}."
            )
        return self


class Auto(Objective):
    """Picks the objective from the output's shape and values."""

    name = "auto"

    def for_output(self, clean: Tensor) -> Objective:
        if clean.dim() == 1 or (clean.dim() == 2 and clean.shape[1] == 1):
            return Score()
        if looks_like_probabilities(clean):
            return Probability()
        return CrossEntropy().for_output(clean)


class CallableObjective(Objective):
    """A user's ``(output, target) -> loss per row`` function."""

    name = "callable"
    unit = "the function's unit"

    def __init__(self, fn: ObjectiveFn) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "callable")

    def reads_output(self, target: Optional[Tensor], shape: Tuple[int, ...]) -> bool:
        return False

    def targets(self, target: Optional[Tensor], clean: Tensor) -> Optional[Tensor]:
        if target is None:
            return None
        if clean.dim() >= 2:
            check_target_range(target, clean.shape)
        return target

    def loss(self, output: Tensor, rows_target: Optional[Tensor]) -> Tensor:
        value = self.fn(output, rows_target)
        if not isinstance(value, Tensor) or value.reshape(-1).shape[0] != len(output):
            got = tuple(value.shape) if isinstance(value, Tensor) else type(value)
            raise ValueError(
                f"objective {self.name!r} must return one loss per row, a Tensor of "
                f"shape ({len(output)},); got {got}."
            )
        return value.reshape(-1).float()

    def __repr__(self) -> str:
        return f"CallableObjective({self.name})"


#: The objectives known by name.
OBJECTIVES: Dict[str, type] = {
    "auto": Auto,
    "cross_entropy": CrossEntropy,
    "probability": Probability,
    "log_probability": LogProbability,
    "score": Score,
}
OBJECTIVE_NAMES = tuple(OBJECTIVES)


def resolve_objective(objective: Any) -> Objective:
    """An :class:`Objective` from its name, a callable or itself.

    Args:
        objective (str, Callable or Objective): One of :data:`OBJECTIVE_NAMES`,
            a function ``(output, target) -> loss per row``, or an objective.

    Returns:
        Objective: The objective.

    Raises:
        ValueError: For an unknown name or another type.
    """
    if isinstance(objective, Objective):
        return objective
    if isinstance(objective, str):
        if objective in OBJECTIVES:
            return OBJECTIVES[objective]()
        raise ValueError(
            f"Unknown objective {objective!r}; use one of {list(OBJECTIVE_NAMES)} or "
            "a callable (output, target) -> loss per row."
        )
    if callable(objective):
        return CallableObjective(objective)
    raise ValueError(
        f"objective must be a name in {list(OBJECTIVE_NAMES)} or a callable; got "
        f"{type(objective).__name__}."
    )
