r"""The amortized bottleneck: a small network that predicts IBA's mask.

Read next to ``docs/method.rst`` (section "Amortized IBA"). For an instance
with tokens :math:`t = 1..L`, the frozen model's hidden states at the readout
layers :math:`r \in R` (by default the bottlenecked layer :math:`l` and the
last layer) are standardised per token without learned parameters and joined
with the last readout layer's first-token state (the sentence's summary):

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
everything that defines a fitted explainer (it is part of the cache key).
"""

import numbers
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ExplainerSettings", "MaskExplainer"]

#: The targets the explainer is trained to explain.
TRAIN_TARGETS = ("label", "predicted")
#: The priors an explainer can be trained with (by name).
AMORTIZED_PRIORS = ("baseline", "paper")


def _positive(name: str, value: Any, integer: bool = False) -> None:
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        what = "an int" if integer else "a number"
        raise ValueError(f"{name} must be {what} > 0, got {value!r}.")


def _non_negative(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.")


@dataclass(frozen=True)
class ExplainerSettings:
    """Everything that defines a fitted explainer (validated when built).

    Attributes:
        hidden (int): Width of the perceptron's hidden layer. Default 256.
        beta (float): :math:`\\beta` of Eq. (5) on the mean capacity. Default
            1e-5 (the paper's, inert).
        keep (float or None): The budget: the mean signal weight
            :math:`\\bar\\lambda` over an instance's real tokens is pulled to
            ``keep`` by ``keep_weight * (mean - keep)**2``. None: no budget.
        keep_weight (float): Weight of the budget term. Default 10.
        distil (float): Weight of the distillation term (binary cross-entropy
            of :math:`\\lambda_t` against the per-sample teacher's mask); the
            IBA objective is added with weight 1 unless ``distil_only``.
        distil_only (bool): Train on the distillation term alone.
        complement (float): Weight of the complement term: the probability
            of the explained class with the mask inverted (the kept tokens
            removed), minimised. Default 0.
        teacher (dict or None): Options of the per-sample teacher
            (:meth:`InformationBottleneckAttribution.attribute` keywords, e.g.
            ``iba-faithful``'s), used when ``distil > 0``.
        epochs (int): Passes over the loader. Default 2.
        lr (float): Adam's learning rate. Default 1e-3.
        n_samples (int): Noise draws per instance and step. Default 2.
        target (str): ``"label"`` (the loader's labels; the prediction where
            none) or ``"predicted"``.
        prior (str): ``"baseline"`` (the layer's output with the removable
            tokens replaced by [PAD], as ``iba-faithful``) or ``"paper"``.
        pad_token_id (int): The id the removable tokens are replaced by.
        special_token_ids (tuple of int): Ids never removed ([CLS], [SEP]...).
        readout (tuple of str): Names of the readout layers (filled by
            :meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`).
        seed (int): Seed of the initialisation, the noise and the teacher.
    """

    hidden: int = 256
    beta: float = 1e-5
    keep: Optional[float] = None
    keep_weight: float = 10.0
    distil: float = 0.0
    distil_only: bool = False
    complement: float = 0.0
    teacher: Optional[Dict[str, Any]] = None
    epochs: int = 2
    lr: float = 1e-3
    n_samples: int = 2
    target: str = "label"
    prior: str = "baseline"
    pad_token_id: int = 0
    special_token_ids: Tuple[int, ...] = ()
    readout: Tuple[str, ...] = field(default=())
    seed: int = 0

    def __post_init__(self) -> None:
        _positive("hidden", self.hidden, integer=True)
        _positive("epochs", self.epochs, integer=True)
        _positive("n_samples", self.n_samples, integer=True)
        _positive("lr", self.lr)
        for name in ("beta", "keep_weight", "distil", "complement"):
            _non_negative(name, getattr(self, name))
        if self.keep is not None and not (
            isinstance(self.keep, numbers.Real) and 0 < self.keep < 1
        ):
            raise ValueError(f"keep must be in (0, 1) or None, got {self.keep!r}.")
        if self.target not in TRAIN_TARGETS:
            raise ValueError(
                f"target must be one of {TRAIN_TARGETS}, got {self.target!r}."
            )
        if self.prior not in AMORTIZED_PRIORS:
            raise ValueError(
                f"prior must be one of {AMORTIZED_PRIORS}, got {self.prior!r}."
            )
        if self.distil > 0 and self.teacher is None:
            raise ValueError("distil > 0 needs teacher= (the per-sample IBA options).")
        if self.distil_only and self.distil == 0:
            raise ValueError("distil_only=True needs distil > 0.")
        ids = tuple(sorted({int(i) for i in self.special_token_ids}))
        object.__setattr__(self, "special_token_ids", ids)
        object.__setattr__(self, "readout", tuple(str(n) for n in self.readout))
        if self.teacher is not None:
            object.__setattr__(self, "teacher", dict(self.teacher))

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready settings (tuples as lists), as stored in the record."""
        out = asdict(self)
        out["special_token_ids"] = list(self.special_token_ids)
        out["readout"] = list(self.readout)
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ExplainerSettings":
        """The settings from :meth:`to_dict`'s output."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown explainer settings {unknown}")
        for key in ("special_token_ids", "readout"):
            if key in known:
                known[key] = tuple(known[key])
        return cls(**known)

    def budget(self) -> str:
        """Which budget acts, in words (for logs and tables)."""
        parts = [f"beta={self.beta:g}"]
        if self.keep is not None:
            parts.append(f"keep={self.keep:g}x{self.keep_weight:g}")
        if self.complement > 0:
            parts.append(f"complement={self.complement:g}")
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
    """

    def __init__(
        self,
        widths: Sequence[int],
        n_classes: int,
        hidden: int,
        init_bias: float = 0.0,
    ) -> None:
        super().__init__()
        if not widths:
            raise ValueError("MaskExplainer needs at least one readout layer.")
        self.widths = tuple(int(w) for w in widths)
        self.n_classes = int(n_classes)
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
        summary = normed[-1][:, :1].expand(-1, normed[-1].shape[1], -1)
        return torch.cat(normed + [summary], dim=-1)

    def forward(self, states: Sequence[Tensor]) -> Tensor:
        r"""Per-token, per-class :math:`a_t` of shape ``(B, L, C)``.

        Args:
            states (Sequence[Tensor]): The readout layers' hidden states, each
                ``(B, L, H_r)``.
        """
        return self.out(F.gelu(self.hidden(self.features(states))))

    def alpha(self, states: Sequence[Tensor], target: Tensor) -> Tensor:
        r""":math:`\alpha_t` of the explained class, ``(B, L)``.

        Args:
            states (Sequence[Tensor]): As :meth:`forward`.
            target (Tensor): ``(B,)`` class indices.
        """
        logits = self.forward(states)
        index = target.to(logits.device).long().reshape(-1, 1, 1)
        index = index.expand(-1, logits.shape[1], 1)
        return logits.gather(-1, index).squeeze(-1)
