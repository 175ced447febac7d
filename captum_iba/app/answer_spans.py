"""Parts of a causal LM's answer, each attributed to a context's sources:
citations for each sentence of an answer (issue 77, item 3).

``captum_iba.explain(query, model=M, context=..., answer_span=...)`` and
``captum-iba explain --context ... --answer-sentences`` (or
``--answer-span START:END``) explain, beside the whole answer, the
log-probability of each part of it: the answer is generated (or given) and
read whole, and a part's tokens are the objective, the answer's tokens
before them read as given, as the prompt is
(:attr:`~captum_iba.attr.batches.PromptBatch.explained`).

* :func:`check_answer_span` - ``answer_span=`` checked before anything
  loads: ``"sentences"`` or ``(start, end)`` characters of the answer;
* :func:`answer_spans` - the parts as whole tokens of the answer
  (:class:`AnswerSpan`): offsets that cut a token rounded outward, with one
  warning; offsets outside the answer, or that hold no word, refused;
* :class:`Citation` - a part with its top sources
  (:meth:`Explanation.citations <captum_iba.app.page.Explanation.citations>`);
* :func:`cited_paragraph` - the answer with each part's citation marks,
  as the terminal listing and the page show it.

Torch-free: the command line parses ``--answer-span`` with
:func:`parse_answer_span` before anything loads.
"""

import numbers
import operator
import re
import warnings
from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

from captum_iba._utils.common import user_stacklevel

__all__ = [
    "SENTENCES",
    "AnswerSpan",
    "Citation",
    "CitedSource",
    "answer_spans",
    "check_answer_span",
    "cited_paragraph",
    "is_index",
    "parse_answer_span",
]

#: ``answer_span="sentences"``: one part per sentence of the answer.
SENTENCES = "sentences"

#: ``answer_span=``'s value: none, ``"sentences"`` or ``(start, end)``.
SpanRequest = Union[None, str, Tuple[int, int]]


@dataclass(frozen=True)
class AnswerSpan:
    """A part of the answer whose log-probability is explained.

    Attributes:
        start (int): Its first character in the answer text
            (``result.answer``), leading whitespace left out.
        end (int): One past its last character (trailing whitespace left
            out).
        text (str): ``answer[start:end]``.
        tokens (tuple of int): ``(first, end)``: its tokens among the
            answer's (``result.output_tokens``); what is explained.
    """

    start: int
    end: int
    text: str
    tokens: Tuple[int, int]


class CitedSource(NamedTuple):
    """A source a part of the answer cites: a tuple ``(index, text,
    score)``, as before 0.4 - ``index`` in ``result.sources()`` and
    ``result.source_scores()``, from 0 as Python's lists; its text; the
    method's score of it for the part (its unit: the listing's and the
    page's, per method)."""

    index: int
    text: str
    score: float

    @property
    def number(self) -> int:
        """int: Its number on the page and in the listing, ``[number]``:
        ``index + 1`` (sources are numbered from 1 where they are read)."""
        return self.index + 1

    @property
    def mark(self) -> str:
        """str: Its citation mark, ``"[2]"`` for ``index`` 1."""
        return f"[{self.number}]"


@dataclass(frozen=True)
class Citation:
    """A part of the answer and the sources it cites.

    Attributes:
        span (AnswerSpan): The part.
        sources (list of CitedSource): Its top sources, best first: each a
            :class:`CitedSource` ``(index, text, score)`` - its ``index`` in
            ``result.sources()`` (from 0), its ``number`` on the page and in
            the listing (from 1: ``[number]``) -, only sources scoring above
            0 and at least a share of the part's best
            (:meth:`~captum_iba.app.page.Explanation.citations`).
    """

    span: AnswerSpan
    sources: List[CitedSource]

    @property
    def marks(self) -> str:
        """str: The citation marks, ``"[2][3]"`` (each source's
        :attr:`CitedSource.number`, from 1), or ``"[-]"`` when no source
        scores above 0."""
        if not self.sources:
            return "[-]"
        return "".join(CitedSource(*s).mark for s in self.sources)


