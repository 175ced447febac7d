"""The corpus loop on a context task: which source of a prompt did the
model's answer use (issue 51), measured with ContextCite's metrics.

:class:`ContextJob` is a :class:`~captum_iba.evaluation.loop.CorpusJob` whose
instances are contexts - several sources (passages) and a query, in a
prompt layout it is given (ContextCite's:
:func:`~captum_iba.app.context_tasks.layout_prompt`) - and whose units are
:class:`ContextUnit` s; it differs from the other jobs only by its task's
hooks, the method loop being
:func:`~captum_iba.evaluation.loop.score_unit`'s, so the corpus engine
(``captum-iba evaluate --task context-facts``: resumable, many processes)
runs it as it runs a classifier's job. Per unit, built once for every method
(:func:`context_unit`):

* the model's greedy response to each prompt (at most
  :data:`MAX_NEW_TOKENS` tokens, stopped at its end-of-text token), the
  prompt's sources marked
  (:func:`~captum_iba.evaluation.sources.with_sources`: every method scores
  and removes the sources' tokens only);
* the LDS's held-out ablations of each example
  (:func:`~captum_iba.metrics.context.ablate_sources`: :data:`HELDOUT_ABLATIONS`
  random subsets, keep probability 0.5, drawn by torch with seed
  :data:`HELDOUT_SEED` + the example's number), shared by every method and
  apart from any method's own (ContextCite's ablations are NumPy's seeds
  ``0 .. A-1``).

Each method then scores the sources (:func:`method_source_scores`: its own
per-source scores, else its token scores pooled by sum, mean and max) and
:func:`~captum_iba.metrics.context.context_test` measures them: the LDS, the
top-k log-probability drops (k = 1, 3, 5) and whether the key source (the
one the query asks about) is ranked first (:func:`top1_hit`). A method's
seconds are CPU-seconds (:meth:`ContextJob.timer`, ``time.process_time``:
give the process one thread).
"""

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from torch import Tensor

from captum_iba.attr.llm import AnswerScores, CausalLMLogLikelihood
from captum_iba.attr.llm_batch import (
    PromptBatch,
    _pad_id,
    encode_prompt,
    prompt_batch,
)
from captum_iba.evaluation.loop import CorpusJob
from captum_iba.evaluation.sources import (
    POOLINGS,
    ablated_prompt_ids,
    source_scores,
    with_sources,
)
from captum_iba.metrics.context import (
    TOP_K,
    SourceAblations,
    ablate_sources,
    context_test,
    source_ranking,
)

__all__ = [
    "HELDOUT_ABLATIONS",
    "HELDOUT_SEED",
    "MAX_NEW_TOKENS",
    "OWN",
    "ContextData",
    "ContextJob",
    "ContextUnit",
    "context_batch",
    "context_unit",
    "example_metrics",
    "too_long",
    "Layout",
    "method_source_scores",
    "prompt_ids_of",
    "top1_hit",
]

#: The held-out ablations' seed (plus the example's number).
HELDOUT_SEED = 51_000
#: The LDS's held-out ablations per example.
HELDOUT_ABLATIONS = 32
#: The longest response.
MAX_NEW_TOKENS = 24
#: The key of a method's own per-source scores (not pooled from tokens).
OWN = "-"

Span = Tuple[int, int]


#: A prompt layout: ``(sources, query) -> (prompt, spans)``, the sources'
#: character spans in the prompt, for any number of sources (an ablated
#: context keeps some, or none); e.g.
#: :func:`~captum_iba.app.context_tasks.layout_prompt`, ContextCite's.
Layout = Callable[[Sequence[str], str], Tuple[str, List[Span]]]


def prompt_ids_of(
    tokenizer: Any, prompt: str, spans: Sequence[Span], chat: bool
) -> Callable[[Sequence[bool]], List[int]]:
    """``keep -> ids``: ``prompt`` with only the kept sources' text, by the one
    ablation rule (:func:`~captum_iba.evaluation.sources.ablated_prompt`: in
    ContextCite's layout, the kept sources re-joined, as ContextCite
    ablates), as a user turn of the chat template with ``chat``."""
    return functools.partial(ablated_prompt_ids, tokenizer, prompt, spans, chat=chat)


