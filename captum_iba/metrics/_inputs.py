"""The data arguments of :func:`~captum_iba.metrics.degradation_test`, checked once.

Validation and resolution only: the token ids and scores
(:func:`check_inputs`), the instances as a
:class:`~captum_iba.metrics._removal.TokenBatch` (:func:`token_batch`), and
the target (:func:`resolve_target`). The options are checked by
:class:`~captum_iba.metrics.options.DegradationOptions`; the removal itself is
in :mod:`captum_iba.metrics._removal`.
"""

import warnings
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils.common import (
    check_length,
    check_target_range,
    format_target,
    removable_mask,
)
from captum_iba.metrics._removal import ExtraArg, TokenBatch
from captum_iba.metrics.options import DegradationOptions

TargetLike = Union[None, int, Sequence[int], Tensor]


def check_inputs(inputs: Any, attributions: Any) -> Tuple[Tensor, Tensor]:
    """The token ids (long, CPU) and per-token scores (float64, CPU).

    ``(B, L, H)`` attributions are summed over the last dimension.

    Raises:
        ValueError: On ids that are not ``(B, L)``, no instance, or scores
            whose shape does not match the ids.
        TypeError: On non-integer ids.
    """
    ids = check_token_ids(inputs)
    B, L = ids.shape
    if not isinstance(attributions, Tensor):
        attributions = torch.as_tensor(attributions)
    if attributions.is_complex():
        raise TypeError("attributions must be real numbers, got a complex tensor")
    scores = attributions.detach()
    if scores.dim() == 3 and scores.shape[:2] == (B, L):
        scores = scores.sum(-1)
    if scores.shape != (B, L):
        raise ValueError(
            f"attributions of shape {tuple(attributions.shape)} do not match the "
            f"tokens {tuple(inputs.shape)}: expected (B, L) or (B, L, H)"
        )
    return ids, scores.to("cpu", torch.float64)


def check_token_ids(inputs: Any) -> Tensor:
    """The token ids, long on the CPU.

    Raises:
        ValueError: On ids that are not ``(B, L)``, or no instance or token.
        TypeError: On non-integer ids.
    """
    if not isinstance(inputs, Tensor) or inputs.dim() != 2:
        raise ValueError("inputs must be a (B, L) tensor of token ids")
    if inputs.is_floating_point() or inputs.is_complex():
        raise TypeError("inputs must hold integer token ids")
    B, L = inputs.shape
    if B == 0:
        raise ValueError("inputs hold no instance")
    if L == 0:
        raise ValueError(f"inputs have shape {(B, L)}: no token to remove")
    return inputs.detach().cpu().long()


def check_original_logits(logits: Any, batch: int) -> Tensor:
    """Logits of the original inputs given to the test: ``(B, C)``, finite;
    float64 on the CPU.

    Raises:
        TypeError: When ``logits`` is no Tensor.
        ValueError: On a shape other than ``(batch, C)``, or values that are
            not finite.
    """
    if not isinstance(logits, Tensor):
        raise TypeError(
            f"original_logits must be a Tensor; got {type(logits).__name__}"
        )
    if logits.dim() != 2 or logits.shape[0] != batch:
        raise ValueError(
            f"original_logits has shape {tuple(logits.shape)}; expected ({batch}, C): "
            "one row of logits per instance"
        )
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("original_logits holds NaN or infinite values")
    return logits.detach().to("cpu", torch.float64)


def classify_extra(args: Any, batch: int, length: int) -> List[ExtraArg]:
    """The additional forward arguments, classified (see :data:`ExtraArg`).

    Per-instance tensors are detached and moved to the CPU.
    """
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    out: List[ExtraArg] = []
    for a in args:
        if isinstance(a, Tensor) and a.dim() >= 1 and a.shape[0] == batch:
            kind = "token" if a.dim() >= 2 and a.shape[1] == length else "row"
            out.append((kind, a.detach().cpu()))
        else:
            out.append(("const", a))
    return out