def check_answer_span(value: Any, option: str = "answer_span=") -> SpanRequest:
    """``answer_span=`` checked before anything loads: None, ``"sentences"``,
    or two integers ``(start, end)`` with ``0 <= start < end`` (characters of
    the answer; checked against the answer by :func:`answer_spans`).

    Args:
        value: The value given.
        option (str): How it was given, for the messages.

    Returns:
        None, ``"sentences"`` or ``(int, int)``.

    Raises:
        ValueError: Naming ``option``, for any other value.
    """
    if value is None:
        return None
    said = f"{option}{value!r}" if option.endswith("=") else f"{option} {value!r}"
    if isinstance(value, str):
        if value.strip().lower() == SENTENCES:
            return SENTENCES
        raise ValueError(
            f"{said}: give 'sentences' (one attribution per sentence of the "
            "answer) or (start, end), characters of the answer"
        )
    pair = tuple(value) if isinstance(value, (tuple, list)) else ()
    whole = all(is_index(x) for x in pair)  # NumPy's integers too (issue 90)
    if len(pair) != 2 or not whole:
        raise ValueError(
            f"{said}: give (start, end), two integers - characters of the "
            "answer - or 'sentences'"
        )
    start, end = operator.index(pair[0]), operator.index(pair[1])
    if not 0 <= start < end:
        raise ValueError(
            f"{_named(option, (start, end))} is empty or starts before the "
            "answer: give 0 <= start < end, characters of the answer"
        )
    return start, end


#: ``--answer-span``'s value: two integers, digits only, around one colon.
_START_END = re.compile(r"([+-]?[0-9]+):([+-]?[0-9]+)")


