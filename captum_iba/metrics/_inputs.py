"""The arguments of :func:`~captum_iba.metrics.degradation_test`, checked once.

Validation and resolution only: the token ids and scores
(:func:`check_inputs`), the options (:class:`DegradationOptions`: levels,
removal mode, token ids from a tokenizer, ...), the instances as a
:class:`~captum_iba.metrics._removal.TokenBatch` (:func:`token_batch`), and
the target (:func:`resolve_target`). The removal itself is in
:mod:`captum_iba.metrics._removal`.
"""

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils.common import (
    check_length,
    check_target_range,
    format_target,
    tokenizer_ids,
)
from captum_iba.metrics._removal import (
    ExtraArg,
    Removal,
    TokenBatch,
    level_counts,
)
from captum_iba.version import __version__

#: The paper's removal levels: k/9 of the length for k = 1..9.
PAPER_LEVELS: Tuple[float, ...] = tuple(k / 9 for k in range(1, 10))

REMOVAL_MODES = ("delete", "mask", "pad", "unk")
ORDERS = ("morf", "lerf")
LENGTH_CONVENTIONS = ("tokens", "paper")
LEVEL_UNITS = ("fraction", "count")

TargetLike = Union[None, int, Sequence[int], Tensor]
Level = Union[float, int]


def check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}")


