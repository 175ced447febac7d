"""Checking and reading the inputs of IBA's ``attribute``: batch sizes, the
per-instance additional arguments, the arguments named as masks, segment ids or
token ids, and the token mask (given, or found in the forward's arguments
through the usual wrappers)."""

import functools
import inspect
import warnings
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

from captum_iba._utils.common import removable_mask, user_stacklevel

__all__ = [
    "MASK_NAMES",
    "check_batch",
    "check_named_arguments",
    "check_token_mask",
    "copies_failed",
    "expand_rows",
    "infer_token_mask",
    "model_pad_token_id",
    "model_special_token_ids",
    "pads_without_mask",
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


def _is_mask_like(value: Any, first: Tensor) -> bool:
    """A (B, L) tensor of 0/1 with the shape of ``first`` 's first two dims."""
    return (
        isinstance(value, Tensor)
        and value.dim() == 2
        and first.dim() >= 2
        and tuple(value.shape) == tuple(first.shape[:2])
        and bool(((value == 0) | (value == 1)).all())
    )


def infer_token_mask(
    forward_func: Callable[..., Any],
    args: Tuple[Any, ...],
    pad_id: Optional[int] = None,
) -> Optional[Tensor]:
    """The token mask among the forward's positional arguments, if any.

    * an argument in a parameter named as in :data:`MASK_NAMES` (the model's
      ``attention_mask``, a lambda's ``mask``...), read through the wrappers
      of :func:`unwrap_forward`, holding 0/1 with the inputs' (B, L) shape;
    * otherwise (``lambda ids, m: ...``, ``*args``): the second positional
      argument when it holds 0/1 with the shape of the token ids ``args[0]``
      and every 0 sits on one same id (the pad id, when known) - segment ids,
      whose zeros hold the first segment's words, are not taken, nor an
      argument named as in :data:`NOT_MASK_NAMES`.

    Args:
        forward_func (Callable): The forward function.
        args (tuple): Its positional arguments (inputs, then additional ones).
        pad_id (int, optional): The model's pad token id.

    Returns:
        Tensor or None: The (B, L) mask.
    """
    if not args or not isinstance(args[0], Tensor):
        return None
    first = args[0]
    names = forward_signature(forward_func)
    if names is not None:
        for name, value in zip(names, args):
            if name in MASK_NAMES and _is_mask_like(value, first):
                return value
        if len(names) > 1 and names[1] in NOT_MASK_NAMES:
            return None
    if len(args) < 2 or not _is_mask_like(args[1], first):
        return None
    mask = args[1]
    if first.is_floating_point():
        return None
    at_zeros = first[mask == 0].unique()
    pad_ok = (
        at_zeros.numel() <= 1 if pad_id is None else bool((at_zeros == pad_id).all())
    )
    return mask if pad_ok else None


def _config_pad(owner: Any) -> Optional[int]:
    pad = getattr(getattr(owner, "config", None), "pad_token_id", None)
    return pad if isinstance(pad, int) and not isinstance(pad, bool) else None


def _referenced_modules(fn: Any) -> List[Module]:
    """The Modules a plain function or method refers to: its closure's values,
    the globals it names (``lambda ids: model(ids).logits`` -> ``model``) and
    the attributes of the object a method is bound to."""
    found: List[Any] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    found += [names[n] for n in getattr(code, "co_names", ()) if n in names]
    found += list(getattr(getattr(fn, "__self__", fn), "__dict__", {}).values())
    return [m for m in found if isinstance(m, Module)]


def model_pad_token_id(forward_func: Any) -> Optional[int]:
    """The pad token id of the model behind ``forward_func``: in the config of
    the Module (through the wrappers of :func:`unwrap_forward`), else of the
    Modules inside it, or of those a plain function refers to (a lambda's
    closure or globals); None unless exactly one id is found."""
    fn, _, _ = unwrap_forward(forward_func)
    owner = getattr(fn, "__self__", fn)
    pad = _config_pad(owner)
    if pad is not None:
        return pad
    if isinstance(owner, Module):
        pads = {_config_pad(m) for m in owner.modules()}
    else:
        pads = {model_pad_token_id(m) for m in _referenced_modules(fn)}
    pads.discard(None)
    return pads.pop() if len(pads) == 1 else None


def model_special_token_ids(forward_func: Any) -> List[int]:
    """The special token ids the config of the model behind ``forward_func``
    names (``bos``, ``eos``, ``sep``, ``cls``; BERT's config names none)."""
    fn, _, _ = unwrap_forward(forward_func)
    config = getattr(getattr(fn, "__self__", fn), "config", None)
    names = ("bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id")
    ids = [getattr(config, n, None) for n in names]
    return sorted({i for i in ids if isinstance(i, int) and not isinstance(i, bool)})


def special_ids(forward_func: Any, given: Optional[List[int]]) -> List[int]:
    """``given``, or the special token ids the model's config names; warns
    when there are none (BERT's config names none): [CLS] and [SEP] then count
    as removable tokens."""
    if given is not None:
        return given
    special = model_special_token_ids(forward_func)
    if not special:
        warnings.warn(
            "No special token ids known (the model's config names none): "
            "[CLS], [SEP] and the like are treated as removable tokens. Pass "
            "special_token_ids=tokenizer.all_special_ids to "
            "InformationBottleneckAttribution to keep them.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return special


def removable_tokens(
    ids: Tensor, token_mask: Optional[Tensor], special: List[int]
) -> Optional[Tensor]:
    """:func:`~captum_iba._utils.common.removable_mask` for
    ``removal="attention"``; None when ``ids`` are no ``(B, L)`` token ids
    (then every real token may be removed)."""
    if ids.dim() != 2 or ids.is_floating_point():
        return None
    return removable_mask(ids, token_mask, special)


def pads_without_mask(inputs: Tuple[Tensor, ...], pad_id: Optional[int]) -> bool:
    """True when integer ``inputs[0]`` holds the pad token id."""
    first = inputs[0]
    if pad_id is None or first.is_floating_point() or first.dim() < 2:
        return False
    return bool((first == pad_id).any())


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
