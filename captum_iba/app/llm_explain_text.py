"""A causal LM's answer's parts of the one terminal listing
(:func:`~captum_iba.app.listing.listing`) of an
:class:`~captum_iba.app.page.Explanation` (its
:class:`~captum_iba.app.subjects.PromptSubject`'s): the prompt and the answer,
how much the model wanted the answer, then per method the prompt's words with
their scores, its top words (or why it ranks none) and, when scored per output
token, each output token's top words.

It reads an explanation through its public methods only and imports nothing
of :mod:`captum_iba.app.explanation` nor :mod:`captum_iba.app.subjects`,
which imports it: the listing sits below the explanation (as
:mod:`captum_iba.app.explain_text` does for a classifier's).
"""

import textwrap
from typing import Any, List, Sequence

from captum_iba._utils.ranking import NEAR_RTOL, flat_reason
from captum_iba.app.words import form_words_note, shown

__all__ = [
    "WHOLE_ANSWER_ONLY",
    "answer_head",
    "answer_lines",
    "answer_notes",
    "near_flat_said",
    "per_token_lines",
    "skipped_lines",
]

#: Why a method gives no per-token scores, unless it says more.
WHOLE_ANSWER_ONLY = "the method explains the whole answer only"


def answer_head(result: Any) -> List[str]:
    """The listing's head: the prompt, the answer and how much the model
    wanted it."""
    subject = result.subject  # a PromptSubject
    turn = "  (as a user turn)" if subject.chat else ""
    how = "greedy" if subject.generated else "given"
    lines = [
        f"prompt: {subject.prompt!r}{turn}",
        f"answer ({how}, {subject.length()}): {subject.answer!r}",
    ]
    return lines + (subject.odds.listed() if subject.odds is not None else [])


def answer_lines(result: Any, name: str, top: int, pieces: bool) -> List[str]:
    """A method's lines: the prompt's words with their scores, its top words
    (or why it ranks none), and each output token's top words."""
    m = result.methods[name]
    values = result.scores(name, pieces)
    words = [shown(w) for w in result.tokens(pieces)]
    lines = ["  " + " | ".join(f"{w} {v:.3g}" for w, v in zip(words, values))]
    if m.no_ranking:
        said = f"no ranking: {m.no_ranking}; no top words are listed"
        lines += textwrap.wrap(said, 88, initial_indent="  ", subsequent_indent="    ")
    else:
        best = ", ".join(
            f"{shown(w)} ({v:.3g})" for w, v in result.top(top, name, pieces)
        )
        lines.append(f"  top {min(top, len(values))}: {best}")
        if name in result.near_flat_methods():
            lines.append(f"  warning: {result.near_flat(name)}")
    return lines + per_token_lines(result, name, min(top, 3), pieces)


def answer_notes(result: Any, pieces: bool) -> List[str]:
    """The listing's end: why function words rank first, when they do; the
    methods left out."""
    why = result.subject.form_words_why  # issue 90, item 17
    small = form_words_note(result, pieces, why)
    lines = []
    if small:
        lines += [""] + textwrap.wrap(f"note: {small}", 88, subsequent_indent="  ")
    return lines + skipped_lines(result)


def skipped_lines(result: Any) -> List[str]:
    """A line for each method left out, and why."""
    return [f"note: {m} left out: {why}" for m, why in result.skipped.items()]


def per_token_lines(result: Any, method: str, top: int, pieces: bool) -> List[str]:
    """Per output token, its ``top`` words (none without per-token scores)."""
    found = result._method(method)
    matrix = result.matrix(method, pieces)
    if matrix is None:
        if not result.subject.per_token:
            return []
        why = found.per_token_note or WHOLE_ANSWER_ONLY
        return [f"  per output token: none ({why})"]
    tokens, lines = result.tokens(pieces), ["  per output token (top words):"]
    rows = found.per_token or []
    for label, row, raw in zip(result.subject.output_tokens, matrix, rows):
        order = sorted(range(len(row)), key=lambda i: -row[i])[:top]
        best = ", ".join(f"{shown(tokens[i])} ({row[i]:.3g})" for i in order)
        flat = flat_reason(raw, row)
        lines.append(f"    {label!r:<14} <- {'no ranking: ' + flat if flat else best}")
    return lines


def near_flat_said(values: Sequence[float], mask: bool = True) -> str:
    """What a nearly flat ranking means
    (:func:`~captum_iba._utils.ranking.is_near_flat`), with its range;
    ``mask``: the method is IBA's mask (said: it barely moved; not of AT2's
    or another method's scores, issue 90, item 16)."""
    why = " (IBA's mask barely moved from where it started)" if mask else ""
    return (
        f"nearly flat - every token's score is within {100 * NEAR_RTOL:g} % "
        f"of the largest ({min(values):.3g} to {max(values):.3g}): a ranking "
        f"by small differences{why}; read it with care, beside another "
        "method's ranking (--compare; docs/llm.rst)"
    )
