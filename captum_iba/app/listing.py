"""The one terminal listing of an :class:`~captum_iba.app.page.Explanation`,
whatever was explained: what ``captum-iba explain`` prints and
:meth:`~captum_iba.app.page.Explanation.to_text` returns.

Its frame is the same for every question: the head (what was explained),
then per method a blank line, its name with one line of how it ran, and its
own lines, then the notes. The parts are the subject's (what was explained:
:mod:`captum_iba.app.subjects`), each from its question's module: a
prediction's (:mod:`~captum_iba.app.explain_text`), an answer's
(:mod:`~captum_iba.app.llm_explain_text`), the sources of an answer's
(:mod:`~captum_iba.app.context_explain`). It reads an explanation through its
public methods only.
"""

from typing import Any

__all__ = ["listing"]


def listing(result: Any, top: int = 5, pieces: bool = False) -> str:
    """The listing of ``result``.

    Args:
        result (Explanation): What :func:`captum_iba.explain` (or
            :func:`captum_iba.explain_answer`) returned.
        top (int): How many top words to list per method. Default 5.
        pieces (bool): Word pieces (tokens) instead of words. Default False.

    Returns:
        str: The lines, joined.
    """
    subject = result.subject
    lines = subject.listing_head(result)
    for name in result.methods:
        lines += ["", f"{name}: {result.details(name, brief=True)}"]  # one line
        lines += subject.method_lines(result, name, top, pieces)
    lines += subject.listing_notes(result, pieces)
    return "\n".join(lines)
