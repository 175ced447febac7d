"""Fitted explainers on disk: safetensors (no pickle), checked before use.

An explainer lives in a folder::

    explainer.safetensors   the network's weights (+ the key as metadata)
    explainer.json          the record, written LAST: the key, the network's
                            shape, the fit's statistics and, per file, its
                            size and SHA-256
    checkpoint.safetensors  while a fit runs: weights, Adam's state, the step
    checkpoint.json         the checkpoint's record (key and step), last

Every file is written to a temporary name and renamed
(:func:`~captum_iba._utils.io.atomic_write`), and ``explainer.json`` only
after the weights it lists, so a fit stopped at any point (Ctrl-C or
``kill -9``) leaves no folder that :func:`load_folder` takes for a finished
explainer; a checkpoint lets the next fit with the same key resume.

The **key** says what an explainer was fitted for: the model's weights digest
(:func:`~captum_iba._utils.digest.weights_digest`), the bottlenecked layer's
name, every setting (:class:`~captum_iba.attr.explainer.ExplainerSettings`),
the tokenizer's digest when one was given
(:func:`~captum_iba._utils.digest.tokenizer_digest`) and, for a causal LM,
the longest input it was fitted on (``max_tokens``: a longer one is explained
with a warning).
A key that differs from the caller's is refused with an error naming the
difference, never silently used.
"""

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils.digest import file_record, tokenizer_digest, weights_digest
from captum_iba._utils.io import atomic_write, atomic_write_text

__all__ = [
    "CHECKPOINT",
    "FORMAT",
    "RECORD",
    "WEIGHTS",
    "explainer_key",
    "key_problem",
    "read_checkpoint",
    "read_record",
    "read_weights",
    "remove_checkpoint",
    "write_checkpoint",
    "write_explainer",
]

PathLike = Union[str, "os.PathLike[str]"]
FORMAT = "captum_iba.AmortizedExplainer/1"
WEIGHTS, RECORD = "explainer.safetensors", "explainer.json"
CHECKPOINT, CHECKPOINT_RECORD = "checkpoint.safetensors", "checkpoint.json"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def explainer_key(
    model: Any,
    layer: Any,
    settings: Any,
    tokenizer: Any = None,
) -> Dict[str, Any]:
    """What an explainer is fitted for: the weights digest of ``model``, the
    name of ``layer`` in it, ``settings`` (an
    :class:`~captum_iba.attr.explainer.ExplainerSettings`; None: any) and,
    when given, the tokenizer's digest."""
    from captum_iba.attr._amortized_pass import module_name

    key = {
        "weights": weights_digest(model),
        "layer": module_name(model, layer),
        "settings": None if settings is None else settings.to_dict(),
    }
    if tokenizer is not None:
        key["tokenizer"] = tokenizer_digest(tokenizer)
    return key


def key_problem(found: Dict[str, Any], expected: Dict[str, Any]) -> Optional[str]:
    """What differs between a stored key and the caller's (None when equal).

    Args:
        found (dict): The key stored with the explainer.
        expected (dict): The key of the caller's model, layer and settings;
            ``expected["settings"]`` may be None (any settings accepted).

    Returns:
        str or None: e.g. ``"it was fitted for other model weights (digest
        ab12..., this model cd34...)"``.
    """
    if found.get("weights") != expected.get("weights"):
        return (
            f"it was fitted for other model weights (digest {found.get('weights')}, "
            f"this model {expected.get('weights')})"
        )
    if found.get("layer") != expected.get("layer"):
        return (
            f"it was fitted for layer {found.get('layer')!r}, not "
            f"{expected.get('layer')!r}"
        )
    have, given = found.get("tokenizer"), expected.get("tokenizer")
    if have is not None and given is not None and have != given:
        return (
            f"it was fitted with another tokenizer (digest {have}, this tokenizer "
            f"{given})"
        )
    want = expected.get("settings")
    if want is None:
        return None
    have = found.get("settings") or {}
    diff = [
        f"{k}: {have.get(k)!r} there, {want.get(k)!r} here"
        for k in sorted(set(have) | set(want))
        if _canonical(have.get(k)) != _canonical(want.get(k))
    ]
    return f"it was fitted with other settings ({'; '.join(diff)})" if diff else None


def _save_tensors(path: Path, tensors: Dict[str, Tensor], meta: Dict[str, str]) -> None:
    from safetensors.torch import save

    data = save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, meta)
    with atomic_write(path, "wb") as fh:
        fh.write(data)


def _load_tensors(path: Path) -> Tuple[Dict[str, Tensor], Dict[str, str]]:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "pt") as handle:
            meta = handle.metadata() or {}
            return {k: handle.get_tensor(k) for k in handle.keys()}, meta
    except (OSError, SafetensorError, ValueError) as err:
        raise ValueError(f"{path}: damaged or not a safetensors file ({err})") from None