def top1_hit(scores: Tensor, key: int) -> bool:
    """Whether source ``key`` is ranked first (ties: the earlier source, as
    the top-k drop breaks them,
    :func:`~captum_iba.metrics.context.source_ranking`)."""
    return int(source_ranking(scores)[0]) == key


def method_source_scores(
    found: AnswerScores, batch: PromptBatch, poolings: Sequence[str] = POOLINGS
) -> Dict[str, Tensor]:
    """A method's result as per-source scores: ``{OWN: (B, S)}`` for a method
    that scores sources as such (``found.sources``), else its whole-answer
    token scores pooled, one ``(B, S)`` per pooling of ``poolings`` (a
    scorer's ``source_poolings``; default
    :data:`~captum_iba.evaluation.sources.POOLINGS`; NaN past a prompt's
    sources; :func:`~captum_iba.evaluation.sources.source_scores`)."""
    if found.sources is not None:
        return {OWN: source_scores(found, batch)}
    return {p: source_scores(found, batch, p) for p in poolings}


@dataclass(frozen=True)
class ContextData:
    """A context task's examples as a corpus of the engine: ``texts`` (the
    prompts, the engine's order reads their lengths) and ``labels`` (each
    example's key source).

    Attributes:
        examples (tuple): Objects with ``sources`` (tuple of str), ``query``
            (str) and ``key`` (int), e.g.
            :class:`~captum_iba.app.context_tasks.ContextExample`.
        layout (Layout): Their prompt's layout.
        numbers (tuple of int): Each example's number in its task (its
            held-out ablations' seed); default ``0 .. N-1``.
    """

    examples: Tuple[Any, ...]
    layout: Layout
    numbers: Tuple[int, ...] = ()
    text_pairs: Any = None

    def __post_init__(self) -> None:
        if not self.numbers:
            object.__setattr__(self, "numbers", tuple(range(len(self.examples))))
        if len(self.numbers) != len(self.examples):
            raise ValueError(
                f"{len(self.numbers)} numbers for {len(self.examples)} examples"
            )
        for i, ex in enumerate(self.examples):
            if len(ex.sources) < 2 or not 0 <= int(ex.key) < len(ex.sources):
                raise ValueError(
                    f"example {self.numbers[i]}: {len(ex.sources)} sources and key "
                    f"{ex.key}: a context needs two sources or more, its key one "
                    "of them"
                )

    def __len__(self) -> int:
        return len(self.examples)

    def prompt(self, i: int) -> Tuple[str, List[Span]]:
        """Example ``i``'s prompt and its sources' spans."""
        ex = self.examples[i]
        return self.layout(ex.sources, ex.query)

    @property
    def texts(self) -> List[str]:
        """The prompts."""
        return [self.prompt(i)[0] for i in range(len(self))]

    @property
    def labels(self) -> List[int]:
        """Each example's key source."""
        return [int(ex.key) for ex in self.examples]


@dataclass(frozen=True)
class ContextUnit:
    """One unit of contexts, built once for every method (:func:`context_unit`).

    Attributes:
        indices (list[int]): The examples (indices into the job's data).
        batch (PromptBatch): Their prompts, sources and greedy responses.
        prompt_ids (list): Per example, ``keep -> ids`` of its ablated prompt.
        ablations (list[SourceAblations]): Per example, the LDS's held-out
            ablations.
    """

    indices: List[int]
    batch: PromptBatch
    prompt_ids: List[Callable[[Sequence[bool]], List[int]]]
    ablations: List[SourceAblations]


