"""A context to attribute an answer to: which source of it - a sentence, a
document, a line, a chat turn - did a causal LM's answer use.

``captum_iba.explain(query, model=M, context=...)`` and ``captum-iba explain
--context FILE_OR_TEXT --query Q --model M`` lay the query and its context
out as ContextCite does (:data:`~captum_iba.app.context_tasks.LAYOUT`:
``"Context: ...\\n\\nQuery: ..."``; a chat model reads it as its user turn)
and explain the model's answer to it, with one score per source beside the
token scores:

* :func:`context_prompt_of` - the prompt and its sources, every check that
  needs no model made (at least two sources, none empty, none overlapping, a
  query that holds text);
* :func:`read_context` - ``--context``: a file's text when the argument
  names a file, else the argument itself (a folder, or a path-like name
  that names nothing, refused);
* :func:`sources_head`, :func:`sources_lines` and :func:`source_rows` - the
  parts of the one terminal listing (:func:`~captum_iba.app.listing.listing`:
  each method's sources ranked, with their text) and of the page (the
  sources coloured by score), read through the explanation's public
  methods;
* :func:`cited_answers` - with parts of the answer explained
  (``answer_span``), the page's cited paragraphs (the listing's are in
  :func:`sources_lines`): each part followed by the sources it cites.
"""

import re
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Sequence, Tuple, Union

from captum_iba._utils.common import user_stacklevel
from captum_iba.app.context_tasks import JOIN, LAYOUT
from captum_iba.app.errors import CLIError
from captum_iba.app.llm_explain_text import per_token_lines
from captum_iba.app.words import blank, shown
from captum_iba.evaluation.sources import check_sources, split_sources

__all__ = [
    "CITED",
    "SOURCE_SPLITS",
    "ContextPrompt",
    "cited_answers",
    "context_prompt_of",
    "read_context",
    "source_rows",
    "sources_head",
    "sources_lines",
    "warn_cut_tokens",
]

Span = Tuple[int, int]

#: How a context given as one text is cut into sources (``sources=``,
#: ``--sources``) -> :func:`~captum_iba.evaluation.sources.split_sources`'s
#: ``by``: ``"documents"`` are paragraphs (separated by blank lines),
#: ``"turns"`` chat turns (a line opening with a speaker's label, ``User:``).
SOURCE_SPLITS = {
    "sentence": "sentence",
    "documents": "paragraph",
    "lines": "line",
    "turns": "turn",
}

#: How long a source's text is in the listing.
_SHORT = 72


@dataclass(frozen=True)
class ContextPrompt:
    """A query and its context, laid out as one prompt.

    Attributes:
        query (str): The question.
        text (str): The whole prompt (the layout filled).
        spans (tuple of (int, int)): Each source's characters in ``text``.
        split (str): How the sources were made (``"a list, joined by a
            blank line"``: one per item given, and how they were joined;
            ``"spans"``: given as spans; else a key of
            :data:`SOURCE_SPLITS`).
    """

    query: str
    text: str
    spans: Tuple[Span, ...]
    split: str

    @property
    def sources(self) -> List[str]:
        """list of str: The sources' texts, in order."""
        return [self.text[a:b] for a, b in self.spans]


#: What joins the items of a context given as a list, by the split that
#: would cut the joined text back into them (``sources=``): a list of
#: documents (the default) is a notes file's text, blank lines between its
#: items; a list of sentences is a text of sentences, joined with spaces as
#: ContextCite joins them.
LIST_JOINS = {"documents": JOIN, "sentence": " ", "lines": "\n", "turns": "\n"}

#: How the listing and the page name each list's layout.
_JOINED = {"\n\n": "a blank line", " ": "a space", "\n": "a line break"}


