"""The cache of fine-tuned models: find one by corpus and settings, or make it.

Fine-tuned models are cached outside the repository, in
``~/.cache/captum_iba/`` (override with the environment variable
``CAPTUM_IBA_CACHE``), and reused when the settings match; the folder names
come from :mod:`captum_iba.app.finetune.store`.
"""

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

from filelock import FileLock, Timeout

from captum_iba._utils.io import user_mode
from captum_iba.app.finetune.recipes import (
    DEFAULT_BASE_MODEL_NAME,
    MAX_SECONDS_ENV_VAR,
    FineTuneOptions,
    PathLike,
    base_short_name,
    env_number,
    resolve_base_model,
    resolve_options,
)
from captum_iba.app.finetune.store import (
    RESULT_FILE,
    check_folder,
    model_folder,
    read_record,
)
from captum_iba.app.finetune.train import fine_tune, heldout_data


def cached_model_dir(
    dataset: str,
    base_model: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    *,
    options: Optional[FineTuneOptions] = None,
    **settings: Any,
) -> Path:
    """Returns the cache folder for a corpus, base model and settings.

    Args:
        dataset (str): Corpus name.
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        cache_dir (str or Path, optional): Cache root (default
            :func:`default_cache_dir`).
        options (FineTuneOptions, optional): The settings. Default: the
            corpus' recipe, ``FineTuneOptions.recipe(dataset)``.
        **settings (Any): Deprecated: overrides of the recipe as keywords
            (see :func:`get_finetuned_model`).

    Returns:
        Path: ``<cache>/<dataset>-<base name>-<settings hash>`` (it may not
        exist yet).
    """
    base = resolve_base_model(base_model)
    opts = resolve_options(options, settings, "cached_model_dir", recipe=dataset)
    return model_folder(dataset, base, opts.as_dict(), cache_dir)


