r"""The amortized bottleneck: a small network that predicts IBA's mask.

Read next to ``docs/method.rst`` (section "Amortized IBA"). For an instance
with tokens :math:`t = 1..L`, the frozen model's hidden states at the readout
layers :math:`r \in R` (by default the bottlenecked layer :math:`l` and the
last layer) are standardised per token without learned parameters and joined
with the last readout layer's first-token state (the sentence's summary; a
causal LM's: its last position's, the only one that has read the whole
input, ``summary="last"``):

.. math::

   u_t = \big[\mathrm{LN}(H^{(r_1)}_t); \dots; \mathrm{LN}(H^{(r_k)}_t);
         \mathrm{LN}(H^{(r_k)}_1)\big].

A two-layer perceptron, applied to every token, gives one logit per class,

.. math::

   a_t = W_2\, \mathrm{GELU}(W_1 u_t + b_1) + b_2 \in \mathbb{R}^C,
   \qquad \alpha_t = a_{t, c}, \qquad \lambda_t = \sigma(\alpha_t),

for the explained class :math:`c`; :math:`\lambda_t` is the signal weight of
Eq. (2), shared by all features of token :math:`t`. The network is trained by
:mod:`captum_iba.attr.amortized_fit`; :class:`ExplainerSettings` holds
everything that defines a fitted explainer (it is part of the cache key): the
IBA options of its objective and of its teacher are
:class:`~captum_iba.attr.options.IBAOptions`, the per-sample method's own.
"""

import json
import numbers
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captum_iba.attr.objectives import OBJECTIVE_NAMES
from captum_iba.attr.options import IBAOptions

__all__ = ["OBJECTIVE_OPTIONS", "SUMMARIES", "ExplainerSettings", "MaskExplainer"]

#: Which position summarises an input (:class:`MaskExplainer`'s ``summary``).
SUMMARIES = ("first", "last")

#: The targets the explainer is trained to explain.
TRAIN_TARGETS = ("label", "predicted")
#: The IBA options of the explainer's objective by default: ``iba-faithful``'s
#: deletion-like prior, 2 noise draws per instance and step, the paper's
#: (inert) beta, no complement term, seed 0.
OBJECTIVE_OPTIONS = IBAOptions(prior="baseline", n_samples=2, seed=0)
#: Version 0.2's flat settings that are fields of ``options`` now.
_FLAT_OPTIONS = ("beta", "prior", "complement", "n_samples", "seed")

OptionsLike = Union[IBAOptions, str, Dict[str, Any]]


def _positive(name: str, value: Any, integer: bool = False) -> None:
    number_type = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, number_type) or not value > 0:
        what = "an int" if integer else "a number"
        raise ValueError(f"{name} must be {what} > 0, got {value!r}.")