def context_prompt_of(
    query: str,
    context: Union[str, Sequence[str]],
    sources: Union[None, str, Sequence[Span]] = None,
    option: str = "sources=",
) -> ContextPrompt:
    """``query`` and ``context`` in ContextCite's layout, checked before any
    model loads.

    The same text gives the same prompt whatever form it comes in (issue
    90, item 5): a text cut by a split is laid out without its leading and
    trailing whitespace (a notes file's last line break), and a list's items
    are joined as the split ``sources`` names would cut them back
    (:data:`LIST_JOINS`): by a blank line by default, as documents - the
    prompt of a notes file with the same documents -, with spaces for
    ``sources="sentence"`` (ContextCite's layout of sentences).

    Args:
        query (str): The question.
        context (str or Sequence[str]): One text, cut by ``sources``; or a
            list of sources, one per item.
        sources (str or Sequence of (int, int), optional): For a text: how
            to cut it (a key of :data:`SOURCE_SPLITS`; default
            ``"sentence"``) or its sources as character spans of ``context``
            (the text then laid out as given). For a list: how its items are
            joined (default ``"documents"``: a blank line between them).
        option (str): How ``sources`` was given, for the messages.

    Returns:
        ContextPrompt: The prompt and its sources' spans.

    Raises:
        ValueError: For an empty query or source, fewer than two sources,
            spans that overlap or lie outside the context, an unknown
            split, or a list of sources with spans.
    """
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"the query is empty ({query!r}): give the question")
    head = LAYOUT.split("{context}")[0]
    if isinstance(context, str):
        if not context.strip():
            raise ValueError("the context is empty: give the text to attribute to")
        if sources is None or isinstance(sources, str):
            context = context.strip()  # the text, as a list of it is laid out
        spans, split = _cut(context, "sentence" if sources is None else sources, option)
        spans = [(a + len(head), b + len(head)) for a, b in spans]
    else:
        context = list(context)
        if sources is not None and (
            not isinstance(sources, str) or sources not in LIST_JOINS
        ):
            raise ValueError(
                f"{option} {sources!r}: for a list of sources, how its items are "
                f"joined - one of {', '.join(LIST_JOINS)} (default documents: a "
                "blank line between them); spans are for a context given as one "
                "text"
            )
        join = LIST_JOINS[sources or "documents"]
        bad = [i for i, s in enumerate(context) if not isinstance(s, str)]
        bad = bad or [i for i, s in enumerate(context) if blank(s)]
        if bad:
            raise ValueError(
                "every source of context must be a text that holds words; "
                f"source {bad[0]} ({context[bad[0]]!r}) is not (only spaces or "
                "invisible characters such as zero-width spaces, or not a text)"
            )
        spans, pos = [], len(head)
        split = f"a list, joined by {_JOINED[join]}"
        for i, source in enumerate(context):
            pos += len(join) if i else 0
            spans.append((pos, pos + len(source)))
            pos += len(source)
        context = join.join(context)
    text = LAYOUT.format(context=context, query=query)
    check_sources(spans, len(text), name="the context's sources")
    return ContextPrompt(query, text, tuple(spans), split)


def _cut(text: str, sources: Any, option: str) -> Tuple[List[Span], str]:
    """A text's sources: cut as ``sources`` names, or the spans given."""
    if isinstance(sources, str):
        if sources not in SOURCE_SPLITS:
            raise ValueError(
                f"{option} {sources!r}: one of {', '.join(SOURCE_SPLITS)}, or "
                "the sources' character spans"
            )
        spans = split_sources(text, SOURCE_SPLITS[sources])
        for k, (a, b) in enumerate(spans, 1):
            if blank(text[a:b]):
                raise ValueError(
                    f"source {k} by {option} {sources} holds no words "
                    f"({text[a:b]!r}: only invisible characters such as "
                    "zero-width spaces); remove it from the context"
                )
        if len(spans) < 2:
            raise ValueError(
                f"the context has {len(spans)} source by {option} {sources} "
                f"({_HOW[sources]}): attribution needs at least two; give a "
                "longer context or another split"
            )
        return spans, sources
    spans = [(int(a), int(b)) for a, b in sources]
    check_sources(spans, len(text), name=f"{option} (spans of the context)")
    for a, b in spans:
        if blank(text[a:b]):
            raise ValueError(
                f"{option} (spans of the context): the span ({a}, {b}) holds "
                f"no words ({text[a:b]!r}: only spaces or invisible characters "
                "such as zero-width spaces); every source must hold words"
            )
    return spans, "spans"


