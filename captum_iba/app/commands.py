"""What the ``captum-iba`` commands do, once their arguments are checked.

The parser (:mod:`captum_iba.app.cli`) has checked the arguments and the
request - the methods and their options, against the declarations of
:data:`captum_iba.registry.OPTIONS` - before anything heavy loads. Each
command lives in its own module, imported only when it runs, so ``explain``
loads neither the corpus engine nor the reproduction:

* ``explain`` - :mod:`captum_iba.app.explain_command`;
* ``evaluate`` and ``attribute`` - :mod:`captum_iba.app.corpus_command`;
* ``reproduce`` - :mod:`captum_iba.app.reproduce`.

This module holds what they share: the model itself
(:func:`_model_and_tokenizer`; its configuration and fine-tuning record are
read before any weights, and the request checked against them, by
:func:`~captum_iba.app.models.config_and_record` and
:func:`~captum_iba.app.models.check_request_layers`), and the training data
of priors fitted on data (:func:`prior_data`).
"""

import argparse
from typing import Any, Callable, Dict, List, Optional

from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.errors import CLIError
from captum_iba.app.models import (
    check_request_layers,
    config_and_record,
    load_classifier,
    load_label_names,
)
from captum_iba.registry import PRIORS
from captum_iba.request import MethodRequest

__all__ = [
    "COMMANDS",
    "check_request_layers",
    "cmd_attribute",
    "cmd_evaluate",
    "cmd_explain",
    "cmd_reproduce",
    "config_and_record",
    "load_label_names",
    "prior_data",
]

#: Name of the marker written last into a results folder.
MARKER = "COMPLETE.json"


def _model_and_tokenizer(path: Optional[str], dataset: str = DEFAULT_CORPUS) -> Any:
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


def cmd_explain(args: argparse.Namespace) -> int:
    """``captum-iba explain`` (:mod:`captum_iba.app.explain_command`)."""
    from captum_iba.app.explain_command import run

    return run(args)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``captum-iba evaluate`` (:mod:`captum_iba.app.corpus_command`)."""
    from captum_iba.app.corpus_command import evaluate

    return evaluate(args)


def cmd_attribute(args: argparse.Namespace) -> int:
    """``captum-iba attribute`` (:mod:`captum_iba.app.corpus_command`)."""
    from captum_iba.app.corpus_command import attribute

    return attribute(args)


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``captum-iba reproduce``: the paper's experiments, package code."""
    from captum_iba.app import reproduce
    from captum_iba.app.checks import output_folder

    reproduce.run(
        profile=args.profile,
        out=str(output_folder(args.out, "--out")),
        datasets=args.datasets,
        parts=args.parts,
        settings=args.settings,
        sweep_dataset=args.sweep_dataset,
        fair_prior=args.fair_prior,
    )
    return 0


#: The commands by name.
COMMANDS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "explain": cmd_explain,
    "evaluate": cmd_evaluate,
    "attribute": cmd_attribute,
    "reproduce": cmd_reproduce,
}
