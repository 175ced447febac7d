"""The one explanation class of a classifier or a causal LM
(:class:`Explanation`, what :func:`captum_iba.explain` returns; also
importable from :mod:`captum_iba.app.explanation`), one method's scores
(:class:`MethodScores`), and :class:`Page`, what the page needs: a method's
scores looked up by name, its row of the page, the notebook's display and the
page written to a file (both from ``to_html``).

They live below both routes - :mod:`captum_iba.app.explanation` (a
classifier's prediction, and the entry that chooses the route) and
:mod:`captum_iba.app.llm_explanation` (a causal LM's answer) - which build
them; what was explained is the explanation's subject
(:mod:`captum_iba.app.subjects`)."""

import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from captum_iba._utils.io import atomic_write_text
from captum_iba._utils.ranking import is_near_flat
from captum_iba.app.llm_explain_text import near_flat_said
from captum_iba.app.subjects import Subject
from captum_iba.app.words import to_words

__all__ = ["Explanation", "MethodScores", "Page", "SpanScores"]


class Page:
    """A mix-in for an explanation whose ``to_html(pieces, full_page)`` makes
    its page and whose ``methods`` maps each method's name to its scores
    (:class:`~captum_iba.app.page.Explanation`, of a classifier or a
    causal LM alike)."""

    methods: Dict[str, Any]

    def _method(self, method: Optional[str]) -> Any:
        """The scores of ``method`` (any case; None: the first method's)."""
        if method is None:
            return next(iter(self.methods.values()))
        for name, result in self.methods.items():
            if name.lower() == method.lower():
                return result
        raise ValueError(f"no scores of {method!r}; have {list(self.methods)}")

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page (a whole HTML document, or a fragment for a notebook)."""
        raise NotImplementedError

    def _score_row(self, name: str, pieces: bool, **extra: Any) -> Any:
        """The page's row of ``name``: its words and scores, whether they are
        signed, what a score means and how it ran, with ``extra`` fields of
        :class:`~captum_iba.visualization.page.ScoreRow`."""
        from captum_iba.visualization.page import ScoreRow

        m = self.methods[name]
        return ScoreRow(
            method=name,
            words=self.tokens(pieces),  # type: ignore[attr-defined]
            scores=self.scores(name, pieces),  # type: ignore[attr-defined]
            signed=m.signed,
            meaning=m.meaning,
            details=self.details(name),  # type: ignore[attr-defined]
            **extra,
        )

    def _repr_html_(self) -> str:
        return self.to_html(full_page=False)

    def save_html(self, path: Union[str, Path], pieces: bool = False) -> Path:
        """Write the page to ``path`` (atomically); returns the path."""
        return atomic_write_text(Path(path), self.to_html(pieces))


@dataclass
class SpanScores:
    """One method's scores for one part of a causal LM's answer
    (``answer_span=``, :meth:`Explanation.spans`).

    Attributes:
        scores (list[float]): One per word piece, as
            :attr:`MethodScores.scores`, for the part's log-probability.
        sources (list[float]): One per source of the context, as
            :attr:`MethodScores.sources`.
    """

    scores: List[float]
    sources: List[float]


@dataclass
class MethodScores:
    """One method's scores of the word pieces explained, for a classifier or
    a causal LM.

    Attributes:
        method (str): The registered name (e.g. ``"iba-faithful"``).
        summary (str): The registry's one-line summary.
        scores (list[float]): One per word piece (a classifier's special
            tokens included; a causal LM: the prompt's own tokens); for a
            causal LM, for the whole answer.
        signed (bool): Whether a score has a direction (+ for the class or
            the answer).
        meaning (str): What one score means.
        seconds (float): Time the method took (the explanation's subject
            says how it was measured).
        word_reduction (str): ``"sum"`` or ``"mean"``: how a word's score is
            made from its pieces' (the scorer's
            :attr:`~captum_iba.evaluation.TokenScorer.word_reduction`).
        layer (int, optional): The encoder layer it used, for IBA on a
            classifier.
        settings (dict): The scorer's settings.
        no_ranking (str): Why the scores rank no word ("" when they do): the
            method's own finding (e.g. IBA after a classifier's layer whose
            first token alone is read, or most of a prompt's tokens tied), or
            flat scores (:func:`~captum_iba._utils.ranking.flat_reason`); then
            no top words are listed.
        per_token (list of list of float, optional): A causal LM's scores per
            output token, per piece (None when the method gives none, or
            they were not asked for; always None for a classifier).
        per_token_note (str): Why the method gives no per-token scores when
            asked for them ("" when it gives them).
        sources (list of float, optional): One score per source of a
            context (None without one): the method's own, or its token
            scores pooled (:func:`~captum_iba.evaluation.sources.source_scores`).
        source_pooling (str): How :attr:`sources` were made, in words.
        unit (str): The unit of the method's own scores
            (:attr:`~captum_iba.attr.batches.AnswerScores.unit`:
            ``"nats"``, ``"logit-probability"``, ...).
        by_source (bool): The method scores each source as such (``iba-sources``,
            ``loso``, ``at2``, ...): every token of a source holds the source's
            score, so its words tie within a source and rank nothing among
            themselves; its ranking is :attr:`sources`' (``no_ranking`` judges
            the sources, not the words).
        spans (list of SpanScores): Per part of the answer explained
            (``answer_span=``; :meth:`Explanation.spans`), its scores; empty
            without parts.
        span_seconds (float): The time the parts took (beside
            :attr:`seconds`, the whole answer's).
    """

    method: str
    summary: str
    scores: List[float]
    signed: bool
    meaning: str
    seconds: float
    word_reduction: str = "sum"
    layer: Optional[int] = None
    settings: Dict[str, Any] = field(default_factory=dict, repr=False)
    no_ranking: str = ""
    per_token: Optional[List[List[float]]] = None
    per_token_note: str = ""
    sources: Optional[List[float]] = None
    source_pooling: str = ""
    unit: str = ""
    by_source: bool = False
    spans: List[SpanScores] = field(default_factory=list)
    span_seconds: float = 0.0

    @property
    def flat(self) -> bool:
        """bool: The scores rank no word (:attr:`no_ranking` says why)."""
        return bool(self.no_ranking)


def _first_clause(summary: str) -> str:
    """A method's summary up to its first ``:``, ``;``, comma or parenthesis: what
    it is in a few words (issue 90, item 6: the listings repeated 6-10
    lines of it per method)."""
    marks = (": ", "; ", " (", ", ")
    cut = min((i for i in map(summary.find, marks) if i > 0), default=-1)
    return summary if cut < 0 else summary[:cut]


@dataclass
class Explanation(Page):
    """The result of :func:`~captum_iba.app.explanation.explain`, for a
    classifier or a causal LM: the pieces explained, the words they form,
    each method's scores, and what was explained (:attr:`subject`).

    One class for both kinds of model: a user gets the same methods
    (:meth:`tokens`, :meth:`scores`, :meth:`top`, :meth:`matrix`, the page of
    :meth:`to_html` and :meth:`save_html`, the listing of :meth:`to_text`)
    whatever the model. What differs by kind is what was explained - a
    text's predicted class, or a prompt's answer - and it is one object,
    the :attr:`subject` (:mod:`captum_iba.app.subjects`), which also renders
    what depends on it: the page's heading and facts, where a method ran,
    the notes, the terminal listing. The alternative, one class with the
    optional fields of both kinds, would leave half of them None on every
    result and a test of which half is set in every method; here no method
    asks the kind, and a new kind is a new subject. The subject's
    attributes read as the explanation's own: ``result.answer``,
    ``result.probabilities`` or ``result.predicted`` is
    ``result.subject.answer`` ...

    Attributes:
        subject (Subject): What was explained: a
            :class:`~captum_iba.app.subjects.ClassifierSubject` (``text``,
            ``pair``, ``segment``, ``labels``, ``probabilities``, ``target``,
            ``n_layers``) or a
            :class:`~captum_iba.app.subjects.PromptSubject` (``prompt``,
            ``chat``, ``answer``, ``output_tokens``, ``generated``,
            ``per_token``, ``odds``; a
            :class:`~captum_iba.app.subjects.ContextSubject` adds ``query``,
            ``sources``, ``spans``, ``split``).
        pieces (list[str]): The tokenizer's tokens explained: a classifier's
            special tokens included; a causal LM's prompt's own tokens.
        special (list[bool]): Per piece: a special token ([CLS], [SEP], ...),
            left out of what is shown (none of a prompt's).
        words (list[str]): The words, as written in the text.
        word_of_piece (list[int or None]): Per piece: its word's index (None
            for special tokens).
        model_name (str): What the model is, for the page.
        methods (dict[str, MethodScores]): By name, in the order asked.
        skipped (dict[str, str]): Methods left out, and why (e.g. an optional
            package is missing).
    """

    subject: Subject
    pieces: List[str]
    special: List[bool]
    words: List[str]
    word_of_piece: List[Optional[int]]
    model_name: str = ""
    methods: Dict[str, MethodScores] = field(default_factory=dict)
    skipped: Dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # only for a name the explanation lacks: its subject's public ones
        subject = self.__dict__.get("subject")
        if subject is None or name.startswith("_"):
            raise AttributeError(name)
        try:
            return getattr(subject, name)
        except AttributeError:
            raise AttributeError(
                f"an explanation of {subject.what} has no attribute {name!r}"
            ) from None

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(dir(self.subject)))

    @property
    def kind(self) -> str:
        """str: The kind of model explained, ``"classifier"`` or
        ``"causal-lm"`` (the name of the subject's
        :class:`~captum_iba.attr.kinds.ModelKind`)."""
        return self.subject.kind.name

    def tokens(self, pieces: bool = False) -> List[str]:
        """The words (or, with ``pieces``, the word pieces) shown, special
        tokens left out, in text order."""
        if pieces:
            return [p for p, s in zip(self.pieces, self.special) if not s]
        return list(self.words)

    def _shown(
        self, raw: Sequence[float], method: MethodScores, pieces: bool
    ) -> List[float]:
        """``raw`` per piece as shown: the pieces', or the words'."""
        if pieces:
            return [x for x, s in zip(raw, self.special) if not s]
        n = len(self.words)
        return to_words(raw, self.word_of_piece, n, method.word_reduction)

    def scores(self, method: Optional[str] = None, pieces: bool = False) -> List[float]:
        """One method's scores of :meth:`tokens` (default: the first method);
        for a causal LM, for the whole answer.

        A word's score is the sum of its pieces' scores for additive methods
        (integrated gradients, occlusion, ...: the word's share of the
        total), their mean for the others (IBA: every piece keeps some
        signal, so a sum would rank words by their number of pieces); the
        method's :attr:`MethodScores.word_reduction` says which.
        """
        found = self._method(method)
        return self._shown(found.scores, found, pieces)

    def matrix(
        self, method: Optional[str] = None, pieces: bool = False
    ) -> Optional[List[List[float]]]:
        """One method's output-token x :meth:`tokens` scores of a causal LM's
        answer (None when it gives none, and for a classifier)."""
        found = self._method(method)
        if found.per_token is None:
            return None
        return [self._shown(row, found, pieces) for row in found.per_token]

    def sources(self) -> List[str]:
        """The sources of the context explained (``context=``), in order.

        Raises:
            ValueError: For an explanation without a context.
        """
        return self.subject.source_texts()

    def source_scores(
        self, method: Optional[str] = None, span: Optional[int] = None
    ) -> List[float]:
        """One method's score of each of :meth:`sources` (default: the first
        method; higher = more used by the answer): its own score of a source
        (``iba-sources``: one mask weight per source), or its token scores
        pooled by its ``source_pooling`` (docs/context.rst); with ``span``,
        for that part of the answer (:meth:`spans`) instead of the whole.

        Raises:
            ValueError: For an explanation without a context, or a ``span``
                that is not the index of a part explained.
        """
        self.subject.source_texts()  # refuses an explanation without sources
        found = self._method(method)
        if span is None:
            return list(found.sources or [])
        self._check_span(span)
        return list(found.spans[span].sources)

    def spans(self) -> List[Any]:
        """The parts of the answer explained (``answer_span=``, in the
        answer's order): each an
        :class:`~captum_iba.app.answer_spans.AnswerSpan` (its characters of
        :attr:`answer`, its text, its tokens); empty when none was asked.

        Raises:
            ValueError: For an explanation without a context.
        """
        self.subject.source_texts()  # refuses an explanation without sources
        return list(self.subject.answer_spans)

    def _check_span(self, span: int) -> None:
        """Refuses a ``span`` that indexes no part explained."""
        from captum_iba.app.answer_spans import is_index

        n = len(self.subject.answer_spans)
        if not is_index(span) or not 0 <= span < n:
            said = (
                f"the parts are 0..{n - 1}"
                if n
                else "no part of the answer was explained (give answer_span=)"
            )
            raise ValueError(f"span={span!r}: {said}")

    def citations(
        self, k: int = 3, method: Optional[str] = None, share: float = 0.25
    ) -> List[Any]:
        """Each part of the answer (:meth:`spans`) with its top ``k``
        sources by one method (default: the first), as a cited paragraph
        reads: a source is cited when its score is above 0 (a source whose
        removal would not lower the part, or that a mask left out, is not)
        and at least ``share`` of the part's best score (so that a part
        cites what it used, not every source a hair above 0).

        Args:
            k (int): The most sources a part cites. Default 3.
            method (str, optional): The method (default: the first).
            share (float): The least score cited, as a share of the part's
                best, in [0, 1]. Default 0.25.

        Returns:
            list of Citation: One
            :class:`~captum_iba.app.answer_spans.Citation` per part: the
            part, and its sources best first, each a
            :class:`~captum_iba.app.answer_spans.CitedSource` ``(index,
            text, score)``: ``index`` in :meth:`sources` from 0, as Python
            indexes; ``.number`` (``index + 1``) is its ``[number]`` on the
            page and in the listing.

        Raises:
            ValueError: For an explanation without a context or without
                parts explained, ``k`` below 1 or ``share`` outside [0, 1].
        """
        from captum_iba.app.answer_spans import Citation, CitedSource, is_index

        if not is_index(k) or k < 1:
            raise ValueError(f"k must be a positive integer; got {k!r}")
        real = isinstance(share, numbers.Real) and not isinstance(share, bool)
        if not real or not 0.0 <= float(share) <= 1.0:  # NaN too (issue 90, 12)
            raise ValueError(f"share must be a number in [0, 1]; got {share!r}")
        k, share = int(k), float(share)
        texts, parts = self.sources(), self.spans()
        if not parts:
            raise ValueError(
                "no part of the answer was explained: give answer_span= "
                "('sentences', or (start, end) characters of the answer)"
            )
        found = self._method(method)
        out = []
        for part, scores in zip(parts, found.spans):
            values = scores.sources
            order = sorted(range(len(texts)), key=lambda i: -values[i])
            top = max(values[order[0]], 0.0) if order else 0.0
            best = [i for i in order if values[i] > 0 and values[i] >= share * top]
            best = best[:k]
            cited = [CitedSource(i, texts[i], scores.sources[i]) for i in best]
            out.append(Citation(part, cited))
        return out

    def breaks(self, pieces: bool = False) -> List[int]:
        """Positions in :meth:`tokens` where the pair's second text starts."""
        return self.subject.breaks(self, pieces)

    def top(
        self, k: int = 5, method: Optional[str] = None, pieces: bool = False
    ) -> List[Tuple[str, float]]:
        """The ``k`` highest-scoring words (or pieces) with their scores.

        Raises:
            ValueError: When the method's scores rank nothing
                (:attr:`MethodScores.no_ranking`, which the message gives).
        """
        found = self._method(method)
        if found.no_ranking:
            raise ValueError(f"{found.method}: no ranking: {found.no_ranking}")
        tokens, values = self.tokens(pieces), self.scores(method, pieces)
        order = sorted(range(len(tokens)), key=lambda i: -values[i])
        return [(tokens[i], values[i]) for i in order[:k]]

    def near_flat_methods(self) -> List[str]:
        """The methods whose scores rank, but nearly flat
        (:func:`~captum_iba._utils.ranking.is_near_flat`)."""
        return [
            name
            for name, m in self.methods.items()
            if not m.no_ranking and is_near_flat(m.scores)
        ]

    def near_flat(self, method: str) -> str:
        """What a nearly flat ranking of ``method`` means, with its range."""
        found = self._method(method)
        mask = found.method.lower().startswith("iba") and found.unit != "attention"
        return near_flat_said(found.scores, mask)

    def facts(self) -> List[Tuple[str, str]]:
        """What a reader needs beside the colours: the model, then what was
        explained (the prediction and the class; the prompt and the
        answer)."""
        return [("Model", self.model_name or "(given)")] + self.subject.facts()

    def notes(self, pieces: bool = False) -> List[str]:
        """How the tokens shown were formed, ...; the methods left out."""
        notes = self.subject.notes(self, pieces)
        return notes + [f"{m} left out: {why}" for m, why in self.skipped.items()]

    def details(self, method: str, brief: bool = False) -> str:
        """One line on how ``method`` ran (configuration, layer, the file of
        its learned weights, time); ``brief``: its summary's first clause
        only (the listings: the page and ``--help`` give it whole)."""
        m = self._method(method)
        where = self.subject.where(m)
        summary = _first_clause(m.summary) if brief else m.summary
        parts = [summary] if summary else []
        parts += [where] if where else []
        steps = m.settings.get("steps", (m.settings.get("options") or {}).get("steps"))
        if steps is not None:  # IBA's optimisation, as run
            parts.append(f"{steps} step" + ("" if steps == 1 else "s"))
        if m.settings.get("rest_share"):  # and one more on what it leaves
            share, least = m.settings["rest_share"], m.settings.get("rest_from", 0)
            if len(m.scores) >= least:
                parts.append(f"then 1 with its top {share:.0%} of the tokens deleted")
            else:  # issue 90, item 7: a short prompt takes no second step
                parts.append(
                    f"no step with its top {share:.0%} deleted (the prompt's "
                    f"{len(m.scores)} scored tokens are under its {least})"
                )
        if "precision" in m.settings:
            parts.append(str(m.settings["precision"]))
        if "weights" in m.settings:  # a learned method's file (AT2's heads)
            parts.append(f"weights {m.settings['weights']}")
        parts.append(f"{m.seconds:.1f} {self.subject.seconds_unit}")
        return "; ".join(parts)

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page: the facts, then one row per method (own scale each); for
        a causal LM, under each row its output-token x word matrix; for a
        context, first each method's row of sources, and before them, when
        parts of the answer were explained, each method's cited answer."""
        from captum_iba.visualization.page import explanation_html

        rows = list(self.subject.source_rows(self))
        for name, m in self.methods.items():
            matrix = self.matrix(name, pieces)
            labels = self.subject.matrix_labels() if matrix is not None else ()
            rows.append(
                self._score_row(
                    name,
                    pieces,
                    breaks=self.breaks(pieces),
                    matrix=matrix,
                    matrix_labels=labels,
                    no_ranking=m.no_ranking,
                )
            )
        return explanation_html(
            rows,
            **self.subject.heading(),
            facts=self.facts(),
            notes=self.notes(pieces),
            full_page=full_page,
            cited=self.subject.cited_answers(self),
        )

    def to_text(self, top: int = 5, pieces: bool = False) -> str:
        """The terminal listing (:func:`~captum_iba.app.listing.listing`,
        with the parts of what was explained: its subject's)."""
        from captum_iba.app.listing import listing

        return listing(self, top, pieces)

    def __str__(self) -> str:
        return self.to_text()