def warn_cut_tokens(tokenizer: Any, context: ContextPrompt, chat: bool) -> None:
    """One warning when a source's span begins or ends inside a token (not
    at its leading or trailing spaces): that token is scored, and removed,
    with one source only (the first it overlaps), so the sources are not
    the spans given.

    Args:
        tokenizer: The model's tokenizer (a fast one: its offsets).
        context (ContextPrompt): The query and its sources.
        chat (bool): Whether the prompt is wrapped as a user turn.
    """
    from captum_iba.attr.llm_batch import encode_prompt

    text = context.text
    _, own, where = encode_prompt(tokenizer, text, chat)
    for mine, w in zip(own, where):
        if not mine or w is None:
            continue
        piece = text[w[0] : w[1]]
        start = w[0] + len(piece) - len(piece.lstrip())
        end = w[1] - len(piece) + len(piece.rstrip())
        for k, (a, b) in enumerate(context.spans, 1):
            if start < a < end or start < b < end:
                warnings.warn(
                    f"source {k} ({_short(text[a:b])!r}) cuts the token "
                    f"{shown(piece)!r} in two: the token is scored with one "
                    "source only; give spans that begin and end between words",
                    UserWarning,
                    stacklevel=user_stacklevel(),  # the user's call (issue 90, 16)
                )
                return


_HOW = {
    "sentence": "sentences end at . ! or ? before a space, or at a line break",
    "documents": "documents are separated by blank lines",
    "lines": "one source per non-empty line",
    "turns": "a turn starts at a line opening with a speaker's label, "
    "such as 'User:' or 'Assistant:'",
}


#: A file extension at the end of a name (letters first, up to 5 characters).
_EXTENSION = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,4})$")
#: The extensions of a text file: a name ending in one reads as a path even
#: with spaces in it (``my notes.txt``).
_TEXT_FILES = ("txt", "md", "rst", "json", "jsonl", "csv", "tsv", "html", "xml",
               "yaml", "yml", "log", "text")  # fmt: skip


def _looks_like_a_path(value: str) -> bool:
    """Whether a single-line ``--context`` that names no file reads as a
    path rather than a text: a text file's extension at its end
    (:data:`_TEXT_FILES`); without spaces, any file extension or a path
    separator (``/``, ``\\``); or a start such as ``./``, ``../``, ``~``."""
    if "\n" in value:
        return False
    one = value.strip()
    ext = _EXTENSION.search(one)
    if ext and ext.group(1).lower() in _TEXT_FILES:
        return True
    if one.startswith(("./", "../", "~", ".\\", "..\\")):
        return True
    return not any(c.isspace() for c in one) and bool(ext or set("/\\") & set(one))


def read_context(value: str) -> str:
    """``--context``: the text of the file it names, else itself - unless it
    names a folder, or looks like a path (:func:`_looks_like_a_path`) and
    names nothing: both refused, not explained as a text. ``-`` reads
    standard input, as does any file that is no regular file but can be
    read (``/dev/stdin``, a named pipe).

    Raises:
        ~captum_iba.app.errors.CLIError: For a folder, a path-like name that
            names no file, a file that cannot be read as UTF-8 text, or an
            empty one (``/dev/null``, nothing on standard input).
    """
    if value == "-":
        return _nonempty(sys.stdin.read(), value, "standard input is empty")
    path = Path(value).expanduser()
    try:
        short = len(value) < 4096 and "\n" not in value
        is_dir = short and path.is_dir()
        is_file = short and not is_dir and path.exists()  # a device, a pipe too
    except OSError:  # a name too long for the file system: a text
        is_file = is_dir = False
    if is_dir:
        raise CLIError(
            f"--context {value}: a folder; give a text file, or the context's "
            "text itself"
        )
    if not is_file and _looks_like_a_path(value):
        raise CLIError(
            f"--context {value}: file not found (a text is taken as the "
            "context itself only when it does not look like a file's path)"
        )
    if not is_file:
        return value
    try:
        with open(path, encoding="utf-8") as handle:  # a device or pipe: no size
            text = handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise CLIError(f"--context {value}: cannot read the file: {err}") from err
    return _nonempty(text, value, "the file is empty")