def is_index(value: Any) -> bool:
    """Whether ``value`` is an integer (``int``, NumPy's, any
    :class:`numbers.Integral`), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def parse_answer_span(text: str) -> Tuple[int, int]:
    """``--answer-span START:END`` as ``(start, end)``.

    Raises:
        ValueError: For anything but two integers around one colon, with
            ``0 <= start < end``.
    """
    found = _START_END.fullmatch(str(text).strip())
    if found is None:  # int() would read "1_0" as 10 (issue 90, item 11)
        raise ValueError(
            f"--answer-span {text}: give START:END, two integers (characters of "
            "the answer, digits only), e.g. 0:24"
        )
    start, end = int(found.group(1)), int(found.group(2))
    found = check_answer_span((start, end), "--answer-span")
    assert isinstance(found, tuple)
    return found


def _edges(tokenizer: Any, ids: Sequence[int], text: str) -> List[Optional[int]]:
    """Where each token of the answer starts in ``text`` (its decoded
    text), and ``len(text)`` last: ``len(decode(ids[:k]))`` where that is a
    prefix of ``text``, None where it is not (a token inside a character
    written over several byte pieces: it goes with its neighbours)."""
    edges: List[Optional[int]] = [0]
    for k in range(1, len(ids)):
        prefix = tokenizer.decode(list(ids[:k]))
        edges.append(len(prefix) if text.startswith(prefix) else None)
    edges.append(len(text))
    return edges


def _units(edges: Sequence[Optional[int]]) -> List[Tuple[int, int, int, int]]:
    """``(first token, end token, start char, end char)`` of each run of
    tokens between two known edges."""
    known = [k for k, e in enumerate(edges) if e is not None]
    return [(a, b, edges[a], edges[b]) for a, b in zip(known, known[1:])]  # type: ignore[misc]


def _core(text: str, start: int, end: int) -> Tuple[int, int]:
    """``text[start:end]`` without its leading and trailing whitespace, as
    characters (empty, ``start == end``, for whitespace only)."""
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    core = piece.strip()
    return start + lead, start + lead + len(core)


def answer_spans(
    request: SpanRequest,
    tokenizer: Any,
    ids: Sequence[int],
    option: str = "answer_span=",
) -> List[AnswerSpan]:
    """The parts of the answer ``request`` names, as whole tokens.

    A part is the tokens whose words (their characters without surrounding
    whitespace) overlap its characters; offsets that cut a token are rounded
    outward to whole tokens, with one warning. ``"sentences"`` cuts the
    answer as a context's sentences are cut
    (:func:`~captum_iba.evaluation.sources.split_sources`: a sentence ends at
    ``.``, ``!`` or ``?`` before a space, or at a line break).

    Args:
        request: :func:`check_answer_span`'s value (not None).
        tokenizer: The model's tokenizer.
        ids (Sequence[int]): The answer's token ids; its text is their
            decoding (``result.answer``).
        option (str): How the request was given, for the messages.

    Returns:
        list of AnswerSpan: The parts, in the answer's order.

    Raises:
        ValueError: Naming ``option``: offsets past the answer's end, a
            part that holds no word, an answer without a sentence.
    """
    from captum_iba.evaluation.sources import split_sources

    text = tokenizer.decode(list(ids))
    if request == SENTENCES:
        wanted = split_sources(text, "sentence")
        if not wanted:
            raise ValueError(
                f"{_named(option, request)}: the answer {text!r} holds no "
                "sentence (no word): there is nothing to attribute"
            )
    else:
        assert isinstance(request, tuple)
        start, end = request
        if end > len(text):
            raise ValueError(
                f"{_named(option, request)} lies outside the answer's {len(text)} "
                f"characters ({text!r}): give characters of the answer"
            )
        wanted = [(start, end)]
    units = _units(_edges(tokenizer, ids, text))
    spans, cut = [], None
    for a, b in wanted:
        chosen = []
        for unit in units:
            c0, c1 = _core(text, unit[2], unit[3])
            if c0 < c1 and c0 < b and c1 > a:
                chosen.append(unit)
                if cut is None and (c0 < a or c1 > b):
                    cut = (a, b, text[c0:c1])
        if not chosen:
            raise ValueError(
                f"{_named(option, (a, b))} holds no word of the answer "
                f"({text[a:b]!r}): give characters of its words"
            )
        s0 = _core(text, chosen[0][2], chosen[0][3])[0]
        s1 = _core(text, chosen[-1][2], chosen[-1][3])[1]
        spans.append(AnswerSpan(s0, s1, text[s0:s1], (chosen[0][0], chosen[-1][1])))
    if cut is not None:
        a, b, token = cut
        warnings.warn(
            f"{_named(option, (a, b))} cuts the answer's token {token!r} in two: "
            "the part is rounded outward to whole tokens (a token's "
            "log-probability cannot be split)",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return spans


def _named(option: str, request: Any) -> str:
    """How a message names the request: ``answer_span=(3, 9)``,
    ``answer_span='sentences'``, ``--answer-span 3:9`` or
    ``--answer-sentences`` (a sentence's characters: ``... (3, 9)``)."""
    if request == SENTENCES:
        return f"{option}'sentences'" if option.endswith("=") else option
    a, b = request
    if option.endswith("="):
        return f"{option}({a}, {b})"
    if option == "--answer-span":
        return f"{option} {a}:{b}"
    return f"{option} (the sentence at characters {a}-{b})"


def cited_paragraph(answer: str, citations: Sequence[Citation]) -> str:
    """The answer with each part's citation marks after it: ``"Lars moved
    to Lisbon. [2] He works as a baker. [3]"``.

    Args:
        answer (str): The answer text.
        citations (Sequence[Citation]): Its parts (in order) and their
            sources.

    Returns:
        str: The cited answer, stripped.
    """
    out, at = [], 0
    for cited in sorted(citations, key=lambda c: c.span.end):
        end = max(cited.span.end, at)
        out += [answer[at:end], f" {cited.marks}"]
        at = end
    out.append(answer[at:])
    return "".join(out).strip()