def _non_negative(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.")


def _as_options(value: OptionsLike, what: str) -> IBAOptions:
    """IBA options from themselves, a configuration name, or a dict of fields
    (:meth:`IBAOptions.record` 's, or keywords with an optional ``config``).

    Raises:
        TypeError: For another type, or a key that is no field.
    """
    if isinstance(value, IBAOptions):
        return value
    if isinstance(value, str):
        return IBAOptions.from_config(value)
    if not isinstance(value, dict):
        raise TypeError(
            f"{what} must be IBAOptions, a configuration name or a dict of IBA "
            f"options; got {type(value).__name__}."
        )
    record = dict(value)
    if "config" in record:
        return IBAOptions.from_config(record.pop("config"), **record)
    unknown = sorted(set(record) - set(IBAOptions.names()))
    if unknown:
        raise TypeError(
            f"{what}: unknown IBA option(s) {unknown}; the options are "
            f"{IBAOptions.names()}"
        )
    return IBAOptions(**record)


def _storable(options: IBAOptions, what: str) -> None:
    """The settings are stored as data: the prior and the objective by name."""
    if options.prior.needs_data:
        raise ValueError(
            f"{what}: prior {options.prior.name!r} is fitted on data, which an "
            "explainer's settings cannot hold (they keep the prior by name); use "
            "a prior that needs no data (e.g. 'baseline' or 'paper')."
        )
    if options.objective.name not in OBJECTIVE_NAMES:
        raise ValueError(
            f"{what}: the objective must be one of {list(OBJECTIVE_NAMES)} (the "
            f"settings keep it by name), got {options.objective.name!r}."
        )


def _check_objective_options(options: IBAOptions) -> None:
    """What the explainer's objective can use of its IBA options."""
    _storable(options, "options")
    if options.attribute_to_layer_input:
        raise ValueError(
            "options: the explainer's objective runs the bottleneck on the layer's "
            "output; use attribute_to_layer_input=False."
        )
    if options.beta == "auto":
        raise ValueError(
            "options: beta='auto' is per-sample IBA's rule (Appendix A); the "
            "explainer's objective needs a number."
        )
    if isinstance(options.seed, bool) or not isinstance(options.seed, int):
        raise ValueError(
            "options: seed must be an int (it seeds the network, the objective's "
            f"noise and the teacher), got {options.seed!r}."
        )


@dataclass(frozen=True, eq=False)
class ExplainerSettings:
    """Everything that defines a fitted explainer (validated when built).

    Settings are equal when their records (:meth:`to_dict`) are.

    Attributes:
        hidden (int): Width of the perceptron's hidden layer. Default 256.
        options (IBAOptions): The IBA options of the objective (Eq. 5 with
            the explainer's :math:`\\alpha`): ``beta`` (on the mean capacity),
            ``prior`` (any prior plug-in that needs no data), ``complement``
            (the probability of the explained class with the mask inverted,
            minimised), ``n_samples`` (noise draws per instance and step),
            ``objective`` (the task loss), ``seed`` (of the initialisation,
            the noise and the teacher) and ``removal``: ``"noise"`` (Eq. 2,
            the default) or ``"attention"``, the deletion objective of
            ``iba-deletion`` learned across the corpus (Eqs. R1-R3; no noise,
            no capacity: ``beta``, ``prior`` and ``n_samples`` unused; needs
            ``keep`` or a teacher to distil). Default
            :data:`OBJECTIVE_OPTIONS`.
        keep (float or None): The budget: the mean signal weight
            :math:`\\bar\\lambda` over an instance's real tokens is pulled to
            ``keep`` by ``keep_weight * (mean - keep)**2``. None: no budget.
        keep_weight (float): Weight of the budget term. Default 10.
        distil (float): Weight of the distillation term (binary cross-entropy
            of :math:`\\lambda_t` against the per-sample teacher's mask); the
            IBA objective is added with weight 1 unless ``distil_only``.
        distil_only (bool): Train on the distillation term alone.
        teacher (IBAOptions or None): The per-sample teacher's options (e.g.
            ``iba-faithful``'s; a configuration name or a dict of fields is
            turned into them), used when ``distil > 0``; its ``readout`` is
            ``"mask_mean"``, and its seed, when None, the explainer's.
        epochs (int): Passes over the loader. Default 2.
        network_lr (float): The learning rate of the network's Adam. Default
            1e-3.
        target (str): ``"label"`` (the loader's labels; the prediction where
            none) or ``"predicted"``.
        pad_token_id (int): The id the removable tokens are replaced by.
        special_token_ids (tuple of int): Ids never removed ([CLS], [SEP]...).
        readout (tuple of str): Names of the readout layers (filled by
            :meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`).
    """

    hidden: int = 256
    options: IBAOptions = OBJECTIVE_OPTIONS
    keep: Optional[float] = None
    keep_weight: float = 10.0
    distil: float = 0.0
    distil_only: bool = False
    teacher: Optional[IBAOptions] = None
    epochs: int = 2
    network_lr: float = 1e-3
    target: str = "label"
    pad_token_id: int = 0
    special_token_ids: Tuple[int, ...] = ()
    readout: Tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        _positive("hidden", self.hidden, integer=True)
        _positive("epochs", self.epochs, integer=True)
        _positive("network_lr", self.network_lr)
        for name in ("keep_weight", "distil"):
            _non_negative(name, getattr(self, name))
        if self.keep is not None and not (
            isinstance(self.keep, numbers.Real) and 0 < self.keep < 1
        ):
            raise ValueError(f"keep must be in (0, 1) or None, got {self.keep!r}.")
        if self.target not in TRAIN_TARGETS:
            raise ValueError(
                f"target must be one of {TRAIN_TARGETS}, got {self.target!r}."
            )
        object.__setattr__(self, "options", _as_options(self.options, "options"))
        _check_objective_options(self.options)
        if self.teacher is not None:
            teacher = _as_options(self.teacher, "teacher")
            _storable(teacher, "teacher")
            object.__setattr__(self, "teacher", teacher)
        if (
            self.options.removal == "attention"
            and self.keep is None
            and self.distil == 0
        ):
            raise ValueError(
                "options: the deletion objective (removal='attention') has no "
                "noise and no capacity term; it needs a budget, keep= (e.g. 0.3), "
                "or a teacher to distil (distil > 0): without one, keeping every "
                "token is optimal."
            )
        if self.distil > 0 and self.teacher is None:
            raise ValueError("distil > 0 needs teacher= (the per-sample IBA options).")
        if self.distil_only and self.distil == 0:
            raise ValueError("distil_only=True needs distil > 0.")
        ids = tuple(sorted({int(i) for i in self.special_token_ids}))
        object.__setattr__(self, "special_token_ids", ids)
        object.__setattr__(self, "readout", tuple(str(n) for n in self.readout))

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready settings (the IBA options as their records, tuples as
        lists), as stored in the record."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["options"] = self.options.record()
        out["teacher"] = None if self.teacher is None else self.teacher.record()
        out["special_token_ids"] = list(self.special_token_ids)
        out["readout"] = list(self.readout)
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ExplainerSettings":
        """The settings from :meth:`to_dict`'s output, or from a record of
        version 0.2 (flat ``beta``, ``prior``, ``complement``, ``n_samples``
        and ``seed``, now fields of ``options``; ``lr``, now ``network_lr``;
        ``teacher`` as a dict of :meth:`InformationBottleneckAttribution.
        attribute` keywords). The flat names override ``options`` 's fields.
        """
        data = dict(data)
        if "lr" in data:
            data["network_lr"] = data.pop("lr")
        flat = {k: data.pop(k) for k in _FLAT_OPTIONS if k in data}
        if flat:
            base = _as_options(data.get("options", OBJECTIVE_OPTIONS), "options")
            data["options"] = base.replace(**flat)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown explainer settings {unknown}")
        for key in ("special_token_ids", "readout"):
            if key in known:
                known[key] = tuple(known[key])
        return cls(**known)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExplainerSettings):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True, default=repr))

    def budget(self) -> str:
        """Which budget acts, in words (for logs and tables)."""
        parts = [f"beta={self.options.beta:g}"]
        if self.keep is not None:
            parts.append(f"keep={self.keep:g}x{self.keep_weight:g}")
        if self.options.complement > 0:
            parts.append(f"complement={self.options.complement:g}")
        if self.distil > 0:
            parts.append(
                f"distil={self.distil:g}" + (" only" if self.distil_only else "")
            )
        return ", ".join(parts)


