"""One home for the small conventions every layer of the package shares.

* :func:`logits_of` - the scores inside whatever a forward function returns;
* :func:`format_target` / :func:`check_target_range` - Captum's ``TargetType``
  turned into one index (or index tuple) per instance, and checked;
* :func:`model_device` - where a model's parameters live;
* :func:`max_positions` / :func:`check_length` - how many tokens a model takes;
* :func:`tokenizer_ids` / :func:`special_token_ids` / :func:`pad_token_id` - the
  ids a tokenizer reserves, with explicit values winning;
* :func:`removable_mask` - the tokens a removal may take: real (not padding)
  and not special; :func:`delete_tokens` - the degradation test's deletion
  (each sequence compacted to the left);
* :func:`hf_call` - the Hugging Face positional call
  ``model(input_ids, attention_mask, token_type_ids, *extra)``;
* :func:`instance_seed` - a seed derived from a base seed and an instance's
  tokens, so that seeded methods give an instance the same result in any
  batch, order or process.
"""

import contextlib
import hashlib
import importlib
import importlib.util
import io
import numbers
import random
import sys
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

__all__ = [
    "import_optional",
    "check_length",
    "check_target_range",
    "delete_tokens",
    "format_target",
    "hf_call",
    "instance_seed",
    "logits_of",
    "max_positions",
    "import_problem",
    "module_found",
    "model_device",
    "pad_token_id",
    "removable_mask",
    "special_token_ids",
    "tokenizer_ids",
]


def logits_of(output: Any) -> Tensor:
    """The class scores (logits) of a forward's output.

    Accepts a Tensor, an object with a ``.logits`` Tensor (a Hugging Face
    ``ModelOutput``), a dict with ``"logits"``, or a tuple/list whose first
    element is the Tensor.

    Args:
        output (Any): What the forward function returned.

    Returns:
        Tensor: The logits.

    Raises:
        TypeError: If no Tensor of scores can be found.
    """
    if isinstance(output, Tensor):
        return output
    logits = getattr(output, "logits", None)
    if logits is None and isinstance(output, dict):
        logits = output.get("logits")
    if logits is None and isinstance(output, (tuple, list)) and output:
        logits = output[0]
    if isinstance(logits, Tensor):
        return logits
    raise TypeError(
        "forward_func must return class scores (logits) as a Tensor, an object "
        "with a .logits Tensor, or a tuple whose first element they are; got "
        f"{type(output).__name__}."
    )


def _index(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"target must hold integer class indices; got {value!r} "
            f"({type(value).__name__})."
        )
    return int(value)


def _tensor_target(target: Tensor, batch: int) -> Tensor:
    t = target.detach().cpu()
    if t.is_floating_point() and not torch.equal(t, t.round()):
        raise TypeError("target must hold integer class indices")
    t = t.long()
    if t.dim() == 0 or t.numel() == 1:
        return t.reshape(()).expand(batch).clone()
    if t.dim() != 1:
        raise ValueError(
            f"A Tensor target must be a scalar or 1-D, got {tuple(target.shape)}."
        )
    return t


def format_target(target: Any, batch: int) -> Optional[Tensor]:
    """Captum's ``TargetType`` as one index (or index tuple) per instance.

    * ``None`` stays ``None`` (the caller explains the predicted class);
    * an ``int``, a scalar Tensor or a one-element Tensor: the same index for
      every instance, shape ``(B,)``;
    * a ``tuple`` of ints: the same multi-dimensional index for every instance,
      shape ``(B, d)``;
    * a 1-D Tensor or a list of ints: one index per instance, shape ``(B,)``;
    * a list of tuples: one multi-dimensional index per instance, ``(B, d)``.

    Args:
        target (Any): The target, as Captum's ``attribute`` methods take it.
        batch (int): The number of instances ``B``.

    Returns:
        Tensor or None: Long tensor of shape ``(B,)`` or ``(B, d)`` on the CPU.

    Raises:
        TypeError: On booleans, non-integer values or unsupported types.
        ValueError: When a per-instance target does not have ``B`` entries.
    """
    if target is None:
        return None
    if isinstance(target, Tensor):
        out = _tensor_target(target, batch)
    elif isinstance(target, tuple):
        row = [_index(t) for t in target]
        out = torch.tensor([row] * batch, dtype=torch.long).reshape(batch, len(row))
    elif isinstance(target, (list, range)) or (
        isinstance(target, Sequence) and not isinstance(target, (str, bytes))
    ):
        items = list(target)
        if items and all(isinstance(t, tuple) for t in items):
            rows = [[_index(v) for v in t] for t in items]
            if len({len(r) for r in rows}) != 1:
                raise ValueError("Tuple targets must all have the same length.")
            out = torch.tensor(rows, dtype=torch.long)
        else:
            out = torch.tensor([_index(t) for t in items], dtype=torch.long)
    else:
        out = torch.full((batch,), _index(target), dtype=torch.long)
    if out.shape[0] != batch:
        raise ValueError(
            f"target has {out.shape[0]} entries but inputs have {batch} instances."
        )
    return out