def token_batch(
    ids: Tensor,
    attention_mask: Optional[Tensor],
    token_type_ids: Optional[Tensor],
    additional_forward_args: Any,
    options: DegradationOptions,
    removable: Optional[Tensor] = None,
) -> TokenBatch:
    """The instances on the CPU: which positions are tokens, which removable.

    Padding is where the attention mask is 0, or (without a mask) where the id
    is the pad id. A mask is built when segment ids come without one.
    ``removable`` (``(B, L)`` bool, optional) restricts the removable tokens
    to its positions (e.g. a prompt's content, its instruction kept).

    Raises:
        ValueError: When the mask, segment ids or ``removable`` are not
            ``(B, L)``, or ``removable`` leaves an instance nothing to remove.
    """
    B, L = ids.shape
    extra = classify_extra(additional_forward_args, B, L)
    for name, t in (
        ("attention_mask", attention_mask),
        ("token_type_ids", token_type_ids),
        ("removable", removable),
    ):
        if t is not None and tuple(t.shape) != (B, L):
            raise ValueError(f"{name} has shape {tuple(t.shape)}; expected {(B, L)}")
    pad_id = options.pad_token_id
    mask = None if attention_mask is None else attention_mask.detach().cpu()
    if mask is not None:
        valid = mask.bool()
    elif pad_id is not None:
        valid = ids != int(pad_id)
    else:
        valid = torch.ones(B, L, dtype=torch.bool)
    empty = (~valid.bool()).all(1).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"instance(s) {empty} have no real token (all padding)")
    tt = None if token_type_ids is None else token_type_ids.detach().cpu()
    if tt is not None and mask is None:
        mask = valid.long()
    special = options.special_token_ids if options.keep_special_tokens else None
    can_go = removable_mask(ids, valid, special or ())
    if removable is not None:
        can_go = can_go & removable.detach().cpu().bool()
        none = (~can_go).all(1).nonzero().flatten().tolist()
        if none:
            raise ValueError(
                f"removable leaves instance(s) {none} no token to remove (it must "
                "mark real, non-special tokens)"
            )
    return TokenBatch(ids, valid, can_go, mask, tt, extra)


def check_model_inputs(
    forward_func: Any, ids: Tensor, attention_mask: Optional[Tensor]
) -> None:
    """The tokens fit the model's positions and the attention mask holds only
    0 and 1 (issue 20: both failed deep inside the model, or not at all).

    Raises:
        ValueError: Naming the length and the model's positions, or the
            mask's other value.
    """
    check_length(forward_func, ids.shape[1])
    if isinstance(attention_mask, Tensor):
        odd = attention_mask[(attention_mask != 0) & (attention_mask != 1)]
        if odd.numel():
            raise ValueError(
                "attention_mask must hold 1 at tokens and 0 at padding; it holds "
                f"{float(odd[0]):g}"
            )


def check_scores(scores: Tensor, removable: Tensor) -> Tensor:
    """The scores with NaN at non-removable positions set to 0.

    Raises:
        ValueError: On NaN at a removable position.
    """
    if torch.isnan(scores[removable]).any():
        raise ValueError("attributions contain NaN at removable positions")
    return torch.nan_to_num(scores, nan=0.0)  # NaN elsewhere is harmless


def per_instance_target(target: TargetLike, batch: int) -> Optional[Tensor]:
    """One class index per instance, ``(B,)`` long on the CPU, or None.

    Captum's ``TargetType`` (:func:`~captum_iba._utils.common.format_target`)
    less the multi-dimensional indices: a tuple, like a list, holds one index
    per instance, and a Tensor is flattened.

    Raises:
        TypeError: On non-integer values, or tuples of indices.
        ValueError: When a per-instance target does not have ``B`` entries.
    """
    if isinstance(target, Tensor):
        target = target.reshape(-1) if target.dim() > 1 else target
    elif isinstance(target, Iterable) and not isinstance(target, (str, bytes)):
        target = list(target)
    out = format_target(target, batch)
    if out is not None and out.dim() != 1:
        raise TypeError(
            "target must hold one integer class index per instance (tuples for "
            "multi-dimensional outputs are not supported)"
        )
    return out


def resolve_target(target: TargetLike, logits: Tensor) -> Tuple[Tensor, str]:
    """The target per instance, and ``"given"`` or ``"predicted"``.

    Args:
        target (TargetLike): As given to the test; None: the predicted class.
        logits (Tensor): ``(B, C)`` logits of the original inputs.

    Raises:
        ValueError: With fewer than 2 classes, or a target out of range.
    """
    if logits.shape[1] < 2:
        raise ValueError("the degradation test needs a classifier with >= 2 classes")
    tgt = per_instance_target(target, logits.shape[0])
    if tgt is None:
        return logits.argmax(1), "predicted"
    check_target_range(tgt, logits.shape)
    return tgt, "given"


