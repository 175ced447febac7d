"""Checking and reading the inputs of IBA's ``attribute``: batch sizes, and the
token mask (given, or found in the forward's arguments)."""

import inspect
from typing import Any, Callable, List, Optional, Tuple

from torch import Tensor
from torch.nn import Module

__all__ = [
    "check_batch",
    "check_token_mask",
    "infer_token_mask",
    "slice_rows",
]


def forward_signature(forward_func: Callable[..., Any]) -> List[str]:
    fn = forward_func
    while isinstance(fn, Module) and hasattr(fn, "module"):  # DataParallel
        fn = fn.module
    try:
        params = inspect.signature(fn.forward if isinstance(fn, Module) else fn)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params.parameters.values() if p.kind in kinds]


def infer_token_mask(
    forward_func: Callable[..., Any], args: Tuple[Any, ...]
) -> Optional[Tensor]:
    """The argument passed in the ``attention_mask`` position of the forward."""
    for name, value in zip(forward_signature(forward_func), args):
        if name == "attention_mask" and isinstance(value, Tensor):
            return value
    return None


def check_batch(
    inputs: Tuple[Tensor, ...], extra: Tuple[Any, ...]
) -> Tuple[int, Tensor]:
    if not inputs or not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError("inputs must be a Tensor or a tuple of Tensors.")
    batch = inputs[0].shape[0]
    for name, group in (("inputs", inputs), ("additional_forward_args", extra)):
        for t in group:
            if isinstance(t, Tensor) and t.dim() > 0 and t.shape[0] != batch:
                raise ValueError(
                    f"All {name} tensors must share the batch size {batch} of "
                    f"inputs[0]; got one of shape {tuple(t.shape)}."
                )
    return batch, inputs[0]


def check_token_mask(token_mask: Optional[Tensor], batch: int) -> None:
    if token_mask is None:
        return
    if token_mask.dim() != 2 or token_mask.shape[0] != batch:
        raise ValueError(
            f"token_mask must have shape (B, L) with B={batch}; got "
            f"{tuple(token_mask.shape)}."
        )
    empty = (token_mask.sum(dim=1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"Instance(s) {empty} have no real token (all padding).")


def slice_rows(value: Any, rows: slice, batch: int) -> Any:
    if isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == batch:
        return value[rows]
    return value
