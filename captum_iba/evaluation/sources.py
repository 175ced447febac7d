"""A prompt's sources: the parts of its context an answer may use.

Context attribution asks which source - a sentence, a passage, a chat turn,
any span of characters - an answer used. A source is a ``(start, end)``
character span of the prompt; a prompt's sources do not overlap.

* :func:`split_sources` - a text cut into sentences, lines, paragraphs or
  chat turns
  (sentences by punctuation: a rule, not a trained splitter - ContextCite
  uses NLTK's Punkt, which needs a download this package does not make);
* :func:`check_sources` - sources checked before any model loads;
* :func:`source_index` - which source each prompt token of a
  :class:`~captum_iba.attr.batches.PromptBatch` lies in (a fast
  tokenizer's offsets; a token straddling two sources goes to the one it
  starts in);
* :func:`with_sources` - a batch given its sources: every method then
  scores (and removes) only the sources' tokens, IBA's ``mask="source"``
  gives one weight per source;
* :func:`pool_sources` - per-token scores pooled to one score per source
  (``"sum"``, ``"mean"``, ``"max"``, or for a mask's scores in [0, 1]
  ``"logit-max"``);
* :func:`source_scores` - a method's result as one score per source: its
  own where it scores sources as such, its token scores pooled otherwise;
* :func:`ablated_prompt` - the one ablation rule: a prompt with some of its
  sources left out (what the context metrics, ``loso``, ``shapley-sources``
  and ContextCite all remove); :func:`ablated_prompt_ids` its token ids,
  :func:`row_ablation` a batch row's ``keep -> ids`` (:func:`row_chat`: with
  the chat template or not, as the batch has it); :func:`plain_text` a base
  model's prompt written out as its ids read (a BOS before it), for the
  anchors' packages, which encode a text without special tokens.
"""

import dataclasses
import functools
import re
from typing import Any, Callable, List, Sequence, Tuple

import torch
from torch import Tensor

from captum_iba.attr._user_turn import user_turn
from captum_iba.attr.llm import AnswerScores
from captum_iba.attr.llm_batch import PromptBatch, encode_prompt

__all__ = [
    "MASK_POOLINGS",
    "POOLINGS",
    "POOLING_WORDS",
    "SPLITS",
    "ablated_prompt",
    "ablated_prompt_ids",
    "check_sources",
    "plain_text",
    "pool_sources",
    "row_ablation",
    "row_chat",
    "source_index",
    "source_scores",
    "split_sources",
    "with_sources",
]

Span = Tuple[int, int]

#: How :func:`split_sources` cuts a text.
SPLITS = ("sentence", "line", "paragraph", "turn", "word")
#: How :func:`pool_sources` makes a source's score from any method's token
#: scores.
POOLINGS = ("sum", "mean", "max")
#: A pooling of a mask's token scores in [0, 1] only (IBA's lambda): the
#: log-odds of the source's largest, ``log(m / (1 - m))`` - the mask's own
#: parameter alpha, 0 where a deletion step starts (lambda = 1/2), so that
#: a source the answer does not need adds nothing to the LDS's sum of kept
#: sources (docs/studies/context_logodds.rst,
#: "The mask's log-odds").
MASK_POOLINGS = POOLINGS + ("logit-max",)
#: Each pooling in words, as a page and the listing say it.
POOLING_WORDS = {
    "sum": "the sum of its tokens' scores",
    "mean": "the mean of its tokens' scores",
    "max": "the max of its tokens' scores",
    "logit-max": "the log-odds of its tokens' largest mask score (0: the mask's "
    "start, 1/2; > 0: kept, < 0: left out)",
}
#: Where "logit-max" clips a mask score (a float32 sigmoid reaches 1.0).
_MASK_EPS = 1e-6

