"""What an explanation explains - a classifier's prediction or a causal LM's
answer -: the one place where the two kinds of explanation differ.

:class:`~captum_iba.app.page.Explanation` is one class for both kinds
of model. Its pieces, words, methods' scores, page and listing entry points
are the same; what differs is *what was explained*, and that is its
``subject``:

- a :class:`ClassifierSubject`: the text (and the pair's second text), the
  classes, their probabilities and the class explained;
- a :class:`PromptSubject`: the prompt, the answer explained and its tokens,
  whether the answer was the model's own, how much the model wanted it;
- a :class:`ContextSubject`: a prompt made of a query and a context of
  sources (:mod:`captum_iba.app.context_explain`), whose answer is attributed
  to the sources as well as to the words.

A subject holds those facts and answers the few questions whose answer
depends on the kind (:class:`Subject`): the page's heading and facts, where a
method ran, the notes under the page, where a pair's second text starts, the
labels of a method's per-output-token rows, the sources of a context, and the
parts of the terminal listing (:func:`~captum_iba.app.listing.listing`). The
explanation asks its subject and never its kind: a context to attribute is one
more subject here. Neither subject imports
:mod:`captum_iba.app.explanation`: each reads an explanation through its
public methods (as the listings do).
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Tuple

from captum_iba.app.llm_explain_text import (
    WHOLE_ANSWER_ONLY,
    answer_head,
    answer_lines,
    answer_notes,
    skipped_lines,
)
from captum_iba.app.llm_odds import READING_NOTE, AnswerProbability
from captum_iba.app.words import form_words_note
from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER, ModelKind

__all__ = ["ClassifierSubject", "ContextSubject", "PromptSubject", "Subject"]


class Subject:
    """What an explanation explains, and what of its page and listing
    depends on it. A subclass is a dataclass of the facts of one kind of
    model, which an :class:`~captum_iba.app.page.Explanation` also
    shows as its own attributes (``result.answer`` is
    ``result.subject.answer``).

    Attributes:
        kind (ModelKind): The kind of model explained (its object,
            :data:`~captum_iba.attr.kinds.CLASSIFIER` or
            :data:`~captum_iba.attr.kinds.CAUSAL_LM`).
        what (str): What was explained, in words.
        seconds_unit (str): How a method's time was measured (``"s"``: wall
            clock; ``"CPU-s"``: the process's CPU time).
    """

    kind: ClassVar[ModelKind]
    what: ClassVar[str] = ""
    seconds_unit: ClassVar[str] = "s"

    def heading(self) -> Dict[str, str]:
        """The page's heading: the keyword arguments ``title`` (when not the
        page's own) and ``text`` of
        :func:`~captum_iba.visualization.page.explanation_html`."""
        raise NotImplementedError

    def facts(self) -> List[Tuple[str, str]]:
        """The facts under the page's heading, after the model's name."""
        raise NotImplementedError

    def where(self, method: Any) -> str:
        """Where ``method`` (a :class:`~captum_iba.app.page.MethodScores`)
        ran, for its line of details ("" when it says nothing)."""
        return ""

    def notes(self, result: Any, pieces: bool) -> List[str]:
        """The notes under the page (the methods left out follow them)."""
        raise NotImplementedError

    def breaks(self, result: Any, pieces: bool) -> List[int]:
        """Positions in ``result.tokens(pieces)`` where a second text
        starts."""
        return []

    def matrix_labels(self) -> List[str]:
        """The labels of a method's per-output-token rows (its ``matrix``)."""
        return []

    def source_texts(self) -> List[str]:
        """The sources of the context explained.

        Raises:
            ValueError: For a subject without a context (all but
                :class:`ContextSubject`).
        """
        raise ValueError(
            f"an explanation of {self.what} has no sources: explain a causal LM's "
            "answer with context= (captum_iba.explain(query, model=..., "
            "context=[source, ...]))"
        )

    def source_rows(self, result: Any) -> List[Any]:
        """The page's rows of the sources, before the words' (none here)."""
        return []

    def cited_answers(self, result: Any) -> List[Any]:
        """The page's cited paragraphs of the answer's parts
        (:class:`~captum_iba.visualization.page.CitedAnswer`; none here)."""
        return []

    def listing_head(self, result: Any) -> List[str]:
        """The head of the terminal listing
        (:func:`~captum_iba.app.listing.listing`): what was explained."""
        raise NotImplementedError

    def method_lines(self, result: Any, name: str, top: int, pieces: bool) -> List[str]:
        """The listing's lines of method ``name``, under its name."""
        raise NotImplementedError

    def listing_notes(self, result: Any, pieces: bool) -> List[str]:
        """The listing's end (its notes, the methods left out)."""
        raise NotImplementedError


