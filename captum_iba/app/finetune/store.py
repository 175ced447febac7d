"""Where fine-tuned models live on disk: the cache root and the folder names.

A folder's name holds the corpus, the base model's short name and a hash of
the full settings (the cache key), so models with other settings never
shadow each other.
"""

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

from captum_iba.app.finetune.recipes import CACHE_ENV_VAR, PathLike, base_short_name

RESULT_FILE = "captum_iba_finetune.json"


def default_cache_dir() -> Path:
    """Returns the cache folder for fine-tuned models.

    Returns:
        Path: ``$CAPTUM_IBA_CACHE`` if set, else ``~/.cache/captum_iba``.
    """
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "captum_iba"


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
    key = _settings_key(dataset, base, settings)
    return root / f"{dataset}-{base_short_name(base)}-{key}"
