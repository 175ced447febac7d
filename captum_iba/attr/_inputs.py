"""The checks of IBA's inputs, each naming the argument and what it must be,
before any forward pass where they can: the numbers (:func:`check_numbers`),
the token ids (:func:`check_token_inputs`), the batch sizes
(:func:`check_batch`), the arguments that fill a parameter named as token
ids, a mask or segment ids (:func:`check_named_arguments`), the token mask
(:func:`check_token_mask`), and the model's output on the clean inputs
(:func:`check_finite_output`). Also how the forward's positional parameters
are read through the usual wrappers (:func:`unwrap_forward`,
:func:`forward_signature`; the token mask is found with them in
:mod:`captum_iba.attr._tokens`), and how the per-instance additional
arguments follow the noise copies' rows (:func:`expand_rows`,
:func:`slice_rows`, :func:`copies_failed`)."""

import functools
import inspect
import math
import numbers
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterator,
    List,
    Optional,
    Tuple,
    Union,
)

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.common import check_length

__all__ = [
    "MASK_NAMES",
    "NOT_MASK_NAMES",
    "check_batch",
    "check_finite_output",
    "check_named_arguments",
    "check_numbers",
    "check_token_inputs",
    "check_feature_mask",
    "check_token_mask",
    "copies_failed",
    "expand_rows",
    "forward_signature",
    "slice_rows",
    "unwrap_forward",
]

#: Parameters never taken for a token mask, whatever their values.
NOT_MASK_NAMES = frozenset({"token_type_ids", "segment_ids", "position_ids", "labels"})
#: Parameter names taken for a token mask (with a (B, L) 0/1 value).
MASK_NAMES = frozenset(
    {"attention_mask", "mask", "attn_mask", "token_mask", "input_mask", "padding_mask"}
)


def unwrap_forward(forward_func: Any) -> Tuple[Any, int, Tuple[str, ...]]:
    """The function whose parameters ``forward_func`` 's positional arguments
    fill, through the usual wrappers.

    Follows ``torch.compile`` 's ``_orig_mod``, ``DataParallel`` /
    ``DistributedDataParallel`` 's ``.module``, a Module's ``forward``, bound
    methods of such wrappers and ``functools.partial``.

    Returns:
        (fn, shift, bound): The function, how many leading positional
        parameters a ``partial`` already filled, and the keyword names it
        fixed.
    """
    fn, shift, bound = forward_func, 0, ()
    for _ in range(16):  # wrappers nest a few levels at most
        if isinstance(fn, functools.partial):
            shift += len(fn.args)
            bound += tuple(fn.keywords)
            fn = fn.func
        elif isinstance(fn, Module) and isinstance(
            getattr(fn, "_orig_mod", None), Module
        ):
            fn = fn._orig_mod
        elif isinstance(fn, Module) and isinstance(getattr(fn, "module", None), Module):
            fn = fn.module
        elif inspect.ismethod(fn) and isinstance(fn.__self__, Module):
            owner = fn.__self__
            wrapper = hasattr(owner, "_orig_mod") or isinstance(
                getattr(owner, "module", None), Module
            )
            if fn.__name__ == "forward" and wrapper:
                fn = owner  # DataParallel(model).forward: the wrapped model's
            else:
                return fn, shift, bound
        elif isinstance(fn, Module):
            return fn.forward, shift, bound
        else:
            return fn, shift, bound
    return fn, shift, bound


def forward_signature(forward_func: Callable[..., Any]) -> Optional[List[str]]:
    """Names of the positional parameters that ``forward_func`` 's positional
    arguments fill (None when they cannot be read, e.g. ``*args``)."""
    fn, shift, bound = unwrap_forward(forward_func)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in params if p.kind in kinds][shift:]
    names = [n for n in names if n not in bound]
    if not names and any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return names


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


def _named_arguments(
    forward_func: Any, args: Tuple[Any, ...], n_inputs: int
) -> List[Tuple[str, str, Any]]:
    """(where it was given, parameter name, value) of every positional
    argument whose parameter name is known."""
    names = forward_signature(forward_func) or []
    where = [f"inputs[{i}]" for i in range(n_inputs)]
    where += [f"additional_forward_args[{i}]" for i in range(len(args) - n_inputs)]
    return list(zip(where, names, args))