@dataclass
class ClassifierSubject(Subject):
    """A classifier's prediction of a text (or a pair of texts).

    Attributes:
        text (str): The text explained.
        pair (str, optional): The second text of a pair.
        segment (list of int): Per word: 0 in ``text``, 1 in ``pair``.
        labels (list of str): The model's class names by index.
        probabilities (list of float): The predicted probability of each
            class.
        target (int): The class explained.
        n_layers (int, optional): The model's encoder layers.
    """

    kind: ClassVar[ModelKind] = CLASSIFIER
    what: ClassVar[str] = "a classifier's prediction"
    #: Why function words or punctuation can rank first (issue 90, item 17).
    form_words_why: ClassVar[str] = (
        "the model's prediction used them (a classifier's attention often "
        "rests on sentence boundaries and small words); a faithful method "
        "shows that, and --compare shows whether another method agrees."
    )

    text: str
    pair: Optional[str]
    segment: List[int]
    labels: List[str]
    probabilities: List[float]
    target: int
    n_layers: Optional[int] = None

    @property
    def predicted(self) -> int:
        """int: The predicted class."""
        return max(range(len(self.probabilities)), key=self.probabilities.__getitem__)

    def label(self, index: int) -> str:
        """The name of class ``index``."""
        return self.labels[index] if 0 <= index < len(self.labels) else str(index)

    def heading(self) -> Dict[str, str]:
        return {"text": self.text}

    def facts(self) -> List[Tuple[str, str]]:
        """The prediction and the class explained (and the second text)."""
        pred = self.predicted
        target = f"{self.label(self.target)} (class {self.target}"
        target += ", the predicted class)" if self.target == pred else ")"
        facts = [
            ("Prediction", f"{self.label(pred)} (p = {self.probabilities[pred]:.3f})"),
            ("Explained class", target),
        ]
        if self.pair is not None:
            facts.append(("Second text", self.pair))
        return facts

    def where(self, method: Any) -> str:
        """The encoder layer of IBA's bottleneck."""
        if method.layer is None:
            return ""
        of = f" of 0..{self.n_layers - 1}" if self.n_layers else ""
        return f"after encoder layer {method.layer}{of}"

    def notes(self, result: Any, pieces: bool) -> List[str]:
        """How the tokens shown were formed."""
        if pieces:
            shown = "Word pieces as the tokenizer cut the text."
        else:
            how = {"sum": "the sum", "mean": "the mean"}
            by = "; ".join(
                f"{name}: {how.get(m.word_reduction, m.word_reduction)}"
                for name, m in result.methods.items()
            )
            shown = f"A word's score is made from its word pieces' scores ({by})."
        small = form_words_note(result, pieces, self.form_words_why)
        notes = [f"{shown} Special tokens ([CLS], [SEP], ...) are left out."]
        return notes + ([small] if small else [])

    def breaks(self, result: Any, pieces: bool) -> List[int]:
        """Where the pair's second text starts ([] for one text)."""
        if self.pair is None:
            return []
        if pieces:
            segs = [
                self.segment[w]
                for w, s in zip(result.word_of_piece, result.special)
                if not s and w is not None
            ]
        else:
            segs = list(self.segment)
        return [i for i in range(1, len(segs)) if segs[i] != segs[i - 1]]

    def listing_head(self, result: Any) -> List[str]:
        """:func:`~captum_iba.app.explain_text.prediction_head`."""
        from captum_iba.app.explain_text import prediction_head

        return prediction_head(result)

    def method_lines(self, result: Any, name: str, top: int, pieces: bool) -> List[str]:
        """:func:`~captum_iba.app.explain_text.prediction_lines`."""
        from captum_iba.app.explain_text import prediction_lines

        return prediction_lines(result, name, top, pieces)

    def listing_notes(self, result: Any, pieces: bool) -> List[str]:
        """:func:`~captum_iba.app.explain_text.prediction_notes`."""
        from captum_iba.app.explain_text import prediction_notes

        return prediction_notes(result, pieces)