def check_target_range(target: Tensor, output_shape: Sequence[int]) -> None:
    """Check that every instance's target indexes the forward's output.

    Args:
        target (Tensor): From :func:`format_target`, ``(B,)`` or ``(B, d)``.
        output_shape (Sequence[int]): Shape of the forward's output ``(B, ...)``.

    Raises:
        ValueError: Naming the first instance whose target is out of range.
    """
    dims = tuple(output_shape[1:])
    rows = target.reshape(target.shape[0], -1)
    if rows.shape[1] != len(dims):
        raise ValueError(
            f"target {rows[0].tolist() if rows.shape[1] > 1 else int(rows[0, 0])} "
            f"does not index a forward output of shape {tuple(output_shape)}: "
            f"expected {len(dims)} index value(s) per instance."
        )
    limits = torch.tensor(dims, dtype=torch.long)
    bad = ((rows < 0) | (rows >= limits)).any(dim=1).nonzero().flatten()
    if bad.numel():
        i = int(bad[0])
        value = rows[i].tolist() if rows.shape[1] > 1 else int(rows[i, 0])
        raise ValueError(
            f"target {value} for instance {i} is out of range for forward output "
            f"of shape {tuple(output_shape)}."
        )


def model_device(model: Any, fallback: Optional[torch.device] = None) -> torch.device:
    """The device of a module's first parameter (or ``fallback``, default CPU).

    Args:
        model (Any): A module, or any callable.
        fallback (torch.device, optional): For callables and parameter-free
            modules. Default: CPU.

    Returns:
        torch.device: The device.
    """
    if isinstance(model, nn.Module):
        for p in model.parameters():
            return p.device
    return fallback if fallback is not None else torch.device("cpu")


def max_positions(model: Any) -> Optional[int]:
    """How many tokens a Hugging Face model takes (None when it does not say).

    ``max_position_embeddings`` (or ``n_positions``) of its config, less the
    positions an embedding table keeps below its first one (RoBERTa's count
    from ``pad_token_id + 1``: 514 entries, 512 tokens).

    Args:
        model (Any): A model, or any callable (then None).
    """
    config = getattr(model, "config", None)
    keys = ("max_position_embeddings", "n_positions")
    values = [getattr(config, k, None) for k in keys]
    limit = next(
        (v for v in values if isinstance(v, int) and not isinstance(v, bool)), None
    )
    base = getattr(model, "base_model", None)
    table = getattr(getattr(base, "embeddings", None), "position_embeddings", None)
    if limit is not None and isinstance(table, nn.Embedding):
        if table.padding_idx is not None:
            limit = min(limit, table.num_embeddings - table.padding_idx - 1)
    return limit


def check_length(model: Any, length: int, name: str = "inputs") -> None:
    """Raises a ValueError when ``length`` tokens exceed the model's positions.

    Args:
        model (Any): The model (see :func:`max_positions`).
        length (int): The number of tokens it would be given.
        name (str, optional): The argument they come from, for the message.
    """
    limit = max_positions(model)
    if limit is not None and length > limit:
        raise ValueError(
            f"{name} have {length} tokens, more than the model's {limit} positions: "
            f"truncate them (e.g. max_length={limit})"
        )


