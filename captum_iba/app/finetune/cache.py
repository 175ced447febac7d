"""The cache of fine-tuned models: find one by corpus and settings, or make it.

Fine-tuned models are cached outside the repository, in
``~/.cache/captum_iba/`` (override with the environment variable
``CAPTUM_IBA_CACHE``), and reused when the settings match; the folder names
come from :mod:`captum_iba.app.finetune.store`.
"""

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from captum_iba.app.finetune.recipes import (
    PathLike,
    base_short_name,
    recipe_settings,
    resolve_base_model,
)
from captum_iba.app.finetune.store import RESULT_FILE, model_folder
from captum_iba.app.finetune.train import fine_tune


def cached_model_dir(
    dataset: str,
    base_model: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    **settings: Any,
) -> Path:
    """Returns the cache folder for a corpus, base model and settings.

    Args:
        dataset (str): Corpus name.
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        cache_dir (str or Path, optional): Cache root (default
            :func:`default_cache_dir`).
        **settings (Any): Overrides of :func:`recipe_settings`.

    Returns:
        Path: ``<cache>/<dataset>-<base name>-<settings hash>`` (it may not
        exist yet).
    """
    base = resolve_base_model(base_model)
    full = recipe_settings(dataset, **settings)
    return model_folder(dataset, base, full, cache_dir)


def _matches(folder: Path, dataset: str, settings: Dict[str, Any]) -> bool:
    path = folder / RESULT_FILE
    if not path.is_file():
        return False
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return record.get("dataset") == dataset and record.get("settings") == settings


def _estimate_minutes(settings: Dict[str, Any]) -> str:
    if settings.get("time_budget_s"):
        return f"about {settings['time_budget_s'] / 60 + 2:.0f} minutes on a 2-core CPU"
    return "minutes to hours on a CPU, depending on the corpus size"


def get_finetuned_model(
    dataset: str,
    base_model: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    data_dir: Optional[PathLike] = None,
    progress: bool = True,
    num_threads: Optional[int] = None,
    **settings: Any,
) -> Path:
    """Returns the folder of a fine-tuned model, fine-tuning it if needed.

    The folder is looked up in the cache (see :func:`cached_model_dir`); it
    is reused when its ``captum_iba_finetune.json`` records the same corpus
    and settings. Otherwise the model is fine-tuned with :func:`fine_tune`
    (a message says so and roughly how long it takes), saved there first
    under a temporary name and then moved in place.

    Args:
        dataset (str): Corpus name (``sst2``, ``imdb``, ``ag_news``, ``rte``,
            ``bbc``, ...).
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        cache_dir (str or Path, optional): Cache root (default
            ``$CAPTUM_IBA_CACHE`` or ``~/.cache/captum_iba``).
        data_dir (str or Path, optional): Data folder.
        progress (bool, optional): Show progress bars when training.
        num_threads (int, optional): ``torch.set_num_threads`` while training
            (restored afterwards); not part of the cache key. On a shared,
            busy CPU one thread is often much faster than several.
        **settings (Any): Overrides of the corpus recipe (:data:`RECIPES`),
            e.g. ``epochs=2``.

    Returns:
        Path: Folder loadable with ``from_pretrained``.
    """
    dataset = dataset.lower().strip()
    base = resolve_base_model(base_model)
    full = recipe_settings(dataset, **settings)
    folder = cached_model_dir(dataset, base, cache_dir, **settings)
    if _matches(folder, dataset, full):
        return folder
    print(
        f"[captum_iba] No cached fine-tuned model for {dataset!r} "
        f"({base_short_name(base)}); fine-tuning now into {folder} "
        f"({_estimate_minutes(full)})."
    )
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        fine_tune(
            dataset,
            base_model=base,
            output_dir=tmp,
            data_dir=data_dir,
            progress=progress,
            num_threads=num_threads,
            **full,
        )
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def load_finetuned_model(
    dataset: str, base_model: Optional[PathLike] = None, **kwargs: Any
) -> Tuple[Any, Any]:
    """Loads (fine-tuning first if needed) a cached classifier and tokenizer.

    Args:
        dataset (str): Corpus name.
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        **kwargs (Any): Passed to :func:`get_finetuned_model`.

    Returns:
        Tuple[Any, Any]: ``(model, tokenizer)``, the model in ``eval()`` mode.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = get_finetuned_model(dataset, base_model, **kwargs)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model, tokenizer


def read_result(folder: PathLike) -> Dict[str, Any]:
    """Reads the ``captum_iba_finetune.json`` record of a fine-tuned folder.

    Args:
        folder (str or Path): A folder written by :func:`fine_tune`.

    Returns:
        Dict[str, Any]: The record (settings, accuracy, sizes, timings).
    """
    return json.loads((Path(folder) / RESULT_FILE).read_text())
