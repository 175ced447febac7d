"""Which tokens count, read from the forward function and the model behind
it: the token mask among the forward's arguments (:func:`infer_token_mask`,
:func:`token_mask_of`), the model's pad and special token ids
(:func:`model_pad_token_id`, :func:`model_special_token_ids`,
:func:`special_ids`), the tokens a removal may take
(:func:`removable_tokens`). The checks of the inputs live in
:mod:`captum_iba.attr._inputs`."""

import warnings
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.captum_compat import _format_tensor_into_tuples
from captum_iba._utils.common import removable_mask, user_stacklevel
from captum_iba.attr._inputs import (
    MASK_NAMES,
    NOT_MASK_NAMES,
    check_named_arguments,
    forward_signature,
    unwrap_forward,
)

__all__ = [
    "infer_token_mask",
    "known_removable",
    "model_pad_token_id",
    "model_special_token_ids",
    "pads_without_mask",
    "prior_baselines",
    "removable_tokens",
    "special_ids",
    "tie_groups",
    "token_mask_of",
]


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


def token_mask_of(
    forward_func: Any,
    token_mask: Optional[Tensor],
    inputs: Tuple[Tensor, ...],
    extra: Any,
) -> Tuple[Optional[Tensor], bool]:
    """The given mask, else the one found among the forward's arguments (and
    whether it was given); warns once when padding is present but no mask
    was found (an argument named as a mask that cannot be one is refused
    before)."""
    check_named_arguments(forward_func, inputs, extra)
    if token_mask is not None:
        return token_mask, True
    pad_id = model_pad_token_id(forward_func)
    found = infer_token_mask(forward_func, (*inputs, *extra), pad_id)
    if found is None and pads_without_mask(inputs, pad_id):
        warnings.warn(
            f"The inputs hold the model's pad token id ({pad_id}) but no "
            "attention mask was found among forward_func's arguments: padding "
            "would get capacity and change the prior's statistics. Pass "
            "token_mask= (1 at real tokens, 0 at padding).",
            stacklevel=4,
        )
    return found, False


def tie_groups(values: Tensor, groups: Tensor, mean: bool = False) -> Tensor:
    """``values`` (``(B, L, ...)``) with every token of a group given the
    group's sum (``mean``: its mean) - the gradient of one weight shared by
    the group's tokens, as a token mask's is the sum over its features.
    Tokens at ``groups`` -1 keep their own value.

    Args:
        values (Tensor): ``(B, L, ...)`` per token (and feature).
        groups (Tensor): ``(B, L)`` long, each token's group (-1: none).
        mean (bool): The group's mean instead of its sum.
    """
    b, length = groups.shape
    flat = values.reshape(b, length, -1)
    groups = groups.to(values.device)
    own = groups < 0
    index = groups.clamp_min(0).unsqueeze(-1).expand_as(flat)
    width = int(groups.max().clamp_min(0)) + 1
    kept = flat.masked_fill(own.unsqueeze(-1), 0)
    sums = flat.new_zeros(b, width, flat.shape[-1]).scatter_add(1, index, kept)
    if mean:
        count = torch.zeros(b, width, 1, dtype=flat.dtype, device=flat.device)
        count = count.scatter_add(1, index[..., :1], (~own).to(flat.dtype)[..., None])
        sums = sums / count.clamp_min(1)
    tied = torch.where(own.unsqueeze(-1), flat, sums.gather(1, index))
    return tied.reshape(values.shape)


def prior_baselines(
    model: Any,
    prior: Any,
    baselines: Any,
    inputs: Tuple[Tensor, ...],
    token_mask: Optional[Tensor],
    ids: Tuple[Optional[int], Optional[List[int]]],
) -> Optional[Tuple[Tensor, ...]]:
    """``baselines`` as a tuple shaped like ``inputs`` when the prior uses
    them (None otherwise); built by the prior from the token ids (the first
    input) when not given, with ``ids``: the pad id and special ids given
    (None: the model's)."""
    if not prior.needs_baseline:
        return None
    if baselines is None:
        pad = model_pad_token_id(model) if ids[0] is None else ids[0]
        first = prior.baselines(inputs[0], token_mask, pad, special_ids(model, ids[1]))
        return (first,) + tuple(inputs[1:])
    base_t = _format_tensor_into_tuples(baselines)
    shapes = [tuple(t.shape) for t in inputs]
    if [tuple(t.shape) for t in base_t] != shapes:
        raise ValueError(
            f"baselines must have the shapes of inputs {shapes}, got "
            f"{[tuple(t.shape) for t in base_t]}."
        )
    return base_t


def known_removable(
    model: Any, given: Optional[List[int]], ids: Tensor, token_mask: Optional[Tensor]
) -> Any:
    """The removable tokens by the special ids known (``given``, or the
    config's), without the warning of :func:`special_ids`; None when no
    special id is known or ``ids`` are no token ids."""
    known = given or model_special_token_ids(model)
    return removable_tokens(ids, token_mask, known) if known else None
