"""What the ``captum-iba`` commands share, once their arguments are checked:
the model itself (:func:`model_and_tokenizer`; its configuration and
fine-tuning record are read before any weights, and the request checked
against them, by :func:`config_and_record` and
:func:`~captum_iba.app.models.check_request_layers`), the training data of
priors fitted on data (:func:`prior_data`), the notes of a comparison
(:func:`print_notes`) and the name of a finished folder's marker
(:data:`MARKER`).

The command modules (:mod:`~captum_iba.app.explain_command`,
:mod:`~captum_iba.app.corpus_command`) import this module, and the dispatch
(:mod:`~captum_iba.app.commands`) imports them: nothing imports upwards.
"""

from pathlib import Path
from typing import Any, List, Optional, Tuple

from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.errors import CLIError
from captum_iba.app.models import load_classifier, load_label_names, model_config
from captum_iba.registry import PRIORS
from captum_iba.request import MethodRequest

__all__ = [
    "MARKER",
    "config_and_record",
    "model_and_tokenizer",
    "print_notes",
    "prior_data",
    "slug",
]

#: Name of the marker written last into a results folder.
MARKER = "COMPLETE.json"


def model_and_tokenizer(path: Optional[str], dataset: str = DEFAULT_CORPUS) -> Any:
    """The model and tokenizer (the default model fine-tuned once and cached)."""
    if path is None:
        from captum_iba.app.finetune import get_finetuned_model

        path = str(get_finetuned_model(dataset))
    return load_classifier(path)


def _priors_named(request: MethodRequest) -> List[Any]:
    values = list(request.options.get("prior", ()))
    for options in request.method_options.values():
        values += list(options.get("prior", ()))
    return values


def prior_data(
    request: MethodRequest, dataset: Optional[str], data_dir: Optional[str]
) -> Optional[Any]:
    """The training data the priors that need data are fitted on (1,000
    instances of ``dataset``'s training split), or None when none needs it."""
    named = [p for p in _priors_named(request) if isinstance(p, str)]
    if not any(PRIORS.load(p).needs_data for p in named):
        return None
    if dataset is None:
        raise CLIError(
            "--prior: a prior fitted on data needs the model's training corpus, "
            "which is not known for this model (use the default model or one "
            "fine-tuned by captum-iba)"
        )
    from captum_iba.app.data import load_dataset

    return load_dataset(dataset, "train", data_dir=data_dir, max_examples=1000)


def print_notes(request: MethodRequest) -> None:
    """Which options apply to some of the methods only (comparisons)."""
    for note in request.notes:
        print(f"note: {note}")


def config_and_record(path: Optional[str], dataset: str) -> Tuple[Any, Optional[dict]]:
    """The model's configuration and fine-tuning record, before any weights load.

    For the default model (``path`` None) these are the base model's
    configuration with the corpus' classes, and a record naming the corpus.
    """
    from captum_iba.app.finetune.recipes import default_base_model
    from captum_iba.app.finetune.store import check_folder, read_record

    if path is None:
        try:
            config = model_config(default_base_model())
        except ImportError:
            from captum_iba.app.finetune.cache import cached_default_model

            cached = cached_default_model(dataset)
            if cached is None:
                raise
            return model_config(cached), {"dataset": dataset}
        names = load_label_names(dataset)
        config.num_labels = len(names)
        config.id2label = dict(enumerate(names))
        config.label2id = {n: i for i, n in enumerate(names)}
        return config, {"dataset": dataset}
    config = model_config(path)
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return config, None
    try:
        record = read_record(folder)
    except (FileNotFoundError, ValueError):
        return config, None  # not made by fine_tune, or its record is unreadable
    problem = check_folder(folder, record) if "files" in record else None
    if problem:
        raise CLIError(
            f"model folder {folder} is damaged: {problem}; delete it (a cached "
            "model is fine-tuned again when next needed)"
        )
    return config, record


def slug(name: str) -> str:
    """A method's name as part of a file name (``iba-deletion`` ->
    ``iba_deletion``)."""
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()