def too_long(
    tokenizer: Any,
    data: ContextData,
    i: int,
    chat: bool,
    positions: Optional[int],
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> Optional[int]:
    """Example ``i``'s prompt length in tokens when it and the longest
    response (``max_new_tokens``) need more than the model's ``positions``;
    None when they fit (or the model does not say its positions)."""
    if positions is None:
        return None
    length = len(encode_prompt(tokenizer, data.prompt(i)[0], chat=chat)[0])
    return length if length + max_new_tokens - 1 > positions else None


def context_batch(
    model: Any,
    tokenizer: Any,
    data: ContextData,
    indices: Sequence[int],
    chat: bool = True,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> PromptBatch:
    """Examples ``indices`` of ``data`` as one batch: their prompts with the
    model's greedy responses, their sources marked
    (:func:`~captum_iba.evaluation.sources.with_sources`) - what every method
    explains, and what a context explainer is fitted on.

    Raises:
        ValueError: As :func:`~captum_iba.attr.llm_batch.prompt_batch`.
    """
    made = [data.prompt(i) for i in indices]
    batch = prompt_batch(
        tokenizer,
        [p for p, _ in made],
        model=model,
        chat=chat,
        max_new_tokens=max_new_tokens,
    )
    return with_sources(tokenizer, batch, [s for _, s in made], chat=chat)


def context_unit(
    model: Any,
    tokenizer: Any,
    data: ContextData,
    indices: Sequence[int],
    chat: bool = True,
    n_ablations: int = HELDOUT_ABLATIONS,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> ContextUnit:
    """The model's greedy responses to examples ``indices`` of ``data`` (one
    batch), their sources marked, and each example's held-out ablations
    (seed :data:`HELDOUT_SEED` + its number).

    Raises:
        ValueError: As :func:`~captum_iba.attr.llm_batch.prompt_batch` (a
            prompt past the model's positions, an empty response).
    """
    batch = context_batch(model, tokenizer, data, indices, chat, max_new_tokens)
    ll = CausalLMLogLikelihood(model)
    pad = _pad_id(tokenizer)
    ids, ablations = [], []
    for row, i in enumerate(indices):
        ex = data.examples[i]
        ids.append(prompt_ids_of(tokenizer, batch.prompts[row], batch.spans[row], chat))
        ablations.append(
            ablate_sources(
                ll, ids[-1], batch.answer_ids(row), len(ex.sources), n_ablations,
                0.5, HELDOUT_SEED + data.numbers[i], pad_token_id=pad,
            )
        )  # fmt: skip
    return ContextUnit(list(indices), batch, ids, ablations)


def example_metrics(
    log_likelihood: Callable,
    unit: ContextUnit,
    row: int,
    found: Dict[str, Tensor],
    key: int,
    pad_token_id: int,
    ks: Sequence[int] = TOP_K,
) -> Dict[str, Any]:
    """One example's metrics of a method: per pooling of its source scores
    ``found`` (``(S,)`` each), the scores, the LDS on the unit's held-out
    ablations, the top-k drops (nats; None where undefined) and whether
    ``key`` is ranked first (:func:`top1_hit`), as ``{"pooled": {...}}``.

    Args:
        log_likelihood (Callable): The model's
            :class:`~captum_iba.attr.llm.CausalLMLogLikelihood`.
        unit (ContextUnit): The example's unit; ``row`` its row there.
        row (int): The example's row in the unit.
        found (dict): Pooling (or :data:`OWN`) -> ``(S,)`` source scores.
        key (int): The key source.
        pad_token_id (int): The padding id.
        ks (Sequence[int]): The top-k drops' k's.
    """
    results = context_test(
        log_likelihood, unit.prompt_ids[row], unit.batch.answer_ids(row), found, ks,
        unit.ablations[row], pad_token_id=pad_token_id,
    )  # fmt: skip
    pooled = {
        p: dict(
            scores=found[p].tolist(),
            lds=_number(results[p].lds),
            top1=top1_hit(found[p], key),
            drops={str(k): _number(v) for k, v in results[p].top_k_drop.items()},
        )
        for p in found
    }
    return dict(pooled=pooled)


def _number(value: float) -> Optional[float]:
    """``value``, None for NaN (JSON has no NaN)."""
    return None if math.isnan(value) else float(value)


@dataclass
class ContextJob(CorpusJob):
    """A corpus run on a context task (see the module docstring).

    Besides :class:`~captum_iba.evaluation.loop.CorpusJob`'s fields (``data``
    a :class:`ContextData`; ``preset``, ``target`` and ``max_length`` not
    used), it holds:

    Attributes:
        degradation (bool): Run the test (the context metrics). Default True.
        chat (bool): Whether the prompts are user turns of the chat template.
        n_ablations (int): The LDS's held-out ablations per example.
        max_new_tokens (int): The longest response.
        ks (tuple of int): The top-k drops' k's.
    """

    degradation: bool = True
    chat: bool = True
    n_ablations: int = HELDOUT_ABLATIONS
    max_new_tokens: int = MAX_NEW_TOKENS
    ks: Tuple[int, ...] = field(default=TOP_K)

    #: Where a row records its test.
    test_field = "context"

    @staticmethod
    def timer() -> float:
        """CPU-seconds (the field's cost measure of context attribution)."""
        return time.process_time()

    def unit_tensors(self, indices: Sequence[int]) -> ContextUnit:
        """The unit's responses and held-out ablations (:func:`context_unit`)."""
        return context_unit(
            self.model, self.tokenizer, self.data, indices, self.chat,
            self.n_ablations, self.max_new_tokens,
        )  # fmt: skip

    def batch_of(self, unit: Any, scorer: Any = None) -> PromptBatch:
        """The unit's prompts (with their sources) and responses, the same
        for every scorer."""
        return unit.batch

    def unit_scores(self, found: Any) -> AnswerScores:
        """The method's result as it is (the test pools it to the sources
        with the unit's batch)."""
        return found

    def test(
        self, unit: Any, name: str, scorer: Any, scores: Any, seconds: float
    ) -> List[Dict[str, Any]]:
        """Per example, the method's CPU-seconds (``seconds``, the unit's
        mean) and, per pooling of its scores to the sources, ContextCite's
        metrics (:func:`~captum_iba.metrics.context.context_test` on the
        shared held-out ablations) and its top-1 hit."""
        ll = CausalLMLogLikelihood(self.model)
        pooled = method_source_scores(scores, unit.batch, scorer.source_poolings)
        out = []
        for row, i in enumerate(unit.indices):
            n = len(self.data.examples[i].sources)
            record = example_metrics(
                ll, unit, row, {p: s[row, :n] for p, s in pooled.items()},
                self.data.labels[i], _pad_id(self.tokenizer), self.ks,
            )  # fmt: skip
            out.append(dict(record, cpu_seconds=seconds))
        return out

    def test_records(self, result: Any) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
        """The per-example metrics and what they were measured with."""
        return result, self.test_settings()

    def test_settings(self) -> Dict[str, Any]:
        """The metrics' settings."""
        return dict(
            n_ablations=self.n_ablations,
            keep_prob=0.5,
            heldout_seed=HELDOUT_SEED,
            ks=list(self.ks),
            max_new_tokens=self.max_new_tokens,
        )

    def merge_tests(
        self, records: Sequence[Any], settings: Dict[str, Any], seconds: float
    ) -> Dict[str, Any]:
        """A method's per-example metrics over the corpus, as they are."""
        return dict(settings, records=list(records), cpu_seconds=seconds)

    def instance_row(self, unit: Any, j: int, scores: Any) -> Dict[str, Any]:
        """The record of the unit's ``j``-th example: the example (number,
        sources, query, key), the response, the prompt's tokens and the
        method's token scores."""
        i, batch = unit.indices[j], unit.batch
        ex = self.data.examples[i]
        real = batch.attention_mask[j].bool()
        ids = batch.input_ids[j][real]
        tokens = scores.answer
        return dict(
            index=i,
            example=self.data.numbers[i],
            sources=list(ex.sources),
            query=ex.query,
            key=int(ex.key),
            n_sources=len(ex.sources),
            response=self.tokenizer.decode(batch.answer_ids(j)),
            tokens=self.tokenizer.convert_ids_to_tokens(ids.tolist()),
            input_ids=ids.tolist(),
            scores=[] if tokens is None else tokens[j].detach().cpu()[real].tolist(),
        )

    def row_fields(self, fields: Dict[str, str]) -> Dict[str, str]:
        """What a context row holds."""
        return {
            "index": "position of the example in this run (0-based)",
            "method": fields["method"],
            "example": "the example's number in its task (its held-out "
            "ablations' seed: 51000 + it)",
            "sources": "the context's sources (passages), in order",
            "query": "the query",
            "key": "the source that holds what the query asks (0-based)",
            "n_sources": "the number of sources",
            "response": "the model's greedy response, explained",
            "tokens": "the prompt's tokens (template and response included), "
            "padding left out",
            "input_ids": "their token ids",
            "scores": "the method's score per token for the whole response, zero "
            "at tokens not scored (every token outside the sources)",
            "context": "cpu_seconds (the method's CPU-seconds per example of its "
            "unit) and pooled: per pooling of the method's scores to the sources "
            "('-': its own per-source scores; else sum, mean, max of its token "
            "scores), the source scores, the LDS over the held-out ablations, "
            "top1 (the key source ranked first) and the top-k log-probability "
            "drops in nats (null where undefined: k >= the sources; the LDS of "
            "constant scores)",
        }