def _nonempty(text: str, value: str, why: str) -> str:
    """``text``, refused when it holds nothing but whitespace."""
    if not text.strip():
        raise CLIError(
            f"--context {value}: {why}: the context is empty; give the text to "
            "attribute to"
        )
    return text


#: What a source's own score is, by its unit (issue 90, item 4: "21.69
#: against 2.146" and "logit-probability" were shown unexplained).
UNIT_WORDS = {
    "nats": "nats: the answer's log-probability it adds (natural log)",
    "logit-probability": "logit-probability, log(p / (1 - p)) of the answer's "
    "probability p per answer token: how much the source adds to it",
    "attention": "the weight of the answer's attention to the source",
}


def _score_said(m: Any) -> str:
    """What one method's score of a source is, with its unit: its own score
    (:data:`UNIT_WORDS`), or how its token scores were pooled."""
    if not m.by_source:
        return m.source_pooling
    return f"its own score of each source, in {UNIT_WORDS.get(m.unit, m.unit)}"


def _short(text: str) -> str:
    one = " ".join(text.split())
    return shown(one if len(one) <= _SHORT else one[: _SHORT - 3] + "...")


def sources_head(result: Any) -> List[str]:
    """The listing's head of ``captum-iba explain --context``: the query,
    the context, the answer and how much the model wanted it."""
    subject = result.subject  # a ContextSubject
    how = "greedy" if subject.generated else "given"
    turn = ", as a user turn" if subject.chat else ""
    lines = [
        f"query: {subject.query!r}",
        f"context: {len(result.sources())} sources ({subject.split}), in "
        f"ContextCite's layout{turn}",
        f"answer ({how}, {subject.length()}): {subject.answer!r}",
    ]
    return lines + (subject.odds.listed() if subject.odds is not None else [])


def sources_lines(result: Any, name: str, top: int, pieces: bool) -> List[str]:
    """A method's lines: its sources ranked by score (with their text,
    shortened) and its top words - none for a method that scores sources
    as such (its words tie within a source) -, each output token's top
    words, and its cited answer (:func:`_cited_lines`)."""
    m, texts = result.methods[name], result.sources()
    values = result.source_scores(name)
    lines = [f"  sources, best first (higher = more used; {_score_said(m)}):"]
    order = sorted(range(len(values)), key=lambda i: -values[i])
    width = len(str(len(values))) + 2
    for i in order:
        lines.append(f"  {f'[{i + 1}]':<{width}} {values[i]:>9.4g}  {_short(texts[i])}")
    if m.no_ranking:
        level = "sources" if m.by_source else "words"
        lines += textwrap.wrap(
            f"no ranking of the {level}: {m.no_ranking}",
            88,
            initial_indent="  ",
            subsequent_indent="    ",
        )
    elif m.by_source:  # its words tie within a source: no word ranking
        lines.append(
            "  words: the words of one source share its score; see the source ranking"
        )
    else:
        best = ", ".join(
            f"{shown(w)} ({v:.3g})" for w, v in result.top(top, name, pieces)
        )
        lines.append(f"  top words: {best}")
    lines += per_token_lines(result, name, min(top, 3), pieces)  # issue 90, 14
    return lines + _cited_lines(result, name)