def check_named_arguments(
    forward_func: Any, inputs: Tuple[Tensor, ...], extra: Tuple[Any, ...]
) -> None:
    """The arguments that fill a parameter named ``input_ids``, a mask or
    segment ids (:data:`MASK_NAMES`, :data:`NOT_MASK_NAMES`) hold what that
    name means, before any forward pass (else torch or transformers fail deep
    inside, or compute something else).

    Raises:
        TypeError: For token ids that are not integers, a mask or segment ids
            that is neither a Tensor nor None (e.g. the string ``"mask"``).
        ValueError: For a 2-D mask whose shape is not the token ids' (B, L).
    """
    bound: Dict[str, Any] = {}
    fn = forward_func
    while isinstance(fn, functools.partial):
        bound.update(fn.keywords)
        fn = fn.func
    held = [k for k, v in bound.items() if k in MASK_NAMES and isinstance(v, Tensor)]
    if held:
        raise ValueError(
            f"forward_func binds {held[0]}= (functools.partial): IBA runs the "
            "forward on n_samples noise copies of every instance, so per-instance "
            "tensors must come in additional_forward_args"
        )
    first = inputs[0]
    ids = first if first.dim() == 2 and not first.is_floating_point() else None
    for where, name, value in _named_arguments(forward_func, (*inputs, *extra),
                                               len(inputs)):  # fmt: skip
        if name == "input_ids" and isinstance(value, Tensor):
            if value.is_floating_point() or value.is_complex():
                raise TypeError(
                    f"{where} fills forward_func's parameter input_ids: token ids "
                    f"must be integers, got {value.dtype} (for embeddings, explain "
                    "a function taking inputs_embeds)"
                )
        elif name in MASK_NAMES | NOT_MASK_NAMES and name != "labels":
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"{where} fills forward_func's parameter {name}: expected a "
                    f"Tensor (B, L) or None, got {type(value).__name__} {value!r:.40}"
                )
            if name in MASK_NAMES and isinstance(value, Tensor):
                _check_mask(where, name, value, ids, tuple(first.shape[:2]))


def _check_mask(
    where: str,
    name: str,
    value: Tensor,
    ids: Optional[Tensor],
    shape: Tuple[int, ...],
) -> None:
    """A tensor filling a parameter named as a mask: the token ids' shape
    (B, L) (one of shape (L,) would leave the padding of all rows but one
    scored as tokens), and 1 at tokens, 0 at padding, as the degradation test
    requires.

    Raises:
        ValueError: Naming the argument, the parameter, and the shape or the
            values found.
    """
    if ids is not None and value.dim() <= 2 and value.shape != ids.shape:
        hint = ""
        if value.dim() < 2:
            hint = f" (one mask for every row: mask.expand({ids.shape[0]}, -1))"
        raise ValueError(
            f"{where} fills forward_func's parameter {name} with shape "
            f"{tuple(value.shape)}, but the token ids are {tuple(ids.shape)}: a "
            f"mask must have their shape (B, L){hint}"
        )
    if value.dim() == 2 and tuple(value.shape) == shape:
        odd = value[(value != 0) & (value != 1)]
        if odd.numel():
            values = sorted({float(v) for v in odd.unique()[:3].tolist()})
            raise ValueError(
                f"{where} fills forward_func's parameter {name} but holds values "
                f"other than 0 and 1 (e.g. {values}): a mask holds 1 at tokens and "
                "0 at padding (an additive mask of 0 and -inf is not one)"
            )


_OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


@contextmanager
def copies_failed(batch: int, n: int) -> Iterator[None]:
    """Adds a note to an error of the forward on the ``batch x n`` rows of the
    noise copies (it ran on the ``batch`` instances): something it holds (a
    mask in a closure) may not follow the rows. The error keeps its type and
    message."""
    try:
        yield
    except (RuntimeError, IndexError, ValueError) as err:
        if hasattr(err, "add_note") and not isinstance(err, _OUT_OF_MEMORY):
            err.add_note(
                f"forward_func failed on the {batch} x {n} rows of IBA's noise "
                f"copies though it ran on the {batch} instance(s): if it holds a "
                "per-instance tensor (e.g. an attention mask in a closure), pass "
                "it in additional_forward_args instead."
            )
        raise


def _per_instance(t: Any, batch: int) -> bool:
    return isinstance(t, Tensor) and t.dim() > 0 and t.shape[0] == batch