def cache_problem(folder: Path, dataset: str, settings: Dict[str, Any]) -> str:
    """Why a cache folder cannot be used as it is ("" when it can).

    Args:
        folder (Path): The cache folder.
        dataset (str): Corpus name it must hold a model of.
        settings (Dict[str, Any]): The settings it must have been made with.

    Returns:
        str: ``""`` when the folder's record matches ``dataset`` and
        ``settings`` and every file matches the record's manifest; ``"absent"``
        when there is no folder; else what is wrong.
    """
    if not folder.exists():
        return "absent"
    try:
        record = read_record(folder)
    except (OSError, ValueError) as err:
        return str(err)
    if record.get("dataset") != dataset or record.get("settings") != settings:
        return f"its record {RESULT_FILE} is for other settings"
    return check_folder(folder, record) or ""


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Holds the lock of one cache folder (a file beside it), saying if it waits."""
    lock = FileLock(str(folder.parent / f".{folder.name}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(
            f"[captum_iba] Another process is checking or fine-tuning "
            f"{folder.name}; waiting for it (lock {lock.lock_file}).",
            flush=True,
        )
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def remove_stale_temporaries(root: Path, held: Optional[Path] = None) -> None:
    """Removes the temporary folders of fine-tunes that no process is running.

    A fine-tune writes into ``.<folder name>-<random>`` and renames it into
    place at the end; a killed run leaves it behind. A temporary folder whose
    lock can be taken at once belongs to no running fine-tune and is removed;
    so are those of ``held``, the folder whose lock the caller holds (its lock
    cannot be taken again from the same process).

    Args:
        root (Path): The cache root.
        held (Path, optional): The cache folder whose lock the caller holds.
    """
    if not root.is_dir():
        return
    for tmp in root.glob(".*-*"):
        if not tmp.is_dir():
            continue
        name = tmp.name[1:].rsplit("-", 1)[0]
        if held is not None and name == held.name:
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        lock = FileLock(str(root / f".{name}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue  # a fine-tune of that folder is running
        try:
            shutil.rmtree(tmp, ignore_errors=True)
        finally:
            lock.release()


def get_finetuned_model(
    dataset: str,
    base_model: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    data_dir: Optional[PathLike] = None,
    progress: bool = True,
    num_threads: Optional[int] = None,
    max_seconds: Optional[float] = None,
    *,
    options: Optional[FineTuneOptions] = None,
    **settings: Any,
) -> Path:
    """Returns the folder of a fine-tuned model, fine-tuning it if needed.

    The folder is looked up in the cache (see :func:`cached_model_dir`); it
    is reused when its ``captum_iba_finetune.json`` records the same corpus
    and settings and every file matches the size and SHA-256 recorded when
    it was saved. A damaged folder is said so and fine-tuned again. Otherwise
    the model is fine-tuned with :func:`fine_tune` (a message says so; a
    progress bar shows the ETA), saved under a temporary name and then moved
    in place. A file lock makes a second process wanting the same model wait
    for the first one and reuse its result; temporary folders left by killed
    runs are removed.

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
        max_seconds (float, optional): Time guard of the training loop (see
            :func:`fine_tune`; default ``$CAPTUM_IBA_FINETUNE_MAX_S``, else
            none); not part of the cache key.
        options (FineTuneOptions, optional): The settings. Default: the
            corpus' recipe (:data:`RECIPES`), ``FineTuneOptions.recipe(dataset)``;
            e.g. ``options=FineTuneOptions.recipe("sst2", steps=400)``.
        **settings (Any): Deprecated: overrides of the recipe as keywords
            (``steps=400``), the API of captum-iba 0.1; they replace those of
            ``options``, with a :class:`DeprecationWarning`.

    Returns:
        Path: Folder loadable with ``from_pretrained``.

    Raises:
        ValueError: For a dataset name that cannot name a cache folder.
        RuntimeError: When a damaged folder cannot be removed (it is named).
    """
    dataset = dataset.lower().strip()
    base, missing = _base_or_missing(base_model)
    opts = resolve_options(options, settings, "get_finetuned_model", recipe=dataset)
    full = opts.as_dict()
    folder = model_folder(dataset, base, full, cache_dir)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(folder):
        remove_stale_temporaries(folder.parent, held=folder)
        problem = cache_problem(folder, dataset, full)
        if not problem:
            return folder
        if missing is not None:  # a cached model serves without its base model
            raise missing
        if problem != "absent":
            print(
                f"[captum_iba] The cached model {folder} is damaged ({problem}): "
                "it is removed and made again.",
                flush=True,
            )
            _remove(folder)
        held = heldout_data(dataset, full, data_dir)  # the corpus is there first
        why = (
            f"No fine-tuned {dataset!r} model is cached yet, so it is made now, once"
            if problem == "absent"
            else f"The {dataset!r} model is made again now, once"
        )
        print(
            f"[captum_iba] {why}: {base_short_name(base)} fine-tuned on "
            f"{dataset} ({_plan(full)}), saved in {folder} and reused by every "
            "later run.",
            flush=True,
        )
        if max_seconds is None:
            max_seconds = env_number(MAX_SECONDS_ENV_VAR, float)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            user_mode(tmp, folder=True)  # mkdtemp's is private (0o700)
            fine_tune(
                dataset,
                base_model=base,
                output_dir=tmp,
                options=opts,
                eval_dataset=held,
                data_dir=data_dir,
                progress=progress,
                num_threads=num_threads,
                max_seconds=max_seconds,
            )
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _base_or_missing(
    base_model: Optional[PathLike],
) -> Tuple[str, Optional[ImportError]]:
    """The base model, or (for the default model, when its package is not
    installed) its name - which names its cache folders as its path does -
    and the error to raise if it must be fine-tuned."""
    try:
        return resolve_base_model(base_model), None
    except ImportError as err:
        return DEFAULT_BASE_MODEL_NAME, err


def cached_default_model(dataset: str) -> Optional[Path]:
    """The folder of the default model of ``dataset`` (its recipe), when it is
    cached and whole; None otherwise. Needs no base model package.

    Args:
        dataset (str): Corpus name.

    Returns:
        Path or None: The folder.
    """
    options = FineTuneOptions.recipe(dataset)
    folder = model_folder(dataset, DEFAULT_BASE_MODEL_NAME, options.as_dict())
    problem = cache_problem(folder, dataset, options.as_dict())
    return None if problem else folder


def _plan(settings: Dict[str, Any]) -> str:
    if settings["steps"] is None:
        steps = f"{settings['epochs']:g} epochs"
    else:
        steps = f"{settings['steps']} steps"
    return f"{steps}; the time it takes here is estimated after the first steps"


def _remove(folder: Path) -> None:
    """Deletes a damaged cache folder, or says which folder to delete."""
    try:
        shutil.rmtree(folder)
    except OSError as err:
        raise RuntimeError(
            f"The cached model {folder} is damaged and could not be removed "
            f"({err}); delete that folder and run again."
        ) from None


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
    from captum_iba.app.models import load_classifier

    return load_classifier(get_finetuned_model(dataset, base_model, **kwargs))


def read_result(folder: PathLike) -> Dict[str, Any]:
    """Reads the ``captum_iba_finetune.json`` record of a fine-tuned folder.

    Args:
        folder (str or Path): A folder written by :func:`fine_tune`.

    Returns:
        Dict[str, Any]: The record (settings, accuracy, sizes, timings, files).

    Raises:
        FileNotFoundError: Naming the file, when there is none.
        ValueError: Naming the file, when it is damaged.
    """
    return read_record(Path(folder))
