"""A classifier's parts of the one terminal listing
(:func:`~captum_iba.app.listing.listing`) of an
:class:`~captum_iba.app.page.Explanation` (its
:class:`~captum_iba.app.subjects.ClassifierSubject`'s).

One method: a line saying what a score means, then every word in text order
with its rank, its score and a bar on the row's scale (min-max for scores
without a direction, score / largest magnitude for signed ones), then the top
words. Several methods: per method, what a score means and its top words,
each on its own scale (the numbers in brackets are relative: 1 = the row's
highest).

It reads an explanation through its public methods only (``methods``,
``tokens``, ``subject``, ...) and imports nothing of
:mod:`captum_iba.app.explanation` nor :mod:`captum_iba.app.subjects`, which
calls it: the listing sits below the explanation.
"""

import re
import textwrap
from typing import Any, List, Sequence

import numpy as np

from captum_iba.visualization import scale_scores

__all__ = ["prediction_head", "prediction_lines", "prediction_notes"]

_WIDTH = 88
_BAR = 20


def _relative(scores: Sequence[float], signed: bool) -> np.ndarray:
    """Scores on the row's scale, as the page colours them
    (:func:`~captum_iba.visualization.scale_scores`): signed in [-1, 1]
    (score / largest magnitude), else min-max in [0, 1]."""
    return scale_scores(scores, "max" if signed else "minmax")


def _bar(value: float, signed: bool) -> str:
    if not signed:
        return "#" * int(round(_BAR * value))
    half = _BAR // 2
    n = int(round(half * abs(value)))
    return f"{'-' * n:>{half}}|" if value < 0 else f"{'':>{half}}|{'+' * n}"


def _wrapped(text: str, indent: str = "  ") -> List[str]:
    return textwrap.wrap(
        text, _WIDTH, initial_indent=indent, subsequent_indent=indent + "  "
    )


#: What a relative score is (:func:`_relative`), signed or not.
_RELATIVE = {
    True: "score / largest |score|",
    False: "min-max within the text, 1 = the highest",
}


def _scale_words(signed: bool, label: str) -> str:
    """The direction of a score; what a relative score is is said once, by
    the top words (issue 90, item 6: it was said twice per method)."""
    return f"+ for {label}, - against it" if signed else "no direction"


def _score(value: float) -> str:
    """A score with 4 significant digits, trailing zeros kept (``0.6750``
    beside ``0.6751``, not ``0.675``)."""
    text = f"{value:#.4g}"
    return text[:-1] if text.endswith(".") else text


def _top_lines(
    result: Any, name: str, k: int, pieces: bool, rel: np.ndarray
) -> List[str]:
    """The top ``k`` words (relative scores in brackets, said so: the
    table's scores are the method's own); for a signed method also the
    ``k`` most against the class (negative scores only)."""
    tokens = result.tokens(pieces)
    method = result.methods[name]
    if method.no_ranking:
        return _wrapped(f"no ranking: {method.no_ranking}; no top words are listed")
    signed = method.signed
    order = sorted(range(len(tokens)), key=lambda i: -rel[i])
    what = "pieces" if pieces else "words"
    fmt = "+.2f" if signed else ".2f"

    def listed(indices: List[int]) -> str:
        return ", ".join(f"{tokens[i]} ({rel[i]:{fmt}})" for i in indices)

    top = order[:k]
    said = f"in brackets: relative, {_RELATIVE[signed]}"
    lines = [f"  top {len(top)} {what}: {listed(top)}; {said}"]
    against = [i for i in reversed(order) if rel[i] < 0][:k]
    if signed and against:
        lines.append(f"  most against: {listed(against)}")
    return lines


def _table(result: Any, name: str, pieces: bool) -> List[str]:
    method = result.methods[name]
    tokens, scores = result.tokens(pieces), result.scores(name, pieces)
    rel = _relative(scores, method.signed)
    rank = np.empty(len(scores), dtype=object)
    rank[np.argsort(-np.asarray(scores), kind="stable")] = np.arange(1, len(scores) + 1)
    if method.no_ranking:  # no rank, and no bar that would suggest one
        rank[:] = "-"
        rel = np.zeros(len(scores))
    width = min(max([len(t) for t in tokens] + [4]), 20)
    head = "piece" if pieces else "word"
    lines = [f"  {'rank':>4}  {head:<{width}}  {'score':>9}  relative"]
    breaks = set(result.breaks(pieces))
    for i, (tok, x) in enumerate(zip(tokens, scores)):
        if i in breaks:
            lines.append(f"  {'':>4}  {'| (second text)':<{width}}")
        shown = tok if len(tok) <= width else tok[: width - 1] + "~"
        bar = _bar(rel[i], method.signed)
        lines.append(f"  {rank[i]:>4}  {shown:<{width}}  {_score(x):>9}  {bar}")
    return lines


def prediction_head(result: Any) -> List[str]:
    """The listing's head: the prediction and the class explained."""
    subject = result.subject  # a ClassifierSubject
    pred, target = subject.predicted, subject.target
    which = "the predicted class" if target == pred else "not the predicted class"
    return [
        f"prediction: {subject.label(pred)} (p = {subject.probabilities[pred]:.3f}); "
        f"explaining class {subject.label(target)!r} (index {target}, {which})"
    ]


def brief_meaning(meaning: str) -> str:
    """What a score means, in brief for a listing: the sentence before its
    first colon, without its asides in brackets (the page gives it whole)."""
    head = meaning.split(": ", 1)[0]
    return re.sub(r" \([^()]*\)", "", head)


def prediction_lines(result: Any, name: str, top: int, pieces: bool) -> List[str]:
    """A method's lines: what a score means and its direction, every word
    with its score (one method only), then the top words."""
    method = result.methods[name]
    label = repr(result.subject.label(result.subject.target))
    lines = _wrapped(f"score = {brief_meaning(method.meaning)}.")
    if not method.no_ranking:
        lines += _wrapped(f"({_scale_words(method.signed, label)})")
    rel = _relative(result.scores(name, pieces), method.signed)
    if len(result.methods) == 1:
        lines += _table(result, name, pieces)
    return lines + _top_lines(result, name, top, pieces, rel)


def prediction_notes(result: Any, pieces: bool) -> List[str]:
    """The listing's end: the explanation's notes (the methods left out
    among them)."""
    lines = [""]
    for note in result.notes(pieces):
        lines += _wrapped(note, "")
    return lines