def check_batch(
    inputs: Tuple[Tensor, ...], extra: Tuple[Any, ...]
) -> Tuple[int, Tensor]:
    """The batch size; every input shares it, and an additional tensor that
    looks per-instance (an input's trailing shape) must have as many rows.

    Additional tensors whose first dimension is not the batch (e.g. the target
    token ids of a generative model) are constants: they pass through
    untouched and are never repeated with the noise copies.
    """
    if not inputs or not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError("inputs must be a Tensor or a tuple of Tensors.")
    batch = inputs[0].shape[0]
    for t in inputs:
        if t.dim() == 0 or t.shape[0] != batch:
            raise ValueError(
                f"All inputs tensors must share the batch size {batch} of inputs[0]; "
                f"got one of shape {tuple(t.shape)}."
            )
    trailing = {tuple(t.shape[1:]) for t in inputs if t.dim() > 1}
    for t in extra:
        if (
            isinstance(t, Tensor)
            and t.dim() > 1
            and t.shape[0] != batch
            and tuple(t.shape[1:]) in trailing
        ):
            raise ValueError(
                f"additional_forward_args holds a tensor of shape {tuple(t.shape)}: it "
                f"has the inputs' trailing shape but not their batch size {batch}."
            )
    return batch, inputs[0]


def expand_rows(
    extra: Tuple[Any, ...], batch: int, n: int, constant: FrozenSet[int] = frozenset()
) -> Tuple[Any, ...]:
    """Per-instance additional tensors repeated for the ``n`` noise copies of
    every instance; everything else (and the positions in ``constant``) passes
    through untouched."""
    return tuple(
        t.repeat_interleave(n, dim=0)
        if i not in constant and _per_instance(t, batch)
        else t
        for i, t in enumerate(extra)
    )


def check_feature_mask(
    feature_mask: Optional[Tensor], batch: int, mask: str = "feature"
) -> None:
    """Refuse a ``feature_mask`` that is not a ``(B, L)`` integer tensor of
    group indices (>= 0, or -1 for a token of its own), or none with
    ``mask="source"``."""
    if feature_mask is None:
        if mask == "source":
            raise ValueError(
                "mask='source' shares one weight per source: give the sources as "
                "feature_mask, (B, L) group indices (a causal LM: a PromptBatch "
                "with sources, captum_iba.evaluation.sources.with_sources)."
            )
        return
    if not isinstance(feature_mask, Tensor) or feature_mask.dtype.is_floating_point:
        raise ValueError(
            "feature_mask must be an integer Tensor (B, L) of group indices; got "
            f"{getattr(feature_mask, 'dtype', type(feature_mask).__name__)}."
        )
    if feature_mask.dim() != 2 or feature_mask.shape[0] != batch:
        raise ValueError(
            f"feature_mask must have shape (B, L) with B={batch}; got "
            f"{tuple(feature_mask.shape)}."
        )
    if bool((feature_mask < -1).any()):
        raise ValueError(
            "feature_mask holds group indices >= 0 and -1 (a token of its own); "
            f"it holds {int(feature_mask.min())}."
        )


def check_token_mask(token_mask: Optional[Tensor], batch: int) -> None:
    if token_mask is None:
        return
    if not isinstance(token_mask, Tensor):
        raise TypeError(
            f"token_mask must be a Tensor (B, L); got {type(token_mask).__name__}."
        )
    if token_mask.dim() != 2 or token_mask.shape[0] != batch:
        raise ValueError(
            f"token_mask must have shape (B, L) with B={batch}; got "
            f"{tuple(token_mask.shape)}."
        )
    odd = token_mask[(token_mask != 0) & (token_mask != 1)]
    if odd.numel():
        raise ValueError(
            f"token_mask must hold 1 at real tokens and 0 at padding; it holds "
            f"{float(odd[0])}."
        )
    empty = (token_mask.sum(dim=1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"Instance(s) {empty} have no real token (all padding).")


def slice_rows(
    extra: Tuple[Any, ...],
    rows: Union[slice, Tensor],
    batch: int,
    constant: FrozenSet[int] = frozenset(),
) -> Tuple[Any, ...]:
    """The rows (a slice, or indices) of the per-instance additional tensors;
    the rest as it is."""
    return tuple(
        t[rows] if i not in constant and _per_instance(t, batch) else t
        for i, t in enumerate(extra)
    )
