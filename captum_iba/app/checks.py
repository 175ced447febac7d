"""Checks of command-line arguments that run before any model loads.

Numbers are checked by argparse types (:func:`positive_int`,
:func:`nonnegative_float`, ... from :mod:`captum_iba._utils.values`, the
checks of the declared options), output paths by :func:`output_file` and
:func:`output_folder`, and what depends on the model (layer index, class
index, sequence length, single-sentence or pair) against its configuration
alone (:func:`check_against_config`), which loads in a fraction of a second
where the weights take a minute. Every failure is a one-line
:class:`~captum_iba.app.errors.CLIError` that gives the valid range. A command
that fails leaves no output folder it created, nor files of its own that hold
no finished work (:func:`removed_on_failure`, from
:mod:`captum_iba.app.outputs`, which also claims and locks them).
"""

import os
from pathlib import Path
from typing import Any, List, Optional, Sequence

from captum_iba._utils.values import (
    BadValue,
    int_in,
    nonnegative_float,
    positive_int,
    seed_int,
)
from captum_iba.app.errors import CLIError
from captum_iba.app.outputs import removed_on_failure

__all__ = [
    "check_against_config",
    "check_classes",
    "class_index",
    "class_names",
    "layer_kind",
    "corpus_warning",
    "n_encoder_layers",
    "nonnegative_float",
    "output_file",
    "output_folder",
    "pair_warning",
    "positive_int",
    "removed_on_failure",
    "seed_int",
    "thread_count",
]

#: Corpora made of single sentences (a fine-tuned model's record names one).
SINGLE_TEXT_CORPORA = ("sst2", "imdb", "ag_news", "bbc")


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def thread_count(text: str) -> int:
    """argparse type: threads per process, 1 .. the CPUs this process may use
    (more only slow torch down, and far more exhaust the memory)."""
    n = usable_cpus()
    try:
        return int_in(text, 1, n)
    except BadValue as err:
        raise BadValue(f"{err} (the CPUs this process may use)") from None


def _writable_folder(folder: Path, option: str) -> None:
    """Creates ``folder`` (and parents) if needed and checks it can be written."""
    for part in [folder, *folder.parents]:
        if part.exists() and not part.is_dir():
            raise CLIError(f"{option}: {part} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CLIError(
            f"{option}: cannot create folder {folder}: {err.strerror}"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"{option}: folder {folder} is not writable")


def output_file(path: Optional[str], option: str) -> Optional[Path]:
    """Checks a file the command will write, before any work starts.

    Args:
        path (str, optional): The file (None: nothing to check).
        option (str): The option's name, for the error (e.g. ``"--html"``).

    Returns:
        Path or None: The path; its folder exists and is writable.

    Raises:
        ~captum_iba.app.errors.CLIError: When it names a folder, or its
            folder cannot be made or written.
    """
    if path is None:
        return None
    target = Path(path).expanduser()
    if not target.name or target.is_dir():
        raise CLIError(f"{option}: {path} is a folder; give a file name")
    _writable_folder(target.parent if str(target.parent) else Path("."), option)
    return target


def output_folder(path: str, option: str) -> Path:
    """Checks (and creates) the folder a command writes its results into.

    Args:
        path (str): The folder.
        option (str): The option's name, for the error (e.g. ``"--out"``).

    Returns:
        Path: The folder, created and writable.

    Raises:
        ~captum_iba.app.errors.CLIError: When it names a file, or cannot be
            created or written.
    """
    folder = Path(path).expanduser()
    _writable_folder(folder, option)
    return folder