# A sentence ends at . ! or ? (and closing quotes or brackets) before
# whitespace; a line break always ends one.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(\s+)|(\n+)")
# a chat turn starts at a line that opens with a speaker's label ("User:",
# "Assistant:", "Dr Smith:": one or two words and a colon)
_PATTERNS = {
    "line": re.compile(r"\n"),
    "paragraph": re.compile(r"\n\s*\n"),
    "turn": re.compile(r"^(?=[^\W\d_][\w-]*(?: [\w-]+)?:)", re.MULTILINE),
    "word": re.compile(r"\s+"),
}


def split_sources(text: str, by: str = "sentence", offset: int = 0) -> List[Span]:
    """The sources of ``text``: its sentences, lines, paragraphs, chat
    turns or words, as character spans (whitespace around each left out;
    empty parts dropped).

    Args:
        text (str): The context.
        by (str): ``"sentence"`` (default), ``"line"``, ``"paragraph"``,
            ``"turn"`` (a turn starts at a line opening with a speaker's
            label, ``"User:"``, ``"Assistant:"``, and runs to the next; text
            before the first label is a source of its own) or ``"word"``
            (runs of non-whitespace: a prompt task's content for the
            methods that score sources).
        offset (int): Added to every span (where ``text`` starts in the
            prompt). Default 0.

    Returns:
        list of (int, int): The spans, in order.

    Raises:
        ValueError: For an unknown ``by``.
    """
    if by not in SPLITS:
        raise ValueError(f"by must be one of {', '.join(SPLITS)}; got {by!r}")
    pattern = _SENTENCE_END if by == "sentence" else _PATTERNS[by]
    spans, start = [], 0
    for cut in list(pattern.finditer(text)) + [None]:
        # a sentence keeps its end mark and closing quotes: the cut is the
        # whitespace after them
        end = len(text) if cut is None else cut.start(cut.lastindex or 0)
        part = text[start:end]
        if part.strip():
            lead = len(part) - len(part.lstrip())
            a, b = start + lead, start + len(part.rstrip())
            spans.append((a + offset, b + offset))
        if cut is not None:
            start = cut.end()
    return spans


def check_sources(
    sources: Sequence[Span], length: int, name: str = "sources", least: int = 2
) -> None:
    """Refuse sources that cannot be attributed to: fewer than ``least``, an
    empty or out-of-range span, or two that overlap.

    Args:
        sources (Sequence of (int, int)): Character spans.
        length (int): The prompt's length in characters.
        name (str): What the message calls them. Default ``"sources"``.
        least (int): The fewest sources taken: 2 (the default) for a
            context, whose answer is attributed among its sources; 1 for a
            prompt task's content cut into words, where a content of one
            word is data (its one source scored by every method's own rule;
            its removal order is the same for any score).

    Raises:
        ValueError: Naming the problem and the spans.
    """
    if len(sources) < least:
        fewest = {1: "one source", 2: "two sources"}.get(least, f"{least} sources")
        raise ValueError(
            f"{name}: a context needs at least {fewest} to attribute an answer "
            f"to; got {len(sources)}"
        )
    for a, b in sources:
        if not 0 <= a < b <= length:
            raise ValueError(
                f"{name}: the span ({a}, {b}) is empty or outside the prompt's "
                f"{length} characters"
            )
    ordered = sorted(sources)
    for (a, b), (c, d) in zip(ordered, ordered[1:]):
        if c < b:
            raise ValueError(f"{name}: the spans ({a}, {b}) and ({c}, {d}) overlap")


