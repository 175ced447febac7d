"""The options of one IBA run (:class:`IBAOptions`), validated once when built.

Kept apart from the Captum adapter (:mod:`captum_iba.attr.iba`) so that the
list of options, their defaults and their checks are in one short file.
"""

import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from captum_iba.attr.objectives import Objective, resolve_objective
from captum_iba.attr.priors import NoisePrior, PaperPrior, resolve_prior

__all__ = ["OPTIMIZERS", "READOUTS", "BetaType", "IBAOptions"]

BetaType = Union[float, Literal["auto"]]
#: How ``alpha`` is optimised: the paper's Adam, or gradient descent with each
#: instance's gradient divided by its largest absolute element
#: (``"normalized_gd"``, see :func:`captum_iba.attr._loop.normalized_step`).
OPTIMIZERS = ("adam", "normalized_gd")
#: What is returned per element: the paper's capacity (Eqs. 3-4), or the signal
#: weight :math:`\lambda` averaged over the optimisation steps (``"mask_mean"``).
READOUTS = ("capacity", "mask_mean")


def _check_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")


@dataclass(frozen=True)
class IBAOptions:
    """The options of one IBA run, validated once when built.

    See :meth:`InformationBottleneckAttribution.attribute` for their meaning.
    ``prior`` may be given as a name; it is resolved to a
    :class:`~captum_iba.attr.priors.NoisePrior` here.
    """

    beta: BetaType = 1e-5
    steps: int = 10
    n_samples: int = 10
    lr: float = 1.0
    init_alpha: float = 5.0
    prior: NoisePrior = field(default_factory=PaperPrior)
    seed: Optional[int] = None
    internal_batch_size: Optional[int] = None
    objective: Objective = field(default_factory=lambda: resolve_objective("auto"))
    attribute_to_layer_input: bool = False
    optimizer: str = "adam"
    readout: str = "capacity"

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("readout", self.readout, READOUTS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        _check_int("steps", self.steps)
        _check_int("n_samples", self.n_samples)
        beta_ok = self.beta == "auto" or (
            isinstance(self.beta, numbers.Real)
            and not isinstance(self.beta, bool)
            and self.beta >= 0
        )
        if not beta_ok:
            raise ValueError(f"beta must be a float >= 0 or 'auto', got {self.beta!r}.")
        if not (isinstance(self.lr, numbers.Real) and self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr!r}.")
        if not isinstance(self.init_alpha, numbers.Real):
            raise ValueError(f"init_alpha must be a number, got {self.init_alpha!r}.")
        object.__setattr__(self, "init_alpha", float(self.init_alpha))
        object.__setattr__(self, "prior", resolve_prior(self.prior))
        object.__setattr__(self, "objective", resolve_objective(self.objective))
        if self.attribute_to_layer_input and self.prior.needs_layer_input:
            raise ValueError(
                f"prior={self.prior.name!r} takes its mean from the layer's input, "
                "so it cannot bottleneck that input: use attribute_to_layer_input="
                "False or another prior."
            )
        ibs = self.internal_batch_size
        if ibs is not None:
            _check_int("internal_batch_size", ibs)
        if ibs is not None and ibs < self.n_samples:
            warnings.warn(
                f"internal_batch_size ({ibs}) is below n_samples ({self.n_samples}): "
                "one instance's noise copies run together, so it is raised to "
                f"{self.n_samples}.",
                stacklevel=5,
            )
            object.__setattr__(self, "internal_batch_size", self.n_samples)

    def instances_per_chunk(self, batch: int) -> int:
        """How many instances go through one forward pass together."""
        if self.internal_batch_size is None:
            return batch
        return max(1, self.internal_batch_size // self.n_samples)
