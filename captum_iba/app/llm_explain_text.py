"""The terminal listing of an
:class:`~captum_iba.app.page.Explanation` of a causal LM's answer (its
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

__all__ = ["WHOLE_ANSWER_ONLY", "answer_text", "near_flat_said", "per_token_lines"]

#: Why a method gives no per-token scores, unless it says more.
WHOLE_ANSWER_ONLY = "the method explains the whole answer only"


def answer_text(result: Any, top: int = 5, pieces: bool = False) -> str:
    """The listing printed by ``captum-iba explain --model <causal LM>``.

    Args:
        result (Explanation): What
            :func:`~captum_iba.app.llm_explanation.explain_answer` returned.
        top (int): How many top words to list per method. Default 5.
        pieces (bool): Tokens instead of words. Default False.

    Returns:
        str: The listing.
    """
    subject = result.subject  # a PromptSubject
    turn = "  (as a user turn)" if subject.chat else ""
    how = "greedy" if subject.generated else "given"
    lines = [
        f"prompt: {subject.prompt!r}{turn}",
        f"answer ({how}, {subject.length()}): {subject.answer!r}",
    ]
    if subject.odds is not None:
        lines += subject.odds.listed()
    for name, m in result.methods.items():
        values = result.scores(name, pieces)
        lines.append("")
        lines.append(f"{name}: {result.details(name, brief=True)}")
        words = [shown(w) for w in result.tokens(pieces)]
        lines.append("  " + " | ".join(f"{w} {v:.3g}" for w, v in zip(words, values)))
        if m.no_ranking:
            said = f"no ranking: {m.no_ranking}; no top words are listed"
            lines += textwrap.wrap(
                said, 88, initial_indent="  ", subsequent_indent="    "
            )
        else:
            best = ", ".join(
                f"{shown(w)} ({v:.3g})" for w, v in result.top(top, name, pieces)
            )
            lines.append(f"  top {min(top, len(values))}: {best}")
            if name in result.near_flat_methods():
                lines.append(f"  warning: {result.near_flat(name)}")
        lines += per_token_lines(result, name, min(top, 3), pieces)
    why = result.subject.form_words_why  # issue 90, item 17
    small = form_words_note(result, pieces, why)
    if small:
        lines += [""] + textwrap.wrap(f"note: {small}", 88, subsequent_indent="  ")
    lines += [f"note: {m} left out: {why}" for m, why in result.skipped.items()]
    return "\n".join(lines)


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