def source_index(
    tokenizer: Any,
    batch: PromptBatch,
    sources: Sequence[Sequence[Span]],
    chat: bool = False,
) -> Tensor:
    """``(B, W)`` long: the source each prompt token of ``batch`` lies in
    (its index in the prompt's ``sources``), -1 for every other position
    (padding, the template, text outside the sources, the answer).

    Args:
        tokenizer: The tokenizer ``batch`` was made with (a fast one: its
            offsets locate the tokens).
        batch (PromptBatch): Prompts padded left
            (:func:`~captum_iba.attr.llm_batch.prompt_batch`).
        sources (Sequence of Sequence of (int, int)): Per prompt, its sources'
            characters.
        chat (bool): Whether ``batch`` wrapped the prompts in the chat
            template (as ``prompt_batch``'s ``chat``).

    Raises:
        ValueError: For a source count that differs from the prompts, a
            tokenizer without offsets, or a source that holds no token.
    """
    if len(sources) != len(batch.prompts):
        raise ValueError(
            f"{len(sources)} lists of sources for {len(batch.prompts)} prompts"
        )
    out = torch.full(batch.scored.shape, -1, dtype=torch.long)
    for row, (prompt, spans) in enumerate(zip(batch.prompts, sources)):
        _, own, where = encode_prompt(tokenizer, prompt, chat)
        if any(mine and w is None for mine, w in zip(own, where)):
            raise ValueError(
                "sources are located by the tokens' character offsets: use a "
                "fast tokenizer (use_fast=True)"
            )
        start = int(batch.attention_mask[row].nonzero()[0])
        for j, (mine, w) in enumerate(zip(own, where)):
            if mine:
                hit = [s for s, (a, b) in enumerate(spans) if w[0] < b and w[1] > a]
                out[row, start + j] = hit[0] if hit else -1
        for s, (a, b) in enumerate(spans):
            if not (out[row] == s).any():
                raise ValueError(
                    f"prompt {row}: no token of its own lies in characters "
                    f"{a}-{b} ({prompt[a:b]!r})"
                )
    return out


def pool_sources(
    scores: Tensor, index: Tensor, n_sources: int, pooling: str = "sum"
) -> Tensor:
    """Per-token scores pooled to one score per source.

    Args:
        scores (Tensor): ``(B, W)`` a method's scores of the prompt tokens.
        index (Tensor): ``(B, W)`` each token's source (:func:`source_index`;
            -1: none).
        n_sources (int): Sources per prompt (the most any prompt has).
        pooling (str): ``"sum"`` (default: additive scores, as a removal's
            effect), ``"mean"`` or ``"max"`` of the source's tokens, or
            ``"logit-max"``: the log-odds of the max, for a mask's scores in
            [0, 1] (:data:`MASK_POOLINGS`; clipped to ``[1e-6, 1 - 1e-6]``).

    Returns:
        Tensor: ``(B, n_sources)`` float64; NaN for a source a prompt does
        not have.

    Raises:
        ValueError: For an unknown pooling, shapes that differ, or
            ``"logit-max"`` of scores outside [0, 1].
    """
    if pooling not in MASK_POOLINGS:
        raise ValueError(
            f"pooling must be one of {', '.join(MASK_POOLINGS)}; got {pooling!r}"
        )
    if scores.shape != index.shape:
        raise ValueError(
            f"scores {tuple(scores.shape)} and index {tuple(index.shape)} differ"
        )
    values = scores.detach().double().cpu()
    index = index.cpu()
    if pooling == "logit-max":
        inside = values[index >= 0]
        if len(inside) and (inside.min() < 0 or inside.max() > 1):
            raise ValueError(
                "pooling 'logit-max' reads a mask's scores in [0, 1]; these lie "
                f"in [{float(inside.min()):.3g}, {float(inside.max()):.3g}] "
                "(use 'sum', 'mean' or 'max')"
            )
        values = torch.logit(values.clamp(_MASK_EPS, 1 - _MASK_EPS))
        pooling = "max"  # the log-odds are monotone: the log-odds of the max
    out = torch.full((scores.shape[0], n_sources), float("nan"), dtype=torch.float64)
    for s in range(n_sources):
        inside = index == s
        for row in inside.any(1).nonzero().flatten().tolist():
            part = values[row][inside[row]]
            out[row, s] = {"sum": part.sum, "mean": part.mean, "max": part.max}[
                pooling
            ]()
    return out