@dataclass
class PromptSubject(Subject):
    """A causal LM's answer to a prompt.

    Attributes:
        prompt (str): The prompt as given.
        chat (bool): Whether it was wrapped as a user turn of the chat
            template.
        answer (str): The answer explained.
        output_tokens (list of str): Its tokens, as decoded.
        generated (bool): The model's greedy answer (else given).
        per_token (bool): Whether per-output-token scores were asked for.
        odds (AnswerProbability, optional): How much the model wanted the
            answer (:func:`~captum_iba.app.llm_odds.answer_odds`).
    """

    kind: ClassVar[ModelKind] = CAUSAL_LM
    what: ClassVar[str] = "a causal LM's answer"
    #: Why function words or punctuation can rank first (issue 90, item 17).
    form_words_why: ClassVar[str] = (
        "a whole answer's log-probability rests mostly on its form and on the "
        "words it copies from the prompt, not only on the content words a "
        "reader looks for. Per output token (--per-token, per_token=True) "
        "shows which words each word of the answer needed."
    )
    seconds_unit: ClassVar[str] = "CPU-s"

    prompt: str
    chat: bool
    answer: str
    output_tokens: List[str]
    generated: bool
    per_token: bool = False
    odds: Optional[AnswerProbability] = None

    def heading(self) -> Dict[str, str]:
        return {
            "title": "Which words of the prompt did the answer need?",
            "text": self.prompt,
        }

    def length(self) -> str:
        """The answer's number of tokens, in words ("1 token", "3 tokens")."""
        n = len(self.output_tokens)
        return f"{n} token" if n == 1 else f"{n} tokens"

    def facts(self) -> List[Tuple[str, str]]:
        """The prompt, the answer and how it was made; its probability."""
        how = "the model's greedy answer" if self.generated else "given"
        return [
            ("Prompt", self.prompt + ("  (as a user turn)" if self.chat else "")),
            ("Answer explained", f"{self.answer!r} ({how}, {self.length()})"),
        ] + (self.odds.said() if self.odds is not None else [])  # fmt: skip

    def where(self, method: Any) -> str:
        """The layer of IBA's bottleneck."""
        layer = method.settings.get("layer")
        return "" if layer is None else f"at {layer}"

    def notes(self, result: Any, pieces: bool) -> List[str]:
        """How the words and the matrix were made; the methods without
        per-token scores or without a ranking, or with a nearly flat one;
        how to read the answer's probability."""
        methods = result.methods.items()
        how = "; ".join(f"{n}: {m.word_reduction}" for n, m in methods)
        shown = (
            "Tokens as the tokenizer cut the prompt."
            if pieces
            else f"A word's score is made from its tokens' scores ({how})."
        )
        notes = [
            f"{shown} Only the prompt's own tokens are scored: the chat template "
            "and special tokens are neither removed nor scored.",
            "The row of words: the scores for the whole answer (its total "
            "log-probability); the table under it: for each output token.",
        ]
        notes += [
            f"{name}: no per-token scores ({m.per_token_note or WHOLE_ANSWER_ONLY})."
            for name, m in methods
            if m.per_token is None
        ]
        notes += [
            f"{name}: no ranking: {m.no_ranking}."
            for name, m in methods
            if m.no_ranking
        ]
        notes += [
            f"{name}: {result.near_flat(name)}" for name in result.near_flat_methods()
        ]
        small = form_words_note(result, pieces, self.form_words_why)
        notes += [small] if small else []
        return notes + ([READING_NOTE] if self.odds is not None else [])

    def matrix_labels(self) -> List[str]:
        """The answer's tokens."""
        return list(self.output_tokens)

    def listing_head(self, result: Any) -> List[str]:
        """:func:`~captum_iba.app.llm_explain_text.answer_head`."""
        return answer_head(result)

    def method_lines(self, result: Any, name: str, top: int, pieces: bool) -> List[str]:
        """:func:`~captum_iba.app.llm_explain_text.answer_lines`."""
        return answer_lines(result, name, top, pieces)

    def listing_notes(self, result: Any, pieces: bool) -> List[str]:
        """:func:`~captum_iba.app.llm_explain_text.answer_notes`."""
        return answer_notes(result, pieces)