class MaskExplainer(nn.Module):
    r"""The explainer network :math:`g_\theta` (module docstring's equations).

    Args:
        widths (Sequence[int]): Feature sizes of the readout layers' hidden
            states, in order.
        n_classes (int): Number of classes :math:`C` (one logit each).
        hidden (int): Width of the hidden layer.
        init_bias (float, optional): Initial :math:`\alpha` of every token
            (0: :math:`\lambda = 0.5`, as ``iba-faithful`` starts). The output
            layer starts near zero weights so that every token starts there.
        summary (str, optional): Which position's state summarises the input:
            ``"first"`` (a classifier's [CLS]) or ``"last"`` (a causal LM's
            last position, the only one that attends to every token).
    """

    def __init__(
        self,
        widths: Sequence[int],
        n_classes: int,
        hidden: int,
        init_bias: float = 0.0,
        summary: str = "first",
    ) -> None:
        super().__init__()
        if not widths:
            raise ValueError("MaskExplainer needs at least one readout layer.")
        if summary not in SUMMARIES:
            raise ValueError(f"summary must be one of {SUMMARIES}, got {summary!r}.")
        self.widths = tuple(int(w) for w in widths)
        self.n_classes = int(n_classes)
        self.summary = summary
        in_features = sum(self.widths) + self.widths[-1]
        self.hidden = nn.Linear(in_features, hidden)
        self.out = nn.Linear(hidden, self.n_classes)
        with torch.no_grad():
            self.out.weight.mul_(1e-2)
            self.out.bias.fill_(init_bias)

    def features(self, states: Sequence[Tensor]) -> Tensor:
        r""":math:`u_t`: the standardised readout states and the summary."""
        if len(states) != len(self.widths):
            raise ValueError(
                f"the explainer reads {len(self.widths)} layers, got {len(states)}."
            )
        normed = [F.layer_norm(s.float(), s.shape[-1:]) for s in states]
        at = slice(0, 1) if self.summary == "first" else slice(-1, None)
        summary = normed[-1][:, at].expand(-1, normed[-1].shape[1], -1)
        return torch.cat(normed + [summary], dim=-1)

    def forward(self, states: Sequence[Tensor]) -> Tensor:
        r"""Per-token, per-class :math:`a_t` of shape ``(B, L, C)``.

        Args:
            states (Sequence[Tensor]): The readout layers' hidden states, each
                ``(B, L, H_r)``.
        """
        return self.out(F.gelu(self.hidden(self.features(states))))

    def alpha(self, states: Sequence[Tensor], target: Optional[Tensor]) -> Tensor:
        r""":math:`\alpha_t` of the explained class, ``(B, L)``.

        Args:
            states (Sequence[Tensor]): As :meth:`forward`.
            target (Tensor or None): ``(B,)`` class indices; None for a model
                with one score per instance (a causal LM's answer
                log-probability: the network's one output).
        """
        logits = self.forward(states)
        if target is None:
            if self.n_classes != 1:
                raise ValueError(
                    f"target=None needs an explainer of one output; this one has "
                    f"{self.n_classes} (one per class): give the class."
                )
            return logits[..., 0]
        index = target.to(logits.device).long().reshape(-1, 1, 1)
        index = index.expand(-1, logits.shape[1], 1)
        return logits.gather(-1, index).squeeze(-1)
