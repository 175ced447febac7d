"""The help texts of ``captum-iba``: a formatter that gives every option's
default, the listings of the registered names (methods with the options each
takes, priors) with their summaries, and what a score means - all read from
the registry. A method says what it does in its one line; the figures that
compare methods live in the docs (issue 88). Torch-free, like the parser
(:mod:`captum_iba.app.cli`)."""

import argparse
import textwrap
from typing import List, Sequence, Tuple

from captum_iba.attr.kinds import kinds_named
from captum_iba.registry import (
    METHODS,
    MODEL_KINDS,
    OPTIONS,
    PRIORS,
    explains,
    method_kinds,
)

__all__ = [
    "DESCRIPTION",
    "HelpFormatter",
    "methods_listing",
    "option_help",
    "priors_listing",
    "scores_text",
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

    def _split_lines(self, text: str, width: int) -> List[str]:
        # never at a hyphen: method names such as input-x-gradient stay whole
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def listing(title: str, items: Sequence[Tuple[str, str]]) -> str:
    """A help section: one ``name  summary`` line per registered name."""
    width = max(len(name) for name, _ in items) + 2
    lines = [f"  {name:<{width}}{summary}" for name, summary in items]
    return f"{title}:\n" + "\n".join(lines)


def _flag(option: str) -> str:
    """An option as the command line spells it ("" when it has no flag)."""
    return OPTIONS.entry(option).facts.get("flag") or ""


def methods_listing(kinds: Sequence[str] = MODEL_KINDS) -> str:
    """The registered methods that explain models of ``kinds``, each with
    its summary, the options it takes, its other names, where it explains
    one kind of model only, that kind; then the deprecated
    ``llm-*`` names. One listing: a name is the same for every kind it explains."""
    plural = {k.name: k.plural for k in kinds_named(kinds)}
    items = []
    for name, summary in METHODS.items():
        facts = METHODS.entry(name).facts
        models = method_kinds(METHODS.entry(name))
        if not any(explains(name, k) for k in kinds):
            continue
        options = [f for f in map(_flag, facts.get("options", ())) if f]
        text = summary + (f" [{', '.join(options)}]" if options else "")
        others = [a for a, e in METHODS.aliases().items() if e.name == name]
        text += f" (also: {', '.join(others)})" if others else ""
        if len(kinds) > 1 and len(models) == 1:
            text += f" ({plural[models[0]]} only)"
        items.append((name.lower(), text))
    both = "; each explains both, unless marked" if len(kinds) > 1 else ""
    title = (
        f"methods for {' and '.join(plural[k] for k in kinds)} (the registry's "
        f"names, any case{both}) [the options each takes]"
    )
    old = sorted(METHODS.aliases(deprecated=True))
    note = (
        f"The names {', '.join(old)} still work, with a note (deprecated since "
        "0.3; removed in 0.4): write the name without 'llm-' (llm-ablation: ablation)"
    )
    wrapped = "\n".join(textwrap.wrap(note, 78, break_on_hyphens=False))
    return listing(title, items) + (f"\n\n{wrapped}" if old else "")


def priors_listing() -> str:
    return listing("IBA's noise priors", PRIORS.items())


def option_help(option: str) -> str:
    """An option's help line: its summary and the methods that take it."""
    takers = [
        m.lower()
        for m in METHODS.names()
        if option in METHODS.entry(m).facts.get("options", ())
    ]
    return f"{OPTIONS.entry(option).summary} [taken by: {', '.join(takers)}]"


def _names(methods: List[str]) -> str:
    return ", ".join(m.lower() for m in methods)


def scores_text() -> str:
    """What a score means, for each kind of method (read from the registry's
    facts: signed or not, a word's pieces summed or averaged)."""
    facts = {m: METHODS.entry(m).facts for m in METHODS.names()}
    unsigned = [m for m, f in facts.items() if not f.get("signed", True)]
    signed = [m for m in facts if m not in unsigned]
    mean = [m for m, f in facts.items() if f.get("reduction") == "mean"]
    summed = [m for m in facts if m not in mean]
    text = (
        f"What a score means: the scores of {_names(unsigned)} carry no direction "
        "(IBA's: how much the prediction relied on a word, for or against the "
        "class); the page colours them min-max within each row. The scores of "
        f"{_names(signed)} are signed: + for the explained class, - against it "
        "(a diverging scale). A word's score is made from its word pieces' "
        f"scores: their sum for additive methods ({_names(summed)}), their mean "
        f"for {_names(mean)} (--pieces shows the pieces)."
    )
    return "\n".join(textwrap.wrap(text, 78, break_on_hyphens=False))


DESCRIPTION = """\
Information Bottleneck Attribution for transformers (Captum): which words did a
prediction rely on, how faithful is that answer, for one text or a corpus.

  captum-iba explain "A gripping, beautifully acted film that never drags."
  captum-iba explain "..." --compare iba-deletion,iba-faithful,ig --html page.html
  captum-iba evaluate --dataset sst2 --methods iba-deletion,ig,random --n 100

Each command has its own help: captum-iba explain -h."""