def write_explainer(
    folder: PathLike,
    state: Dict[str, Tensor],
    key: Dict[str, Any],
    shape: Dict[str, Any],
    stats: Dict[str, Any],
) -> Path:
    """Write a finished explainer: the weights, then the record (last).

    Args:
        folder (str or PathLike): The folder (created if needed).
        state (dict): The network's ``state_dict``.
        key (dict): What it was fitted for (weights digest, layer, settings).
        shape (dict): The network's shape (readout widths, classes).
        stats (dict): The fit's statistics (steps, instances, CPU-seconds...).

    Returns:
        Path: The folder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record_path = folder / RECORD
    if record_path.exists():  # the old record goes first: never a stale pair
        record_path.unlink()
    _save_tensors(folder / WEIGHTS, state, {"format": FORMAT, "key": _canonical(key)})
    record = {
        "format": FORMAT,
        "key": key,
        "shape": shape,
        "stats": stats,
        "files": {WEIGHTS: file_record(folder / WEIGHTS)},
    }
    atomic_write_text(record_path, json.dumps(record, indent=2, default=repr) + "\n")
    remove_checkpoint(folder)
    return folder


def read_record(folder: PathLike) -> Dict[str, Any]:
    """The record of a finished explainer, its files checked (sizes, SHA-256).

    Raises:
        FileNotFoundError: When the folder holds no finished explainer (with
            a word on an interrupted fit when a checkpoint is there).
        ValueError: Naming the file, when the record or the weights are
            damaged, truncated or changed.
    """
    folder = Path(folder)
    path = folder / RECORD
    if not path.is_file():
        partial = (folder / CHECKPOINT_RECORD).is_file()
        hint = (
            " (it holds the checkpoint of an unfinished fit: run the fit again to "
            "resume it)"
            if partial
            else ""
        )
        raise FileNotFoundError(
            f"{folder}: no fitted explainer ({RECORD} missing){hint}"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: damaged explainer record ({err})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"{path}: not an explainer record of {FORMAT}")
    for name, expected in (record.get("files") or {}).items():
        file = folder / name
        if not file.is_file():
            raise ValueError(f"{file}: missing (the record lists it)")
        size = file.stat().st_size
        if size != expected.get("size"):
            raise ValueError(
                f"{file}: {size} bytes, the record says {expected.get('size')} "
                "(truncated or changed)"
            )
        if file_record(file)["sha256"] != expected.get("sha256"):
            raise ValueError(f"{file}: does not match its SHA-256 in {RECORD}")
    if WEIGHTS not in (record.get("files") or {}):
        raise ValueError(f"{path}: the record lists no {WEIGHTS}")
    return record


def read_weights(folder: PathLike, record: Dict[str, Any]) -> Dict[str, Tensor]:
    """The network's weights of a checked folder (:func:`read_record`)."""
    path = Path(folder) / WEIGHTS
    tensors, meta = _load_tensors(path)
    if meta.get("format") != FORMAT or meta.get("key") != _canonical(record["key"]):
        raise ValueError(f"{path}: its key does not match {RECORD}")
    return tensors


def write_checkpoint(
    folder: PathLike,
    key: Dict[str, Any],
    state: Dict[str, Tensor],
    optimizer: torch.optim.Optimizer,
    step: int,
) -> None:
    """Save an unfinished fit (weights, Adam's moments, the step), atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"net.{k}": v for k, v in state.items()}
    for index, moments in optimizer.state_dict()["state"].items():
        for name, value in moments.items():
            tensors[f"adam.{index}.{name}"] = torch.as_tensor(value)
    _save_tensors(folder / CHECKPOINT, tensors, {"format": FORMAT})
    record = {
        "key": key,
        "step": step,
        "files": {CHECKPOINT: file_record(folder / CHECKPOINT)},
    }
    atomic_write_text(folder / CHECKPOINT_RECORD, json.dumps(record, default=repr))


def read_checkpoint(
    folder: PathLike, key: Dict[str, Any]
) -> Optional[Tuple[Dict[str, Tensor], Dict[int, Dict[str, Tensor]], int]]:
    """An unfinished fit's weights, Adam's state and step; None when there is
    none (or a checkpoint without its record, as a kill mid-write leaves).

    Raises:
        ValueError: When the checkpoint belongs to another key, or is damaged.
    """
    folder = Path(folder)
    path = folder / CHECKPOINT_RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        files = record["files"][CHECKPOINT]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{path}: damaged checkpoint record ({err}); remove it"
        ) from None
    problem = key_problem(record.get("key") or {}, key)
    if problem:
        raise ValueError(
            f"{folder}: holds the checkpoint of another fit: {problem}; remove "
            f"{CHECKPOINT} and {CHECKPOINT_RECORD} or use another folder"
        )
    weights = folder / CHECKPOINT
    if not weights.is_file() or file_record(weights) != files:
        raise ValueError(f"{folder / CHECKPOINT}: does not match its record; remove it")
    tensors, _ = _load_tensors(folder / CHECKPOINT)
    net = {k[4:]: v for k, v in tensors.items() if k.startswith("net.")}
    adam: Dict[int, Dict[str, Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("adam."):
            _, index, name = k.split(".", 2)
            adam.setdefault(int(index), {})[name] = v
    return net, adam, int(record["step"])


def remove_checkpoint(folder: PathLike) -> None:
    """Remove an unfinished fit's files (record first)."""
    for name in (CHECKPOINT_RECORD, CHECKPOINT):
        path = Path(folder) / name
        if path.exists():
            path.unlink()
