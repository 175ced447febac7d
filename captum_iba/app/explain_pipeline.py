"""One explain, three questions: prepare, score, present.

Every explain - a classifier's prediction, a causal LM's answer, the sources
of an answer; from Python (:func:`captum_iba.explain`,
:func:`captum_iba.explain_answer`) or the command line - runs
:func:`explained` on its checked request
(:class:`~captum_iba.app.explain_request.ExplainRequest`):

1. **prepare** - the request's question prepares it
   (:meth:`~captum_iba.app.explain_request.Question.prepare`): the inputs
   checked against the model's configuration and tokenizer, the model and
   tokenizer loaded, the batch built;
2. **score** - every method built once and run on the batch, its scores
   checked (:meth:`Prepared.build`, :meth:`Prepared.score`);
3. **present** - the result, an :class:`~captum_iba.app.page.Explanation`
   whose subject, the question's (:meth:`Prepared.result`), gives the
   per-question parts of the one listing (:mod:`captum_iba.app.listing`) and
   the one page (:meth:`~captum_iba.app.page.Explanation.to_html`).

What differs between the questions is a :class:`Prepared`: a prediction's
(:mod:`~captum_iba.app.prediction_route`), an answer's
(:mod:`~captum_iba.app.answer_route`), the sources of an answer's
(:mod:`~captum_iba.app.sources_route`, an answer's with the sources' parts).
Nothing here, nor in them, decides the question again.
"""

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

__all__ = ["Prepared", "Supplied", "explained"]


@dataclass(frozen=True)
class Supplied:
    """What the caller supplies beside the request.

    Attributes:
        loaded (tuple, optional): The model and its tokenizer, already
            loaded (the command line's classifier, after its checks); None:
            the question's route loads them.
        explainer (Callable, optional): ``iba-amortized`` 's explainer
            resource: for a classifier a function of the layer (and the
            objective); for a causal LM a function of the loaded model, its
            tokenizer and the chat choice that gives one.
        prior_data (optional): A classifier's priors' data.
    """

    loaded: Optional[Tuple[Any, Any]] = None
    explainer: Any = None
    prior_data: Any = None


class Prepared:
    """A request prepared by its question: the model loaded, the batch
    built. :func:`explained` asks it, in this order, for the methods
    (:meth:`build`), the result before any score (:meth:`result`), each
    method's scores (:meth:`score`), and what is said after them all
    (:meth:`finish`). It is its own context manager (a route that holds
    something while the explain runs - a classifier's eval mode - gives
    one of its own)."""

    def __enter__(self) -> "Prepared":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def build(self) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """The scorers by name, and the methods left out with the reason
        (an optional package missing)."""
        raise NotImplementedError

    def result(self, skipped: Dict[str, str]) -> Any:
        """The :class:`~captum_iba.app.page.Explanation` before any
        method's scores: what was explained (its subject), the pieces and
        the words."""
        raise NotImplementedError

    def score(self, result: Any, name: str, scorer: Any) -> None:
        """One method's scores of the batch, checked, into
        ``result.methods[name]``, with why they rank nothing (if so)."""
        raise NotImplementedError

    def finish(self, result: Any) -> None:
        """What is said once every method has scored (nothing here)."""


def explained(request: Any, supplied: Optional[Supplied] = None) -> Any:
    """A checked request explained: prepared by its question, scored by
    every method, presented as one :class:`~captum_iba.app.page.Explanation`.

    Args:
        request (ExplainRequest): The request, built and checked once by
            the entry.
        supplied (Supplied, optional): What the caller supplies beside it.

    Returns:
        Explanation: What was explained and every method's scores.
    """
    with request.question.prepare(request, supplied or Supplied()) as prepared:
        scorers, skipped = prepared.build()
        result = prepared.result(skipped)
        for name, scorer in scorers.items():
            prepared.score(result, name, scorer)
        prepared.finish(result)
    return result
