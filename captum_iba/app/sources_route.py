"""Which sources of a context a causal LM's answer used: the route of
:data:`~captum_iba.app.explain_request.SOURCES` - an answer's
(:mod:`~captum_iba.app.answer_route`) with the sources' parts.

* prepare - methods that score sources allowed; ``answer_span`` checked
  (:func:`~captum_iba.app.answer_spans.check_answer_span`) against the
  methods (a method must explain a part of an answer: its registry entry's
  ``spans`` fact); a source's span that cuts a token warned; the answer's
  parts found once the answer is known (a given one: before the weights);
  the batch scores and removes the sources' tokens only
  (:func:`~captum_iba.evaluation.sources.with_sources`);
* score - with the tokens' scores, one per source
  (:func:`~captum_iba.evaluation.sources.source_scores`, or the method's
  own); each part of the answer scored on its own (:func:`_scored_parts`);
* present - a :class:`~captum_iba.app.subjects.ContextSubject` (the query,
  the sources, the parts of the answer).
"""

import time
from typing import Any, Dict, Sequence

from captum_iba._utils.ranking import check_finite
from captum_iba.app.answer_route import Answer, methods_with
from captum_iba.app.answer_spans import AnswerSpan, answer_spans, check_answer_span
from captum_iba.app.context_explain import warn_cut_tokens
from captum_iba.app.page import Explanation, MethodScores, SpanScores
from captum_iba.app.subjects import ContextSubject

__all__ = ["Sources"]


class Sources(Answer):
    """A causal LM's answer to a query about a context, prepared as an
    answer (:class:`~captum_iba.app.answer_route.Answer`) whose scored
    tokens are the sources', with the parts of the answer asked for."""

    #: The parts of the answer (``answer_span``) to attribute on their own.
    parts: Sequence[AnswerSpan] = ()

    def check(self) -> None:
        """``answer_span`` (its form, then the methods: each must explain a
        part of an answer); kept for :meth:`check_answer`."""
        request = self.request
        option = request.labels[1]
        self.span_request = check_answer_span(request.answer_span, option)
        if self.span_request is None:
            return
        for name in methods_with(request.methods, "spans", has=False):
            raise ValueError(
                f"{name} explains the whole answer only (its explainer or package "
                f"reads the whole response), so it cannot attribute {option}; "
                "leave it out, or use another method (iba-surrogate, loso, "
                "iba-deletion, contextcite-32, ...)"
            )

    def before_weights(self) -> None:
        """A warning when a source's span cuts a token
        (:func:`~captum_iba.app.context_explain.warn_cut_tokens`)."""
        warn_cut_tokens(self.tokenizer, self.request.context, self.chat)

    def check_answer(self, batch: Any) -> None:
        """The answer's checks, then its parts
        (:func:`~captum_iba.app.answer_spans.answer_spans`)."""
        super().check_answer(batch)
        if self.span_request is not None:
            self.parts = answer_spans(
                self.span_request,
                self.tokenizer,
                batch.answer_ids(0),
                self.request.labels[1],
            )

    def explained_rows(self, batch: Any) -> Any:
        """Every method scores and removes the sources' tokens only."""
        from captum_iba.evaluation.sources import with_sources

        context = self.request.context
        return with_sources(self.tokenizer, batch, [context.spans], self.chat)

    def subject(self, facts: Dict[str, Any]) -> ContextSubject:
        """What was explained: the answer to the query, its sources and the
        parts of the answer."""
        context = self.request.context
        return ContextSubject(
            **facts,
            query=context.query,
            sources=context.sources,
            spans=list(context.spans),
            split=context.split,
            answer_spans=list(self.parts),
        )

    def more_scores(self, scores: MethodScores, found: Any, scorer: Any) -> None:
        """One score per source: the method's own, or its tokens' pooled."""
        from captum_iba.evaluation.sources import POOLING_WORDS, source_scores

        pooling = scorer.source_pooling
        own = source_scores(found, self.batch, pooling)[0]
        check_finite(own, f"{scores.method}'s source scores")
        scores.sources = own.tolist()
        scores.by_source = found.sources is not None
        scores.source_pooling = (
            "its own score of each source"
            if scores.by_source
            else POOLING_WORDS[pooling]
        )

    def score(self, result: Explanation, name: str, scorer: Any) -> None:
        """The answer's scores (:meth:`Answer.score`), then each part's."""
        super().score(result, name, scorer)
        if self.parts:
            _scored_parts(result.methods[name], scorer, self.batch, self.parts)


def _scored_parts(
    scores: MethodScores, scorer: Any, batch: Any, parts: Sequence[AnswerSpan]
) -> None:
    """One method's scores of each part of the answer (``scores.spans``):
    every part not the whole answer in one batch of the prompt's row
    repeated, each row explaining its part
    (:meth:`~captum_iba.attr.batches.PromptBatch.explaining`); a part that
    is the whole answer takes the whole answer's scores."""
    n = len(batch.answer_ids(0))
    todo = [k for k, p in enumerate(parts) if p.tokens != (0, n)]
    found: Dict[int, SpanScores] = {
        k: SpanScores(list(scores.scores), list(scores.sources or []))
        for k, p in enumerate(parts)
        if k not in todo
    }
    start = time.process_time()
    if todo:
        rows = batch.rows([0] * len(todo)).explaining([parts[k].tokens for k in todo])
        done = scorer.attribute(rows.with_each_token(False))
        keep = rows.scored[0]
        check_finite(done.answer[:, keep], f"{scores.method}'s scores of the parts")
        own = None
        if rows.sources is not None:
            from captum_iba.evaluation.sources import source_scores

            own = source_scores(done, rows, scorer.source_pooling)
            check_finite(own, f"{scores.method}'s source scores of the parts")
        for row, k in enumerate(todo):
            found[k] = SpanScores(
                done.answer[row][keep].tolist(),
                [] if own is None else own[row].tolist(),
            )
    scores.spans = [found[k] for k in range(len(parts))]
    scores.span_seconds = time.process_time() - start
