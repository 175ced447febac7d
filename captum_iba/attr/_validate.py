"""Checks of ``attribute``'s numbers and token inputs that name the argument.

Kept apart from :class:`~captum_iba.attr.options.IBAOptions` so that they can be
read (and merged) on their own: each function raises a ``ValueError`` or
``TypeError`` naming the argument and the valid range, before any forward
pass (issue #11, P9).
"""

import math
import numbers
from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from captum_iba._utils.common import check_length

__all__ = ["check_finite_output", "check_numbers", "check_token_inputs"]


def _finite(name: str, value: Any) -> None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(float(value)):
            raise ValueError(f"{name} must be a finite number, got {value!r}.")


def check_numbers(
    beta: Any, lr: Any, init_alpha: Any, seed: Any, internal_batch_size: Any
) -> None:
    """Finite ``beta``, ``lr``, ``init_alpha``; an integer seed torch accepts;
    an integer ``internal_batch_size``.

    Raises:
        ValueError: Naming the argument and what it must be.
    """
    for name, value in (("beta", beta), ("lr", lr), ("init_alpha", init_alpha)):
        _finite(name, value)
    if seed is not None and (
        isinstance(seed, bool)
        or not isinstance(seed, numbers.Integral)
        or not 0 <= seed < 2**63
    ):
        raise ValueError(f"seed must be an integer in 0 .. 2**63 - 1, got {seed!r}.")
    if internal_batch_size is not None and (
        isinstance(internal_batch_size, bool)
        or not isinstance(internal_batch_size, numbers.Integral)
        or internal_batch_size < 1
    ):
        raise ValueError(
            f"internal_batch_size must be an integer >= 1, got {internal_batch_size!r}."
        )


def check_token_inputs(forward_func: Any, inputs: Tuple[Tensor, ...]) -> None:
    """An empty batch, and for a Hugging Face model, token ids that it cannot
    take: not ``(B, L)``, outside its vocabulary, or longer than its positions.

    Args:
        forward_func: The forward function; a model with a ``config`` holding
            ``vocab_size`` / ``max_position_embeddings`` is checked against it.
        inputs (tuple of Tensor): The formatted inputs.

    Raises:
        ValueError: Naming ``inputs`` and the valid shape or range.
    """
    first = inputs[0]
    if first.dim() == 0 or first.shape[0] == 0:
        raise ValueError(
            f"inputs hold no instance (shape {tuple(first.shape)}): pass at least "
            "one row"
        )
    if first.dim() >= 2 and first.shape[1] == 0:
        raise ValueError(
            f"inputs hold no token (shape {tuple(first.shape)}): every instance "
            "needs at least one"
        )
    config: Optional[Any] = getattr(forward_func, "config", None)
    if config is None or first.is_floating_point() or first.is_complex():
        return
    if first.dim() != 2:
        raise ValueError(
            f"inputs must be token ids of shape (B, L) for this model, got "
            f"{tuple(first.shape)}"
        )
    vocab = getattr(config, "vocab_size", None)
    if isinstance(vocab, int) and first.numel():
        low, high = int(first.min()), int(first.max())
        if low < 0 or high >= vocab:
            raise ValueError(
                f"inputs hold token id {high if high >= vocab else low}, outside the "
                f"model's vocabulary 0..{vocab - 1}"
            )
    check_length(forward_func, first.shape[1])


def check_finite_output(output: Tensor, site: str) -> None:
    """The model's output on the clean inputs is finite, the bottleneck's
    input having been found finite: else what lies above ``site`` (weights,
    the head) is not finite.

    Raises:
        FloatingPointError: Naming the site.
    """
    if not bool(torch.isfinite(output).all()):
        raise FloatingPointError(
            f"forward_func's output is not finite (NaN or inf) although {site}'s "
            "is: the weights or the computation above the bottleneck are not finite"
        )