def n_encoder_layers(config: Any) -> Optional[int]:
    """The number of encoder layers a Hugging Face configuration declares."""
    for key in ("num_hidden_layers", "n_layers", "num_layers", "n_layer"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    return None


def layer_kind(config: Any) -> str:
    """``"decoder"`` for a causal LM's configuration, else ``"encoder"``
    (how messages name its layers)."""
    from captum_iba.attr.kinds import kind_of_config

    return kind_of_config(config).layers


def check_against_config(
    config: Any,
    layer: Optional[int] = None,
    target: Optional[int] = None,
    max_length: Optional[int] = None,
    layer_option: str = "--layer",
) -> None:
    """Checks indices and lengths against a model's configuration.

    Args:
        config: A ``transformers`` configuration.
        layer (int, optional): ``--layer`` (0-based encoder layer index; a
            name such as ``"embeddings"`` is not checked here).
        target (int, optional): ``--target`` (class index).
        max_length (int, optional): ``--max-length`` (tokens).
        layer_option (str): How the layer was given, for the message.

    Raises:
        ~captum_iba.app.errors.CLIError: Giving the valid range of the first
            value out of it.
    """
    n_layers = n_encoder_layers(config)
    index = layer if isinstance(layer, int) and not isinstance(layer, bool) else None
    if index is not None and n_layers is not None and not 0 <= index < n_layers:
        raise CLIError(
            f"{layer_option} {index} is out of range: the model has {n_layers} "
            f"{layer_kind(config)} layers, valid indices are 0..{n_layers - 1}"
        )
    n_labels = getattr(config, "num_labels", None)
    if target is not None and n_labels and not 0 <= target < n_labels:
        raise CLIError(
            f"--target {target} is out of range: the model has {n_labels} "
            f"classes, valid indices are 0..{n_labels - 1}"
        )
    positions = getattr(config, "max_position_embeddings", None)
    if max_length is not None:
        if max_length < 3:
            raise CLIError(
                f"--max-length {max_length} is too short: at least 3 tokens "
                "([CLS], one token, [SEP])"
            )
        if isinstance(positions, int) and max_length > positions:
            raise CLIError(
                f"--max-length {max_length} is longer than the model's "
                f"{positions} positions; valid values are 3..{positions}"
            )


def class_names(config: Any) -> List[str]:
    """A model's class names by index, from its configuration's ``id2label``
    (``"0"``, ``"1"``, ... where it names none).

    Args:
        config: A ``transformers`` configuration.

    Returns:
        list[str]: One name per class.
    """
    n = getattr(config, "num_labels", None) or 0
    names = getattr(config, "id2label", None) or {}
    names = {int(k): str(v) for k, v in names.items()}
    return [names.get(i, str(i)) for i in range(max(n, len(names)))]


def class_index(value: Any, names: Sequence[str], option: str = "--target") -> int:
    """The index of a class given by index or by name.

    Args:
        value (int or str): An index (``1``, ``"1"``) or a class name from
            ``names`` (any case, e.g. ``"positive"``).
        names (Sequence[str]): The model's class names by index
            (:func:`class_names`).
        option (str): The option's name, for the error.

    Returns:
        int: The index.

    Raises:
        ~captum_iba.app.errors.CLIError: For an index out of range or an
            unknown name; the message gives the model's classes.
    """
    mapping = ", ".join(f"{i} {n}" for i, n in enumerate(names))
    text = str(value).strip()
    if isinstance(value, int) or text.lstrip("-").isdigit():
        index = int(text)
        if not 0 <= index < len(names):
            raise CLIError(
                f"{option} {index} is out of range: the model has {len(names)} "
                f"classes, valid indices are 0..{len(names) - 1} ({mapping})"
            )
        return index
    lowered = [n.lower() for n in names]
    if text.lower() in lowered:
        return lowered.index(text.lower())
    raise CLIError(
        f"{option} {text!r} is not a class of the model; give an index or a "
        f"name: {mapping}"
    )


def check_classes(config: Any, names: List[str], dataset: str, target: str) -> None:
    """Checks that a corpus' classes are the model's.

    Args:
        config: The model's ``transformers`` configuration.
        names (List[str]): The corpus' class names.
        dataset (str): ``--dataset``.
        target (str): ``"label"`` (the gold classes are explained) or
            ``"predicted"``.

    Raises:
        ~captum_iba.app.errors.CLIError: When the numbers of classes differ
            and the gold labels are explained, or the corpus has more classes.
    """
    n_model = getattr(config, "num_labels", None)
    if not isinstance(n_model, int) or n_model == len(names):
        return
    if target == "label" or len(names) > n_model:
        model_names = list((getattr(config, "id2label", None) or {}).values())
        raise CLIError(
            f"--dataset {dataset} has {len(names)} classes ({', '.join(names)}) but "
            f"the model has {n_model} ({', '.join(map(str, model_names))}): give a "
            f"model fine-tuned on {dataset}"
        )


def pair_warning(config: Any, record: Optional[dict]) -> Optional[str]:
    """A warning when a sentence pair goes to a single-sentence classifier.

    Args:
        config: The model's ``transformers`` configuration.
        record (dict, optional): Its fine-tuning record, when it has one.

    Returns:
        str or None: The warning, saying how it was known (the record) or
        guessed (the label names); None when nothing suggests it.
    """
    if record is not None:
        corpus = record.get("dataset")
        if corpus in SINGLE_TEXT_CORPORA:
            return (
                f"--pair given, but this model was fine-tuned on {corpus!r}, a "
                "single-sentence corpus (its fine-tuning record says so); the "
                "two texts are read as one input it was never trained on"
            )
        return None
    names = {str(v).lower() for v in (getattr(config, "id2label", None) or {}).values()}
    if names and names <= {"negative", "positive", "neutral", "neg", "pos"}:
        return (
            "--pair given, but this looks like a single-sentence (sentiment) "
            f"classifier, guessed from its label names {sorted(names)}; it has no "
            "record saying what it was trained on"
        )
    return None


def corpus_warning(record: Optional[dict], dataset: str) -> Optional[str]:
    """A warning when a model fine-tuned on one corpus runs on another.

    Args:
        record (dict, optional): The model's fine-tuning record, when it has
            one (it names the corpus).
        dataset (str): ``--dataset``.

    Returns:
        str or None: The warning; None when the record names ``dataset`` or
        there is no record.
    """
    corpus = (record or {}).get("dataset")
    if not corpus or corpus == dataset:
        return None
    return (
        f"this model was fine-tuned on {corpus!r} (its fine-tuning record says so), "
        f"not on --dataset {dataset}: its predictions there may be no better than "
        "chance, and the test then says little about the methods; give a model "
        f"fine-tuned on {dataset} (e.g. leave --model out)"
    )
