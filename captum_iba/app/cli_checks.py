"""The command line's checks of the parsed arguments, before anything loads.

Torch-free, like the parser (:mod:`captum_iba.app.cli`): the methods named
(``--method``, ``--compare``, ``--methods``) resolved to registered names, their
options checked against the declarations (:func:`captum_iba.request.check_request`),
the corpus, the data folder and ``reproduce``'s choices. Each check raises
:class:`~captum_iba.app.errors.CLIError` with a one-line message.
"""

import argparse
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from captum_iba.app.corpus_task import CORPUS_BATCH, DATASETS
from captum_iba.app.errors import CLIError, split_choices
from captum_iba.app.profiles import CORPORA, PARTS
from captum_iba.registry import (
    METHODS,
    OPTIONS,
    SETTINGS,
)
from captum_iba.request import MethodRequest, WrongKindError, check_request

__all__ = [
    "CHECKS",
    "DATASETS",
    "REPRODUCE_SETTINGS",
    "CORPUS_BATCH",
    "CorpusRequest",
    "ReproduceRequest",
    "check_corpus",
    "corpus_task",
    "check_explain",
    "check_reproduce",
    "deprecation_notes",
    "method_names",
    "per_method_options",
]

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


def deprecation_notes(args: argparse.Namespace, request: Any = None) -> List[str]:
    """What the command line says, in one line each on stderr after a run,
    of the deprecated method names it was given (the ``llm-*`` ones: the
    new name to write): the request's methods and ``--set`` 's."""
    methods = getattr(request, "methods", None)
    given = list(getattr(methods, "methods", methods) or [])
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


def _checked(
    args: argparse.Namespace,
    methods: Optional[List[str]],
    setting: Optional[str],
    question: Any = None,
    model: Any = None,
    option: str = "",
) -> MethodRequest:
    """The methods and their options checked once, before anything loads
    (an option no chosen method takes, a value a method refuses, ``--set``
    for a method not chosen: an error), against the model's kind (``model``)
    where given; with a ``question`` (``explain``), its default methods when
    none is named (:func:`~captum_iba.app.explain_request.check_methods`).
    ``option`` starts the message of methods of another kind (the option
    that named them)."""
    from captum_iba.app.explain_request import check_methods

    given = {name: getattr(args, name, None) for name in OPTIONS.names()}
    per_method = per_method_options(getattr(args, "set", None))
    kind = getattr(model, "name", None)
    try:
        if question is None:
            return check_request(
                methods, given, per_method, setting=setting, cli=True, model_kind=kind
            )
        return check_methods(
            methods, question, model, given, per_method, setting=setting, cli=True
        )
    except WrongKindError as err:
        raise CLIError(f"{option}{err}") from None
    except (ValueError, TypeError) as err:
        raise CLIError(str(err)) from None


def check_explain(args: argparse.Namespace) -> Any:
    """``explain`` 's one request (:class:`~captum_iba.app.explain_request.
    ExplainRequest`): the methods named, the model's kind decided once (its
    configuration, before any weights), the question (a prediction, an
    answer, the sources of an answer), the methods (the question's default
    when none is named) and their options checked once against the kind,
    then the text or the query and its context."""
    from captum_iba.app.explain_command import explain_request
    from captum_iba.app.explain_request import question_of
    from captum_iba.app.model_kind import decide_kind

    names = None
    if args.compare is not None:
        names = method_names(args.compare, "--compare")
    elif args.method is not None:
        names = method_names(args.method, "--method")
    kind = decide_kind(args.model)
    question = question_of(kind, args.context is not None)
    methods = _checked(args, names, "fair", question, kind)
    return explain_request(args, question, kind, methods)


class CorpusRequest:
    """``evaluate`` 's and ``attribute`` 's request: the options given, with
    the values resolved at the entry in their place (the corpus, the batch
    size, the methods, a context task's split and passages), and the
    checked methods (``request``). Read as attributes, as the parsed
    arguments are; frozen: nothing after the entry sets a value
    (:meth:`replace` makes a new request).
    """

    __slots__ = ("_values",)

    def __init__(self, given: Any, **resolved: Any) -> None:
        values = dict(given.items() if hasattr(given, "items") else vars(given))
        object.__setattr__(self, "_values", {**values, **resolved})

    def __getattr__(self, name: str) -> Any:
        if name == "_values":
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"the request has no {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a request is frozen: {name} cannot be set")

    def items(self) -> Any:
        """The request's values, by name (what a run's settings record)."""
        return self._values.items()

    def replace(self, **resolved: Any) -> "CorpusRequest":
        """A new request with ``resolved`` values in place of these."""
        return CorpusRequest(self, **resolved)


def corpus_task(kind: Any, context: bool) -> Any:
    """The corpus job (a :class:`~captum_iba.app.corpus_task.CorpusTask`) of
    a model of ``kind``, with ``--task`` (``context``) or without: chosen
    once, at the entry. A classifier's corpus refuses a context task in its
    own words (its ``check``)."""
    from captum_iba.app.classifier_corpus import CLASSIFIER_CORPUS
    from captum_iba.app.context_corpus import CONTEXT_TASK
    from captum_iba.app.llm_corpus import PROMPT_TASK
    from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER

    tasks = {
        CLASSIFIER: (CLASSIFIER_CORPUS, CLASSIFIER_CORPUS),
        CAUSAL_LM: (PROMPT_TASK, CONTEXT_TASK),
    }
    return tasks[kind][bool(context)]


def check_corpus(args: argparse.Namespace) -> CorpusRequest:
    """The corpus commands' request: the model's kind decided once (its
    configuration, before any weights), the corpus job chosen once from it
    and ``--task`` (:func:`corpus_task`), the
    job's arguments, the methods (its defaults when none is named) and
    their options checked once against the kind, the data folder - before
    anything loads."""
    from captum_iba.app.model_kind import decide_kind

    kind = decide_kind(args.model)
    task = corpus_task(kind, getattr(args, "task", None) is not None)
    resolved = task.check(args)
    if args.methods is None:
        methods = task.default_methods(args.command, kind)
    else:
        methods = method_names(args.methods, "--methods")
    request = _checked(args, methods, args.setting, model=kind, option="--methods: ")
    if args.data_dir is not None:
        folder = os.path.expanduser(args.data_dir)
        if not os.path.isdir(folder):
            what = "a file" if os.path.exists(folder) else "no such folder"
            raise CLIError(
                f"--data-dir {args.data_dir}: {what}; give the folder holding the "
                "corpora (sst2/, imdb/, rte/, ag_news/)"
            )
    return CorpusRequest(
        args, **resolved, methods=methods, request=request, kind=kind,
        corpus_task=task,
    )  # fmt: skip


@dataclass(frozen=True)
class ReproduceRequest:
    """``reproduce`` 's choices, each list checked."""

    parts: List[str]
    settings: List[str]
    datasets: List[str]


def check_reproduce(args: argparse.Namespace) -> ReproduceRequest:
    return ReproduceRequest(
        split_choices(args.parts, PARTS, "part"),
        split_choices(args.settings, REPRODUCE_SETTINGS, "setting"),
        split_choices(args.datasets, CORPORA, "dataset"),
    )


#: The check of each command.
CHECKS = {
    "explain": check_explain,
    "evaluate": check_corpus,
    "attribute": check_corpus,
    "reproduce": check_reproduce,
}