def with_sources(
    tokenizer: Any,
    batch: PromptBatch,
    sources: Sequence[Sequence[Span]],
    chat: bool = False,
    least: int = 2,
) -> PromptBatch:
    """``batch`` with its prompts' sources: ``sources`` and ``spans`` set,
    and ``scored`` narrowed to the sources' tokens, so that every method
    scores - and removes - the context's sources only (the query and the
    template stay).

    Args:
        tokenizer: The tokenizer ``batch`` was made with (a fast one).
        batch (PromptBatch): Prompts padded left.
        sources (Sequence of Sequence of (int, int)): Per prompt, its
            sources' characters (:func:`split_sources`).
        chat (bool): Whether ``batch`` wrapped the prompts in the chat
            template.
        least (int): The fewest sources a prompt may have
            (:func:`check_sources`). Default 2.

    Raises:
        ValueError: As :func:`check_sources` (per prompt, named) and
            :func:`source_index`.
    """
    for row, (prompt, spans) in enumerate(zip(batch.prompts, sources)):
        check_sources(spans, len(prompt), name=f"prompt {row}'s sources", least=least)
    index = source_index(tokenizer, batch, sources, chat)
    return dataclasses.replace(
        batch,
        scored=batch.scored & (index >= 0),
        sources=index,
        spans=tuple(tuple((int(a), int(b)) for a, b in s) for s in sources),
    )


def source_scores(
    scores: AnswerScores, batch: PromptBatch, pooling: str = "sum"
) -> Tensor:
    """A method's whole-answer scores as one score per source: its own
    (``scores.sources``) where it scores sources as such, else its token
    scores pooled (:func:`pool_sources`).

    Args:
        scores (AnswerScores): What the method returned for ``batch``.
        batch (PromptBatch): A batch with sources (:func:`with_sources`).
        pooling (str): How token scores pool (a scorer's ``source_pooling``).

    Returns:
        Tensor: ``(B, S)`` float64, NaN for a source a prompt does not have.

    Raises:
        ValueError: For a batch without sources or scores without the whole
            answer's.
    """
    if scores.sources is not None:
        return scores.sources.detach().double().cpu()
    if batch.sources is None:
        raise ValueError("the batch has no sources (with_sources adds them)")
    if scores.answer is None:
        raise ValueError("source scores need the whole answer's token scores")
    return pool_sources(scores.answer, batch.sources, batch.n_sources, pooling)


def ablated_prompt(prompt: str, spans: Sequence[Span], keep: Sequence[bool]) -> str:
    """``prompt`` with the sources not kept left out - the one ablation rule
    of a source (the context metrics, ``loso``, ``shapley-sources`` and
    ContextCite remove sources by it).

    Sources separated by whitespace only form a run (the passages of a
    context, the sentences of a paragraph); a run's kept sources stay joined
    by the whitespace that followed each, so a dropped source goes with the
    whitespace that follows it, and a run's last kept source loses the
    whitespace after it when the sources after it are dropped. Every other
    character - the text outside the runs: the query, ``"Context: "``, a
    chat turn's role - is kept. In ContextCite's layout (the sources joined by
    one separator) this is exactly the kept sources re-joined.

    Args:
        prompt (str): The prompt.
        spans (Sequence of (int, int)): Its sources' characters (not
            overlapping).
        keep (Sequence of bool): Per source, whether it stays.

    Returns:
        str: The ablated prompt.

    Raises:
        ValueError: For a ``keep`` of another length than ``spans``.
    """
    if len(keep) != len(spans):
        raise ValueError(f"keep has {len(keep)} values for {len(spans)} sources")
    order = sorted(range(len(spans)), key=lambda s: spans[s][0])
    out, pos, i = [], 0, 0
    while i < len(order):
        run = [order[i]]
        while i + 1 < len(order):
            gap = prompt[spans[order[i]][1] : spans[order[i + 1]][0]]
            if gap.strip():
                break
            i += 1
            run.append(order[i])
        i += 1
        out.append(prompt[pos : spans[run[0]][0]])
        after = {a: prompt[spans[a][1] : spans[b][0]] for a, b in zip(run, run[1:])}
        kept = [s for s in run if keep[s]]
        for j, s in enumerate(kept):
            out.append(prompt[spans[s][0] : spans[s][1]])
            out.append(after[s] if j + 1 < len(kept) else "")
        pos = spans[run[-1]][1]
    out.append(prompt[pos:])
    return "".join(out)