#: The most sources a part of the answer cites in the listing and the page.
CITED = 3


def _cited_lines(result: Any, method: str) -> List[str]:
    """A method's cited answer, when parts of the answer were explained
    (``answer_span``): the answer with each part's citation marks, each
    part's cited sources with their scores, then the sources cited with
    their text."""
    if not result.spans():
        return []
    from captum_iba.app.answer_spans import cited_paragraph

    cited = result.citations(CITED, method)
    lines = textwrap.wrap(
        f"cited answer ({len(cited)} part{'s' if len(cited) != 1 else ''}, "
        f"{result._method(method).span_seconds:.1f} "
        f"{result.subject.seconds_unit}; a part cites up to {CITED} sources, "
        "each scoring above 0 and at least a quarter of its best):",
        88,
        initial_indent="  ",
        subsequent_indent="    ",
    )
    lines += textwrap.wrap(
        cited_paragraph(result.subject.answer, cited),
        88,
        initial_indent="    ",
        subsequent_indent="    ",
    )
    for k, c in enumerate(cited, 1):
        marks = ", ".join(f"{s.mark} {s.score:.4g}" for s in c.sources) or "none"
        lines.append(f"    part {k} {_short(c.span.text)!r}: {marks}")
    used = sorted({i for c in cited for i, _, _ in c.sources})
    texts = result.sources()
    lines += [f"    [{i + 1}] {_short(texts[i])}" for i in used]
    return lines


def source_rows(result: Any) -> List[Any]:
    """The page's rows of the sources: per method, every source coloured by
    its score (the page's scale), ranked; the legend says how a source's
    score is made and what the method's score is (its meaning)."""
    from captum_iba.visualization.page import ScoreRow

    texts, rows = result.sources(), []
    for name, m in result.methods.items():
        scores = result.source_scores(name)
        rows.append(
            ScoreRow(
                method=f"{name}: sources",
                words=[f"[{i}] {text}" for i, text in enumerate(texts, 1)],
                numbered=True,
                scores=scores,
                # a mask's log-odds ("logit-max") are signed though the mask is not
                signed=m.signed or min(scores, default=0.0) < 0,
                meaning=f"one per source, {_score_said(m)}"
                + ("" if m.by_source else f", where a token's score is {m.meaning}"),
                unit=m.unit if m.by_source else "",
                details=result.details(name),
            )
        )
    return rows


def cited_answers(result: Any) -> List[Any]:
    """The page's cited paragraphs, when parts of the answer were explained
    (``answer_span``): per method, the answer with each part's citation
    marks and the sources it cites (:meth:`Explanation.citations
    <captum_iba.app.page.Explanation.citations>`, at most :data:`CITED` a
    part)."""
    from captum_iba.visualization.page import CitedAnswer

    if not result.spans():
        return []
    blocks = []
    for name, m in result.methods.items():
        cited = result.citations(CITED, name)
        parts = [
            (c.span.start, c.span.end, [(s.number, s.score) for s in c.sources])
            for c in cited
        ]
        used = sorted({i for c in cited for i, _, _ in c.sources})
        seconds = f"{m.span_seconds:.1f} {result.subject.seconds_unit}"
        blocks.append(
            CitedAnswer(
                method=f"{name}: cited answer",
                text=result.subject.answer,
                parts=parts,
                sources=[(i + 1, result.sources()[i]) for i in used],
                details=f"{len(cited)} part{'s' if len(cited) != 1 else ''} "
                f"of the answer, each explained alone ({seconds})",
                meaning=f"Each part of the answer is followed by the sources it "
                f"cites: up to {CITED}, each scoring above 0 and at least a "
                f"quarter of the part's best; a score is {_score_said(m)}"
                + ("" if m.by_source else f", where a token's score is {m.meaning}")
                + ". Hover a part or a mark for its scores; [-]: no source "
                "scores above 0.",
            )
        )
    return blocks
