"""What the ``captum-iba`` commands share, once their arguments are checked:
the model itself (:func:`model_and_tokenizer`; its configuration and
fine-tuning record are read before any weights, and the request checked
against them, by :func:`~captum_iba.app.models.config_and_record` and
:func:`~captum_iba.app.models.check_request_layers`), the training data of
priors fitted on data (:func:`prior_data`), the notes of a comparison
(:func:`print_notes`) and the name of a finished folder's marker
(:data:`MARKER`).

The command modules (:mod:`~captum_iba.app.explain_command`,
:mod:`~captum_iba.app.corpus_command`) import this module, and the dispatch
(:mod:`~captum_iba.app.commands`) imports them: nothing imports upwards.
"""

from typing import Any, List, Optional

from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.errors import CLIError
from captum_iba.app.models import load_classifier
from captum_iba.registry import PRIORS
from captum_iba.request import MethodRequest

__all__ = ["MARKER", "model_and_tokenizer", "print_notes", "prior_data"]

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
