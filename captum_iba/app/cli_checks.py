"""The command line's checks of the parsed arguments, before anything loads.

Torch-free, like the parser (:mod:`captum_iba.app.cli`): the methods named
(``--method``, ``--compare``, ``--methods``) resolved to registered names, their
options checked against the declarations (:func:`captum_iba.request.check_request`),
the corpus, the data folder and ``reproduce``'s choices. Each check raises
:class:`~captum_iba.app.errors.CLIError` with a one-line message.
"""

import argparse
import os
from typing import Dict, List, Optional

from captum_iba.app.data.corpora import DEFAULT_CORPUS, HELDOUT_SPLIT
from captum_iba.app.errors import CLIError, split_choices
from captum_iba.app.model_kind import kind_hint
from captum_iba.app.profiles import CORPORA, PARTS
from captum_iba.attr.kinds import kind_named
from captum_iba.registry import (
    METHODS,
    OPTIONS,
    SETTINGS,
)
from captum_iba.request import check_request

__all__ = [
    "CHECKS",
    "DATASETS",
    "REPRODUCE_SETTINGS",
    "check_corpus",
    "check_explain",
    "check_options",
    "check_reproduce",
    "deprecation_notes",
    "method_names",
    "per_method_options",
]

#: Corpora ``evaluate`` accepts (each on its held-out split, see the loaders).
DATASETS = tuple(HELDOUT_SPLIT)
#: ``--batch-size`` of a corpus when not given.
CORPUS_BATCH = 16
#: The presets ``reproduce`` and ``--setting`` take.
REPRODUCE_SETTINGS = tuple(SETTINGS.names())


def method_names(text: str, option: str) -> List[str]:
    """Comma-separated method names (or other names of methods) as
    registered names (unknown ones refused); a deprecated name (an
    ``llm-*`` one) works (:func:`deprecation_notes`)."""
    known = [m.lower() for m in METHODS.names()] + list(METHODS.aliases())
    chosen = [v.strip() for v in text.lower().split(",") if v.strip()]
    if not chosen:
        raise CLIError(f"{option}: name at least one method")
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        split_choices(",".join(unknown), known, "method")  # its error
    return [METHODS.entry(m, warn=False).name for m in chosen]


def deprecation_notes(args: argparse.Namespace) -> List[str]:
    """What the command line says, in one line each on stderr after a run,
    of the deprecated method names it was given (the ``llm-*`` ones: the
    new name to write)."""
    given = list(getattr(args, "methods", None) or [])
    given += [m.partition(":")[0].strip() for m in getattr(args, "set", None) or []]
    notes = [METHODS.deprecation(m) for m in dict.fromkeys(given)]
    return [n for n in notes if n]


def per_method_options(given: Optional[List[str]]) -> Dict[str, Dict[str, str]]:
    """``--set METHOD:OPTION=VALUE`` items as ``{method: {option: value}}``."""
    out: Dict[str, Dict[str, str]] = {}
    for item in given or ():
        method, _, rest = item.partition(":")
        option, eq, value = rest.partition("=")
        if not (method.strip() and option.strip() and eq):
            raise CLIError(f"--set: expected METHOD:OPTION=VALUE, got {item!r}")
        if method.strip() not in METHODS:
            raise CLIError(
                f"--set {item}: unknown method {method.strip()!r}; choose from "
                f"{', '.join(m.lower() for m in METHODS.names())}"
            )
        key = METHODS.entry(method.strip()).name
        out.setdefault(key, {})[option.strip()] = value.strip()
    return out


def check_options(
    args: argparse.Namespace, setting: Optional[str], kind: Optional[str] = None
) -> None:
    """The methods and their options checked against the declarations, before
    anything loads: ``args.request`` (an option no chosen method takes, a
    value a method refuses, ``--set`` for a method not chosen: an error)."""
    given = {name: getattr(args, name, None) for name in OPTIONS.names()}
    try:
        args.request = check_request(
            args.methods,
            given,
            per_method_options(getattr(args, "set", None)),
            setting=setting,
            cli=True,
            model_kind=kind or getattr(args, "model_kind", None),
        )
    except (ValueError, TypeError) as err:
        raise CLIError(str(err)) from None


def check_explain(args: argparse.Namespace) -> None:
    """The methods (the default one for the model's kind, where its name
    says it: :func:`~captum_iba.app.model_kind.kind_hint`) and their options;
    a method for the other kind of model is refused here when the kind is
    known, else once the model's configuration is read."""
    args.model_kind = kind_hint(args.model)
    args.method_given = args.compare is not None or args.method is not None
    if args.compare is not None:
        args.methods = method_names(args.compare, "--compare")
    elif args.method is not None:
        args.methods = method_names(args.method, "--method")
    else:  # the default of the kind the name says (a classifier's if none)
        kind = kind_named(args.model_kind or "classifier")
        args.methods = [kind.default_for(args.context is not None)]
    check_options(args, "fair")


def check_corpus(args: argparse.Namespace) -> None:
    from captum_iba.app.context_corpus import CONTEXT_METHODS, check_context_args

    check_context_args(args, kind_hint(args.model))
    task = getattr(args, "task", None)
    if task is None:
        args.dataset = (args.dataset or DEFAULT_CORPUS).lower()
        args.batch_size = args.batch_size or CORPUS_BATCH
        if args.dataset not in DATASETS:
            raise CLIError(f"unknown dataset {args.dataset!r}; choose from {DATASETS}")
    if args.methods is None and task is not None:
        args.methods = list(CONTEXT_METHODS)
    elif args.methods is None:
        from captum_iba.app.llm_corpus import default_methods

        args.methods = default_methods(args.command, args.model)
    else:
        args.methods = method_names(args.methods, "--methods")
    check_options(args, args.setting)
    if args.data_dir is not None:
        folder = os.path.expanduser(args.data_dir)
        if not os.path.isdir(folder):
            what = "a file" if os.path.exists(folder) else "no such folder"
            raise CLIError(
                f"--data-dir {args.data_dir}: {what}; give the folder holding the "
                "corpora (sst2/, imdb/, rte/, ag_news/)"
            )


def check_reproduce(args: argparse.Namespace) -> None:
    args.parts = split_choices(args.parts, PARTS, "part")
    args.settings = split_choices(args.settings, REPRODUCE_SETTINGS, "setting")
    args.datasets = split_choices(args.datasets, CORPORA, "dataset")


#: The check of each command.
CHECKS = {
    "explain": check_explain,
    "evaluate": check_corpus,
    "attribute": check_corpus,
    "reproduce": check_reproduce,
}