#: Configuration fields naming a model's special tokens.
_CONFIG_SPECIALS = ("bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id")


def _config_ids(forward_func: Any, names: Sequence[str]) -> List[int]:
    """The ids a model's configuration names under ``names`` (none for a
    function or a model without a configuration)."""
    config = getattr(forward_func, "config", None)
    ids = [getattr(config, n, None) for n in names]
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool)]


def _edge_ids(ids: Tensor, valid: Tensor, can_go: Tensor) -> List[List[int]]:
    """The first and the last real token id of every instance, each edge
    only where the test may remove its tokens (a prompt's answer, the last
    tokens, is kept: that all rows end with one answer word says nothing)."""
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    first = torch.where(valid, positions, ids.shape[1]).amin(1)
    last = torch.where(valid, positions, -1).amax(1)
    rows = torch.arange(ids.shape[0])
    return [
        ids[rows, at].tolist() for at in (first, last) if bool(can_go[rows, at].all())
    ]


def special_tokens_problem(
    forward_func: Any,
    ids: Tensor,
    valid: Tensor,
    options: DegradationOptions,
    removable: Optional[Tensor] = None,
) -> str:
    """Why the test may remove special tokens it should keep ("" when there is
    no sign of it): no special ids known, or options made for another
    tokenizer - a pad id other than the model's, the model's special tokens
    (its configuration's, or the one id every instance begins or ends with
    where the test may remove it) missing from ``options.special_token_ids``
    and among the tokens the test may remove (``removable``, default
    ``valid``: a token kept anyway, such as a prompt's instruction or answer,
    is no problem)."""
    if not options.keep_special_tokens:
        return ""
    fix = (
        "build the options from the model's tokenizer: "
        "DegradationOptions.for_tokenizer(tokenizer)"
    )
    if options.special_token_ids is None:
        return (
            "No special token ids known (options.special_token_ids is None): "
            "[CLS], [SEP] and the like count as removable tokens. To keep them, "
            f"{fix} (or special_token_ids=() for a model without any)"
        )
    special = set(options.special_token_ids)
    pad = _config_ids(forward_func, ("pad_token_id",))
    if pad and options.pad_token_id is not None and pad[0] != options.pad_token_id:
        return (
            f"options.pad_token_id is {options.pad_token_id} but the model's "
            f"configuration says {pad[0]}: options made for another tokenizer? "
            f"Its special and replacement ids would be wrong too; {fix}"
        )
    expected = set(_config_ids(forward_func, _CONFIG_SPECIALS))
    can_go = valid if removable is None else removable.bool()
    if ids.shape[0] > 1:
        for edge in _edge_ids(ids, valid, can_go):
            if len(set(edge)) == 1:
                expected.add(edge[0])  # every instance begins (ends) with it
    present = set(ids[can_go].tolist())
    missing = sorted((expected & present) - special)
    if missing:
        return (
            f"the inputs' special token id(s) {missing} (every instance begins or "
            "ends with them, or the model's configuration names them) are not in "
            f"options.special_token_ids {sorted(special)}: options made for "
            f"another tokenizer? They would be removed like words; {fix}"
        )
    return ""


def warn_special_tokens(
    forward_func: Any, batch: TokenBatch, options: DegradationOptions
) -> None:
    """Warn (at the test's caller) about :func:`special_tokens_problem`."""
    problem = special_tokens_problem(
        forward_func, batch.input_ids, batch.valid, options, batch.removable
    )
    if problem:
        warnings.warn(problem, UserWarning, stacklevel=5)


def _training(module: torch.nn.Module) -> bool:
    """Whether a module with parameters of its own is in training mode (a
    wrapper's own flag does not count: it has no dropout), or, with none,
    the module itself."""
    owners = [
        m for m in module.modules() if next(m.parameters(False), None) is not None
    ]
    return any(m.training for m in owners) if owners else module.training


def warn_if_training(forward_func: Any) -> None:
    """Warn (at the test's caller) when the model is in training mode."""
    if isinstance(forward_func, torch.nn.Module) and _training(forward_func):
        warnings.warn(
            "the model is in training mode: dropout makes the degradation test "
            "random; call model.eval() first",
            stacklevel=5,  # here, the test, its two wrappers, the caller
        )