def ablated_prompt_ids(
    tokenizer: Any,
    prompt: str,
    spans: Sequence[Span],
    keep: Sequence[bool],
    chat: bool = False,
) -> List[int]:
    """The token ids of :func:`ablated_prompt`, encoded as
    :func:`~captum_iba.attr.llm_batch.encode_prompt` encodes a prompt (as a
    user turn of the chat template with ``chat``), so that keeping every
    source gives the prompt's own ids.

    Raises:
        ValueError: When the ablated prompt leaves no token before the
            response (no source kept, no other text, no template).
    """
    text = ablated_prompt(prompt, spans, keep)
    wrapped = user_turn(tokenizer, text)[0] if chat else text
    ids = list(tokenizer(wrapped, add_special_tokens=not chat)["input_ids"])
    if not ids:
        raise ValueError(
            f"leaving out the sources {[s for s, k in enumerate(keep) if not k]} "
            "leaves no token before the response: keep text outside the sources "
            "(a query) or use a tokenizer that opens a text (a BOS token)"
        )
    return ids


def plain_text(tokenizer: Any, text: str) -> str:
    """``text`` with the special tokens that the tokenizer puts before it (a
    BOS) written out, so that encoding the result without special tokens
    (as ContextCite's and AT2's packages encode a prompt) gives the ids of
    ``text`` encoded with them (:func:`ablated_prompt_ids` with ``chat``
    False, a base model's prompt)."""
    ids = list(tokenizer(text)["input_ids"])
    plain = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    lead = len(ids) - len(plain)
    if lead > 0 and ids[lead:] == plain:
        return tokenizer.decode(ids[:lead]) + text
    return text


def row_chat(tokenizer: Any, batch: PromptBatch, row: int) -> bool:
    """Whether row ``row`` of ``batch`` holds its prompt as a user turn of
    the chat template: whichever encoding gives the row's prompt ids.

    Raises:
        ValueError: For a batch without sources, or a row whose prompt ids
            are neither the prompt's nor its chat turn's.
    """
    if batch.sources is None or not batch.spans:
        raise ValueError("the batch has no sources (with_sources adds them)")
    prompt, spans = batch.prompts[row], batch.spans[row]
    ids = batch.input_ids[row][batch.prompt_mask[row]].tolist()
    every = [True] * len(spans)
    for chat in (False, True)[: 2 if getattr(tokenizer, "chat_template", None) else 1]:
        if ablated_prompt_ids(tokenizer, prompt, spans, every, chat) == ids:
            return chat
    raise ValueError(
        f"row {row}'s prompt ids are neither its prompt's nor its chat turn's: "
        "make the batch with this tokenizer (prompt_batch)"
    )


def row_ablation(
    tokenizer: Any, batch: PromptBatch, row: int
) -> Callable[[Sequence[bool]], List[int]]:
    """``keep -> ids``: row ``row`` of ``batch`` with its sources ablated
    (:func:`ablated_prompt_ids`), encoded as the batch encoded it
    (:func:`row_chat`).

    Raises:
        ValueError: As :func:`row_chat`.
    """
    chat = row_chat(tokenizer, batch, row)
    prompt, spans = batch.prompts[row], batch.spans[row]
    return functools.partial(ablated_prompt_ids, tokenizer, prompt, spans, chat=chat)
