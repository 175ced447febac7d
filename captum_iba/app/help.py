"""The help texts of ``captum-iba``: a formatter that gives every option's
default, and the listings of the registered names (methods, priors) with
their summaries. Torch-free, like the parser (:mod:`captum_iba.app.cli`)."""

import argparse
from typing import Sequence, Tuple

from captum_iba.registry import METHODS, PRIORS

__all__ = [
    "DESCRIPTION",
    "SCORES",
    "HelpFormatter",
    "methods_listing",
    "priors_listing",
]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default (unless it says it already,
    or there is none); the description and the listings keep their lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or any(default is v for v in (None, False, argparse.SUPPRESS))
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def listing(title: str, items: Sequence[Tuple[str, str]]) -> str:
    """A help section: one ``name  summary`` line per registered name."""
    width = max(len(name) for name, _ in items) + 2
    lines = [f"  {name:<{width}}{summary}" for name, summary in items]
    return f"{title}:\n" + "\n".join(lines)


def methods_listing() -> str:
    items = [(n.lower(), s) for n, s in METHODS.items()]
    return listing("methods (the registry's names, any case)", items)


def priors_listing() -> str:
    return listing("IBA's noise priors", PRIORS.items())


SCORES = (
    "What a score means: IBA's scores (iba, iba-faithful, iba-deletion) carry no\n"
    "direction - how much the prediction relied on a word, for or against the\n"
    "class; the page colours them min-max within each row. The other methods'\n"
    "scores are signed: + for the explained class, - against it (a diverging\n"
    "scale).\n"
    "A word's score is made from its word pieces' scores: their sum for\n"
    "additive methods (ig, lime, loo, ...), their mean for IBA (--pieces shows\n"
    "the pieces)."
)


DESCRIPTION = """\
Information Bottleneck Attribution for transformers (Captum): which words did a
prediction rely on, how faithful is that answer, for one text or a corpus.

  captum-iba explain "A gripping, beautifully acted film that never drags."
  captum-iba explain "..." --compare iba-deletion,iba-faithful,ig --html page.html
  captum-iba evaluate --dataset sst2 --methods iba-deletion,ig,random --n 100

Each command has its own help: captum-iba explain -h."""