def tokenizer_ids(tokenizer: Any) -> Dict[str, Any]:
    """The pad, mask and unknown ids of a tokenizer and its special ids.

    The special ids exclude UNK (it stands for a real word of the text) and
    PAD (padding is never a token).

    Args:
        tokenizer (Any): A Hugging Face tokenizer, or None.

    Returns:
        dict: ``pad_token_id``, ``mask_token_id``, ``unk_token_id`` (None when
        the tokenizer has none) and ``special_token_ids`` (sorted list).
    """
    ids: Dict[str, Any] = {
        name: getattr(tokenizer, name, None)
        for name in ("pad_token_id", "mask_token_id", "unk_token_id")
    }
    specials = set(getattr(tokenizer, "all_special_ids", None) or [])
    specials -= {ids["unk_token_id"], ids["pad_token_id"], None}
    ids["special_token_ids"] = sorted(int(s) for s in specials)
    return ids


def special_token_ids(
    tokenizer: Any, explicit: Optional[Iterable[int]] = None
) -> List[int]:
    """Ids never removed or scored: ``explicit`` when given, else the tokenizer's.

    Args:
        tokenizer (Any): A Hugging Face tokenizer, or None.
        explicit (Iterable[int], optional): Ids given by the user.

    Returns:
        list[int]: Sorted ids (empty without either).
    """
    if explicit is not None:
        return sorted({int(i) for i in explicit})
    return tokenizer_ids(tokenizer)["special_token_ids"] if tokenizer else []


def pad_token_id(
    tokenizer: Any, explicit: Optional[int] = None, default: Optional[int] = 0
) -> Optional[int]:
    """The padding id: ``explicit``, else the tokenizer's, else ``default``.

    Args:
        tokenizer (Any): A Hugging Face tokenizer, or None.
        explicit (int, optional): The id given by the user.
        default (int, optional): When neither is known. Default 0.

    Returns:
        int or None: The id.
    """
    if explicit is not None:
        return int(explicit)
    found = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
    return default if found is None else int(found)


def removable_mask(
    ids: Tensor, token_mask: Optional[Tensor], special: Iterable[int]
) -> Tensor:
    """``(B, L)`` bool: the tokens a removal may take - real (``token_mask``
    nonzero, or every position when it is None) and not special.

    The one definition behind IBA's deletion baseline and attention removal,
    the amortized explainer's baseline, the scorers' removable tokens and the
    degradation test's.

    Args:
        ids (Tensor): ``(B, L)`` token ids.
        token_mask (Tensor, optional): ``(B, L)``, 0 at padding.
        special (Iterable[int]): Ids never removed (empty: none).

    Returns:
        Tensor: ``(B, L)`` bool, on the device of ``ids``.
    """
    real = torch.ones_like(ids, dtype=torch.bool)
    if token_mask is not None:
        real = token_mask.to(ids.device).bool()
    keep = torch.tensor(list(special), dtype=ids.dtype, device=ids.device)
    return real & ~torch.isin(ids, keep)


def hf_call(
    forward_func: Any,
    input_ids: Tensor,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    extra: Tuple[Any, ...] = (),
) -> Tensor:
    """Logits of ``forward_func(ids, [attention_mask], [token_type_ids], *extra)``.

    The Hugging Face positional order; arguments that are None are left out,
    except that segment ids without a mask get an all-ones mask (positions
    must stay right).

    Args:
        forward_func (Any): A Hugging Face model or a function taking its
            positional arguments.
        input_ids (Tensor): ``(B, L)`` token ids.
        attention_mask (Tensor, optional): ``(B, L)``, 0 at padding.
        token_type_ids (Tensor, optional): ``(B, L)`` segment ids.
        extra (tuple, optional): Further positional arguments.

    Returns:
        Tensor: The logits (:func:`logits_of`).
    """
    if token_type_ids is not None and attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    args = [a for a in (input_ids, attention_mask, token_type_ids) if a is not None]
    return logits_of(forward_func(*args, *extra))


def instance_seed(seed: int, token_ids: Tensor) -> int:
    """A seed derived from ``seed`` and one instance's token ids.

    The same instance (same real tokens) gets the same seed whatever batch,
    order, padding or process it is scored in; a different seed or instance
    gets an unrelated one (BLAKE2b of both, 63 bits).

    Args:
        seed (int): The method's base seed.
        token_ids (Tensor): The instance's real token ids (padding removed),
            any integer dtype and device.

    Returns:
        int: A seed in ``[0, 2**63)``.
    """
    digest = hashlib.blake2b(digest_size=8)
    digest.update(int(seed).to_bytes(16, "little", signed=True))
    digest.update(
        token_ids.detach().reshape(-1).to("cpu", torch.int64).numpy().tobytes()
    )
    return int.from_bytes(digest.digest(), "little") & (2**63 - 1)