@dataclass
class ContextSubject(PromptSubject):
    """A causal LM's answer to a query about a context of sources
    (:func:`~captum_iba.app.context_explain.context_prompt_of`): a
    :class:`PromptSubject` whose prompt is the query and the context in
    ContextCite's layout, and whose answer is attributed to each source.

    Attributes:
        query (str): The question.
        sources (list of str): The sources' texts, in order.
        spans (list of (int, int)): Where each lies in ``prompt``.
        split (str): How the sources were made (``"a list, joined by a blank
            line"``, ``"spans"``,
            ``"sentence"``, ``"documents"``, ``"lines"``, ``"turns"``).
        answer_spans (list of AnswerSpan): The parts of the answer also
            explained (``answer_span=``;
            :class:`~captum_iba.app.answer_spans.AnswerSpan`), empty when
            none.
    """

    what: ClassVar[str] = "a causal LM's answer to a context"

    query: str = ""
    sources: List[str] = field(default_factory=list)
    spans: List[Tuple[int, int]] = field(default_factory=list)
    split: str = "list"
    answer_spans: List[Any] = field(default_factory=list)

    def heading(self) -> Dict[str, str]:
        return {
            "title": "Which source of the context did the answer use?",
            "text": self.query,
        }

    def facts(self) -> List[Tuple[str, str]]:
        """The context's sources, the answer; its probability (the query is
        the page's text)."""
        layout = "ContextCite's layout" + (", as a user turn" if self.chat else "")
        context = f"{len(self.sources)} sources ({self.split}), in {layout}"
        return [("Context", context)] + super().facts()[1:]

    def notes(self, result: Any, pieces: bool) -> List[str]:
        """How a source's score was made; the prompt's notes."""
        how = "; ".join(f"{n}: {m.source_pooling}" for n, m in result.methods.items())
        return [
            f"The sources' rows: one score per source ({how}); only the sources' "
            "tokens are scored and removed, the query and the layout stay."
        ] + super().notes(result, pieces)

    def source_texts(self) -> List[str]:
        """The sources' texts."""
        return list(self.sources)

    def source_rows(self, result: Any) -> List[Any]:
        """:func:`~captum_iba.app.context_explain.source_rows`."""
        from captum_iba.app.context_explain import source_rows

        return source_rows(result)

    def cited_answers(self, result: Any) -> List[Any]:
        """:func:`~captum_iba.app.context_explain.cited_answers`."""
        from captum_iba.app.context_explain import cited_answers

        return cited_answers(result)

    def listing_head(self, result: Any) -> List[str]:
        """:func:`~captum_iba.app.context_explain.sources_head`."""
        from captum_iba.app.context_explain import sources_head

        return sources_head(result)

    def method_lines(self, result: Any, name: str, top: int, pieces: bool) -> List[str]:
        """:func:`~captum_iba.app.context_explain.sources_lines`."""
        from captum_iba.app.context_explain import sources_lines

        return sources_lines(result, name, top, pieces)

    def listing_notes(self, result: Any, pieces: bool) -> List[str]:
        """The methods left out."""
        return skipped_lines(result)
