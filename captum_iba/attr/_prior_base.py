"""The base class of IBA's noise priors (:class:`NoisePrior`), in a module of
its own so that the built-in priors (:mod:`captum_iba.attr.priors`) and the
prior fitted on data (:mod:`captum_iba.attr.dataset_prior`) both build on it
without importing each other."""

import abc
from typing import Any, Callable, Optional, Sequence, Tuple

from torch import Tensor
from torch.nn import Module

__all__ = ["NoisePrior"]


class NoisePrior(abc.ABC):
    """Base class of the noise priors.

    Subclasses implement :meth:`statistics`.
    """

    #: Short name used in strings, results and error messages.
    name: str = ""
    #: Whether :meth:`statistics` needs the layer's input.
    needs_layer_input: bool = False
    #: Whether :meth:`statistics` needs the layer's output on ``baselines``
    #: (passed as the keyword ``baseline``; see :meth:`baselines`).
    needs_baseline: bool = False
    #: Whether :meth:`create` needs data to fit on.
    needs_data: bool = False

    @classmethod
    def create(
        cls,
        forward_func: Optional[Callable[..., Any]] = None,
        layer: Optional[Module] = None,
        data: Any = None,
    ) -> "NoisePrior":
        """A ready prior of this kind, when resolved by name.

        Priors prepared from data (``needs_data``) fit themselves here; the
        others ignore the arguments.

        Args:
            forward_func (Callable, optional): The model.
            layer (Module, optional): The bottlenecked layer.
            data (Iterable or Callable, optional): Batches to fit on, or a
                function returning them (called only when needed).

        Returns:
            NoisePrior: The prior.
        """
        return cls()

    def baselines(
        self,
        input_ids: Tensor,
        token_mask: Optional[Tensor],
        pad_token_id: Optional[int],
        special_token_ids: Sequence[int] = (),
    ) -> Optional[Tensor]:
        """The inputs whose layer output this prior takes its mean from, or
        None when it needs none (all priors but ``needs_baseline`` ones)."""
        return None

    @abc.abstractmethod
    def statistics(
        self, x: Tensor, layer_input: Optional[Tensor], token_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        """Mean and standard deviation of the noise for a batch.

        Args:
            x (Tensor): The layer output, shape (B, L, *features), float32.
            layer_input (Tensor or None): The layer's input, when captured.
            token_mask (Tensor): (B, L) bool, True at real tokens.

        Returns:
            (mean, std): Tensors broadcastable to ``x``; ``std > 0``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