def check_inputs(inputs: Any, attributions: Any) -> Tuple[Tensor, Tensor]:
    """The token ids (long, CPU) and per-token scores (float64, CPU).

    ``(B, L, H)`` attributions are summed over the last dimension.

    Raises:
        ValueError: On ids that are not ``(B, L)``, no instance, or scores
            whose shape does not match the ids.
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
    return inputs.detach().cpu().long(), scores.to("cpu", torch.float64)


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


def parse_levels(
    levels: Optional[Union[Level, Iterable[Level]]], unit: str
) -> List[Level]:
    """The removal levels as a list of floats (fractions) or ints (counts)."""
    check_choice("level_unit", unit, LEVEL_UNITS)
    if levels is None:
        if unit == "count":
            raise ValueError("level_unit='count' needs explicit levels")
        return list(PAPER_LEVELS)
    if isinstance(levels, Tensor):
        levels = levels.tolist()
    if isinstance(levels, numbers.Number):
        levels = [levels]
    out: List[Level] = []
    for lv in levels:  # type: ignore[union-attr]
        if isinstance(lv, bool) or not isinstance(lv, numbers.Real):
            raise TypeError(f"removal levels must be numbers; got {lv!r}")
        if unit == "fraction":
            f = float(lv)
            if not (0.0 <= f <= 1.0):  # also rejects NaN
                raise ValueError(
                    f"removal level {lv!r} is outside [0, 1] (use level_unit='count' "
                    "for numbers of tokens)"
                )
            out.append(f)
        else:
            if not math.isfinite(float(lv)) or float(lv) != int(lv) or int(lv) < 0:
                raise ValueError(
                    f"with level_unit='count' levels are non-negative integers; got "
                    f"{lv!r}"
                )
            out.append(int(lv))
    if not out:
        raise ValueError("at least one removal level is needed")
    return out


def resolve_removal(
    removal: Union[str, int], ids: Dict[str, Any]
) -> Tuple[str, Optional[int]]:
    """The removal mode's name and replacement id (None when deleting).

    Args:
        removal (str or int): A mode of :data:`REMOVAL_MODES` or a token id.
        ids (dict): ``pad_token_id``, ``mask_token_id``, ``unk_token_id``.

    Raises:
        ValueError: On an unknown mode or a missing replacement id.
    """
    if isinstance(removal, bool):
        raise ValueError(f"unknown removal mode {removal!r}")
    if isinstance(removal, numbers.Integral):
        return "replace", int(removal)
    if removal not in REMOVAL_MODES:
        raise ValueError(
            f"unknown removal mode {removal!r}: use one of {REMOVAL_MODES} or a "
            "token id"
        )
    name = str(removal)
    if name == "delete":
        return name, None
    replacement_id = ids[f"{name}_token_id"]
    if replacement_id is None:
        raise ValueError(
            f"removal={removal!r} needs the {name} token id: pass "
            f"{name}_token_id= or a tokenizer"
        )
    return name, replacement_id


@dataclass(frozen=True)
class DegradationOptions:
    """The options of one degradation test, checked and resolved.

    Built by :meth:`resolve` from :func:`~captum_iba.metrics.degradation_test`'s
    keyword arguments; the token ids come from the tokenizer where not given.
    """

    levels: Tuple[Level, ...]
    level_unit: str
    length_convention: str
    order: str
    removal: str
    replacement_id: Optional[int]
    keep_special_tokens: bool
    special_token_ids: Tuple[int, ...]
    pad_token_id: Optional[int]
    compute_sufficiency: bool
    max_examples_per_batch: Optional[int]
    max_tokens_per_batch: int

    @classmethod
    def resolve(
        cls,
        levels: Optional[Union[Level, Iterable[Level]]],
        level_unit: str,
        length_convention: str,
        removal: Union[str, int],
        order: str,
        special_token_ids: Optional[Iterable[int]],
        tokenizer: Optional[Any],
        keep_special_tokens: bool,
        pad_token_id: Optional[int],
        mask_token_id: Optional[int],
        unk_token_id: Optional[int],
        compute_sufficiency: bool,
        max_examples_per_batch: Optional[int],
        max_tokens_per_batch: int,
    ) -> "DegradationOptions":
        """Check the options and fill the token ids in (explicit values win)."""
        check_choice("order", order, ORDERS)
        check_choice("length_convention", length_convention, LENGTH_CONVENTIONS)
        level_list = parse_levels(levels, level_unit)
        for name, value in (
            ("max_examples_per_batch", max_examples_per_batch),
            ("max_tokens_per_batch", max_tokens_per_batch),
        ):
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, numbers.Integral)
                or value < 1
            ):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        found = tokenizer_ids(tokenizer) if tokenizer is not None else {}
        explicit = (pad_token_id, mask_token_id, unk_token_id)
        names = ("pad_token_id", "mask_token_id", "unk_token_id")
        ids = {n: v if v is not None else found.get(n) for n, v in zip(names, explicit)}
        if special_token_ids is None:
            special_token_ids = found.get("special_token_ids", [])
        removal_name, replacement_id = resolve_removal(removal, ids)
        return cls(
            levels=tuple(level_list),
            level_unit=level_unit,
            length_convention=length_convention,
            order=order,
            special_token_ids=tuple(sorted({int(s) for s in special_token_ids})),
            removal=removal_name,
            replacement_id=replacement_id,
            pad_token_id=ids["pad_token_id"],
            keep_special_tokens=keep_special_tokens,
            compute_sufficiency=compute_sufficiency,
            max_examples_per_batch=(
                None if max_examples_per_batch is None else int(max_examples_per_batch)
            ),
            max_tokens_per_batch=int(max_tokens_per_batch),
        )

    def level_counts(self, batch: TokenBatch) -> Tensor:
        """``(B, K)`` long: ``k`` per instance and level."""
        return level_counts(
            self.levels,
            self.level_unit,
            self.length_convention,
            batch.n_removable,
            batch.n_full,
        )

    def removal_for(
        self, batch: TokenBatch, group_by_length: Optional[bool]
    ) -> Removal:
        """How tokens leave ``batch``'s inputs.

        ``group_by_length`` defaults to True when deleting without an attention
        mask or per-token additional argument.
        """
        if group_by_length is None:
            group_by_length = (
                self.removal == "delete"
                and batch.attention_mask is None
                and not any(kind == "token" for kind, _ in batch.extra)
            )
        pad = int(self.pad_token_id) if self.pad_token_id is not None else 0
        return Removal(self.removal, self.replacement_id, pad, bool(group_by_length))

    def record(self, **run: Any) -> Dict[str, Any]:
        """The settings recorded in the result.

        Args:
            **run: ``method``, ``target`` (``"given"`` or ``"predicted"``),
                ``num_instances``, ``num_classes``, ``group_by_length``,
                ``seed`` and ``settings`` (the attribution method's).
        """
        record: Dict[str, Any] = {
            "method": run["method"],
            "removal": self.removal,
            "replacement_id": self.replacement_id,
            "levels": list(self.levels),
            "level_unit": self.level_unit,
            "length_convention": self.length_convention,
            "order": self.order,
            "target": run["target"],
            "keep_special_tokens": self.keep_special_tokens,
            "special_token_ids": list(self.special_token_ids),
            "pad_token_id": self.pad_token_id,
            "num_instances": run["num_instances"],
            "num_classes": run["num_classes"],
            "compute_sufficiency": self.compute_sufficiency,
            "group_by_length": run["group_by_length"],
            "seed": run["seed"],
            "captum_iba_version": __version__,
        }
        settings = run["settings"]
        if settings:
            record["attribution"] = dict(settings)
            if run["method"] is None:
                record["method"] = settings.get("method")
        return record


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
) -> TokenBatch:
    """The instances on the CPU: which positions are tokens, which removable.

    Padding is where the attention mask is 0, or (without a mask) where the id
    is the pad id. A mask is built when segment ids come without one.

    Raises:
        ValueError: When the mask or segment ids are not ``(B, L)``.
    """
    B, L = ids.shape
    extra = classify_extra(additional_forward_args, B, L)
    for name, t in (
        ("attention_mask", attention_mask),
        ("token_type_ids", token_type_ids),
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
    specials = torch.tensor(options.special_token_ids, dtype=torch.long)
    is_special = torch.isin(ids, specials)
    removable = valid & ~is_special if options.keep_special_tokens else valid.clone()
    return TokenBatch(ids, valid, removable, mask, tt, extra)


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


def warn_if_training(forward_func: Any) -> None:
    """Warn (at the test's caller) when the model is in training mode."""
    if isinstance(forward_func, torch.nn.Module) and forward_func.training:
        warnings.warn(
            "the model is in training mode: dropout makes the degradation test "
            "random; call model.eval() first",
            stacklevel=4,
        )
