"""Where fine-tuned models live on disk: the cache root, folder names, manifests.

A folder's name holds the corpus, the base model's short name and a hash of
the full settings (the cache key), so models with other settings never
shadow each other. Each folder's record (``captum_iba_finetune.json``,
written last) lists every file with its size and SHA-256
(:func:`file_manifest`); :func:`check_folder` compares the folder with it
before the folder is trusted.
"""

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Dict, Optional

from captum_iba._utils.io import cache_root
from captum_iba.app.finetune.recipes import PathLike, base_short_name

RESULT_FILE = "captum_iba_finetune.json"
#: A corpus or model name that may become part of a folder name.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def default_cache_dir() -> Path:
    """Returns the cache folder for fine-tuned models.

    Returns:
        Path: ``$CAPTUM_IBA_CACHE`` if set, else ``~/.cache/captum_iba``.
    """
    return cache_root()


def _settings_key(dataset: str, base: str, settings: Dict[str, Any]) -> str:
    payload = json.dumps(
        {"dataset": dataset, "base": base_short_name(base), "settings": settings},
        sort_keys=True,
    )
    return hashlib.sha1(payload.encode()).hexdigest()[:10]


def model_folder(
    dataset: str,
    base: str,
    settings: Dict[str, Any],
    cache_dir: Optional[PathLike] = None,
) -> Path:
    """The folder of a model fine-tuned from ``base`` on ``dataset``.

    Args:
        dataset (str): Corpus name.
        base (str): Base model (a ``from_pretrained`` name or folder).
        settings (Dict[str, Any]): The full settings of the run.
        cache_dir (str or Path, optional): Cache root (default
            :func:`default_cache_dir`).

    Returns:
        Path: ``<cache>/<dataset>-<base name>-<settings hash>``.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    check_name(dataset, "dataset")
    key = _settings_key(dataset, base, settings)
    # The base model's name is the user's folder name: made safe, not refused.
    short = re.sub(r"[^A-Za-z0-9_.-]", "_", base_short_name(base)).lstrip(".") or "base"
    return root / f"{dataset}-{short.replace('..', '_')}-{key}"


def check_name(name: str, what: str) -> str:
    """Checks that ``name`` can be part of a folder name inside the cache.

    Args:
        name (str): A corpus or base-model name.
        what (str): What it is, for the error.

    Returns:
        str: ``name``.

    Raises:
        ValueError: For an empty name, one with a path separator or ``..``,
            or other characters than letters, digits and ``_ . -`` (such a
            name could put a folder outside the cache).
    """
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise ValueError(
            f"{what} {name!r} cannot name a cache folder: use letters, digits "
            "and '_', '.', '-' only (no '/', no '..'), starting with a letter "
            "or digit."
        )
    return name


def file_manifest(folder: Path) -> Dict[str, Dict[str, Any]]:
    """Size and SHA-256 of every file in ``folder`` (the record excepted).

    Args:
        folder (Path): A model folder.

    Returns:
        Dict[str, Dict[str, Any]]: ``{relative path: {"size", "sha256"}}``.
    """
    out: Dict[str, Dict[str, Any]] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name == RESULT_FILE:
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        out[path.relative_to(folder).as_posix()] = {
            "size": path.stat().st_size,
            "sha256": digest.hexdigest(),
        }
    return out


def check_folder(folder: Path, record: Dict[str, Any]) -> Optional[str]:
    """What is wrong with a model folder, measured against its record.

    Args:
        folder (Path): A model folder.
        record (Dict[str, Any]): Its ``captum_iba_finetune.json``.

    Returns:
        str or None: None when every file of the record's ``files`` manifest
        is there with its size and SHA-256; else what differs (the first
        problem found).
    """
    expected = record.get("files")
    if not isinstance(expected, dict) or not expected:
        return "its record has no file list (made by an older captum-iba)"
    for rel, info in expected.items():
        path = folder / rel
        if not path.is_file():
            return f"file {rel} is missing"
        if path.stat().st_size != info.get("size"):
            return (
                f"file {rel} has {path.stat().st_size} bytes, the record says "
                f"{info.get('size')}"
            )
    actual = file_manifest(folder)
    for rel, info in expected.items():
        if actual[rel]["sha256"] != info.get("sha256"):
            return f"file {rel} does not match its SHA-256 in the record"
    return None


def read_record(folder: Path) -> Dict[str, Any]:
    """The record of a model folder.

    Args:
        folder (Path): A folder written by :func:`fine_tune`.

    Returns:
        Dict[str, Any]: The record (settings, accuracy, sizes, timings, files).

    Raises:
        FileNotFoundError: Naming the file, when there is none.
        ValueError: Naming the file, when it is not a JSON object.
    """
    path = Path(folder) / RESULT_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no fine-tuning record") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: damaged fine-tuning record ({err})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: damaged fine-tuning record (not a JSON object)")
    return record