def user_stacklevel() -> int:
    """The ``stacklevel`` of :func:`warnings.warn` that points at the first
    frame outside this package (and the dataclass / Captum wrappers and the
    context managers it goes through), for warnings raised deep inside a
    call."""
    import sys

    frame, level = sys._getframe(1), 1
    skip = ("captum_iba", "dataclasses", "captum.", "contextlib", "<string>")
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(skip) and frame.f_code.co_filename != "<string>":
            return level
        frame, level = frame.f_back, level + 1
    return level


@contextlib.contextmanager
def kept_random_state(device: Optional[torch.device] = None) -> Iterator[None]:
    """A block whose random draws leave the caller's random state as it was:
    torch's CPU generator (and ``device`` 's, for a GPU), Python's
    :mod:`random` and NumPy's global state. Every seeded method runs in one,
    as IBA's own generators never touch the global state.

    Args:
        device (torch.device, optional): The model's device; a CUDA device's
            generator is kept too.
    """
    import numpy as np

    devices = [device] if device is not None and device.type == "cuda" else []
    python, numpy = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)


def module_found(name: str) -> bool:
    """Whether the module ``name`` is installed (imported already, or found
    by :func:`importlib.util.find_spec`), without importing it."""
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder that refuses it
        return False


def import_problem(name: str) -> Optional[str]:
    """Why the optional package ``name`` cannot be used: ``"not installed"``,
    or ``"installed but does not import (...)"`` (issue 90, item 15: a
    package whose import fails was refused only once the model had loaded);
    None when it imports. What it prints while importing (NLTK's download
    messages, offline) is kept from the terminal.

    Args:
        name (str): The package's module name (``"at2"``).

    Returns:
        str or None: The problem, or None.
    """
    if not module_found(name):
        return "not installed"
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(name)
    except Exception as err:  # any failure of a third party's import
        return f"installed but does not import ({type(err).__name__}: {err})"
    return None


def import_optional(modules: Sequence[str], needs: str, install: str) -> List[Any]:
    """The optional package's ``modules``, imported in order.

    Args:
        modules (Sequence[str]): Dotted module names (e.g. ``"at2.tasks"``).
        needs (str): What needs them, for the message (``"AT2's scores"``).
        install (str): The install command the message names.

    Raises:
        ImportError: Where one does not import, naming the install command.
    """
    try:
        return [importlib.import_module(name) for name in modules]
    except ImportError as err:
        raise ImportError(
            f"{needs} need its package, which is not installed ({err}): {install}"
        ) from err


def _compact(t: Tensor, perm: Tensor, tail: Tensor, fill: int) -> Tensor:
    idx = perm.reshape(perm.shape + (1,) * (t.dim() - 2)).expand_as(t)
    out = t.gather(1, idx)
    tail_t = tail.reshape(tail.shape + (1,) * (t.dim() - 2)).expand_as(out)
    return out.masked_fill(tail_t, fill)


def delete_tokens(
    keep: Tensor, tensors: Sequence[Optional[Tensor]], fills: Sequence[int]
) -> Tuple[List[Optional[Tensor]], Tensor]:
    """Delete the positions not kept: each sequence is compacted to the left.

    Args:
        keep (Tensor): ``(N, L)`` bool, the positions that stay.
        tensors (Sequence[Tensor or None]): ``(N, L, ...)`` per-token tensors
            (ids, mask, segment ids, ...); None entries stay None.
        fills (Sequence[int]): The value of the freed tail, per tensor.

    Returns:
        (list, Tensor): The compacted tensors and the ``(N,)`` lengths left.
    """
    lengths = keep.sum(1)
    perm = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices
    tail = torch.arange(keep.shape[1], device=keep.device)[None, :] >= lengths[:, None]
    out = [
        None if t is None else _compact(t, perm, tail, fill)
        for t, fill in zip(tensors, fills)
    ]
    return out, lengths
