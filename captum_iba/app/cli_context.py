"""The command line's context options (docs/context.rst): ``explain``'s
context and query, ``evaluate``'s context tasks.

Torch-free, like the parser (:mod:`captum_iba.app.cli`), which adds them:
which source of a prompt a causal LM's answer used.
"""

import argparse
import re
from typing import Tuple

__all__ = ["add_context_tasks", "add_explain_context"]


def add_explain_context(p: argparse.ArgumentParser) -> None:
    """Add ``explain``'s ``--context``, ``--query``, ``--sources`` and the
    parts of the answer to attribute (``--answer-sentences``,
    ``--answer-span``).

    Args:
        p (argparse.ArgumentParser): The ``explain`` parser.
    """
    p.add_argument(
        "--context",
        metavar="FILE_OR_TEXT",
        help="a causal LM: a context whose sources the answer may use (a file "
        "that exists is read, else the text itself; a folder, or a name that "
        "looks like a file's path and names none, is refused), laid out with "
        "--query as ContextCite does ('Context: ...\\n\\nQuery: ...'); the "
        "listing ranks the sources by how much the answer used them "
        "(docs/context.rst)",
    )
    p.add_argument("--query", help="the question about --context")
    p.add_argument(
        "--sources",
        choices=("sentence", "documents", "lines", "turns"),
        help="how --context is cut into sources: sentence (default), documents "
        "(separated by blank lines), lines, turns (a line opening with a "
        "speaker's label such as 'User:' starts one)",
    )
    # "-3:5" is a value, not an option (issue 90, item 11: argparse said
    # "expected one argument"): as argparse reads "-3", while no option of
    # the parser looks like a negative number
    p._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-\d+:")
    parts = p.add_mutually_exclusive_group()
    parts.add_argument(
        "--answer-sentences",
        action="store_true",
        help="with --context: also attribute each sentence of the answer to the "
        "sources, one attribution per sentence (each method runs once more, "
        "on all the sentences at once); the listing and the page show the "
        "answer as a cited paragraph",
    )
    parts.add_argument(
        "--answer-span",
        metavar="START:END",
        type=_answer_span,
        help="with --context: also attribute the answer's characters "
        "START:END (rounded outward to whole tokens) to the sources",
    )


def _answer_span(text: str) -> Tuple[int, int]:
    """``--answer-span``'s value
    (:func:`~captum_iba.app.answer_spans.parse_answer_span`)."""
    from captum_iba.app.answer_spans import parse_answer_span

    try:
        return parse_answer_span(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_context_tasks(p: argparse.ArgumentParser) -> None:
    """Add ``evaluate``'s context tasks: ``--task``, ``--split``,
    ``--passages`` and ``--examples-seed``, in a group of their own.

    Args:
        p (argparse.ArgumentParser): The ``evaluate`` parser.
    """
    from captum_iba.app.context_tasks import CONTEXT_TASKS

    group = p.add_argument_group(
        "context tasks: which source of a prompt did a causal LM's answer use "
        "(ContextCite's metrics: LDS, top-k log-probability drops, top-1 hit)"
    )
    group.add_argument(
        "--task",
        choices=CONTEXT_TASKS,
        help="a context task instead of --dataset (needs --model <causal LM>): "
        "context-facts, a planted fact among AG News passages; context-topics, "
        "one article per topic, the query naming one",
    )
    group.add_argument(
        "--split",
        choices=("search", "report"),
        help="the task's split: search (AG News's train part, for choosing "
        "configurations) or report (its held-out part; default)",
    )
    group.add_argument(
        "--passages",
        metavar="MIN-MAX",
        help="context-facts: how many passages a context has, the fact's among "
        "them (default 3-20); an example past the model's positions is skipped",
    )
    group.add_argument(
        "--examples-seed",
        type=int,
        default=0,
        help="the seed of the task's examples (default 0)",
    )
