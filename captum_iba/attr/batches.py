"""The two batches a method explains, one per kind of model, and what it
returns: the one typed contract of every method
(:meth:`TokenScorer.attribute <captum_iba.evaluation.TokenScorer.attribute>`,
``attribute(batch) -> scores``).

* :class:`TokenBatch` - a classifier's batch: token ids, the class explained
  per instance, the attention mask and the segment ids; a method scores each
  token for the class: a ``(B, L)`` tensor;
* :class:`PromptBatch` - a causal LM's batch: prompts and their answers
  (:func:`~captum_iba.attr.llm_batch.prompt_batch` builds it); a method
  scores each prompt token for the answer: :class:`AnswerScores`.

:data:`Batch` and :data:`Scores` name the pair. The model's kind
(:class:`~captum_iba.attr.kinds.ModelKind`) says which batch a scorer takes
and packs it into the rows a method scores
(:class:`~captum_iba.attr.rows.Rows`), so a scorer never tests which batch
it was given. A
causal LM's passes are sized by :func:`rows_per_pass` (rows x tokens within
:data:`ROW_TOKENS`).
"""

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

__all__ = [
    "BATCH_TYPES",
    "IGNORE_INDEX",
    "ROW_TOKENS",
    "AnswerScores",
    "Batch",
    "PromptBatch",
    "Scores",
    "TokenBatch",
    "rows_per_pass",
    "scatter_back",
]

#: Label of positions that are not scored (the Hugging Face convention).
IGNORE_INDEX = -100


#: Default bound of one forward and backward pass of IBA's noise copies or
#: integrated gradients' steps on a causal LM's prompts: rows x tokens. A
#: decoder keeps far more per token for its backward pass than the small
#: encoders IBA's own default is set for (SmolLM2-135M: about 1.5 MB per
#: token), so a long prompt runs one row per pass.
ROW_TOKENS = 2048


def rows_per_pass(width: int, given: Optional[int]) -> int:
    """``given``, else as many rows of ``width`` tokens as keep rows x tokens
    within :data:`ROW_TOKENS` (at least 1)."""
    return given if given is not None else max(1, ROW_TOKENS // max(width, 1))


@dataclass(frozen=True)
class TokenBatch:
    """A classifier's batch: what one :meth:`TokenScorer.attribute
    <captum_iba.evaluation.TokenScorer.attribute>` call explains (and the
    degradation test of its scores tracks).

    Attributes:
        input_ids (Tensor): ``(B, L)`` token ids.
        target (Tensor, optional): ``(B,)`` the class explained; None: the
            predicted class.
        attention_mask (Tensor, optional): ``(B, L)``, 0 at padding.
        token_type_ids (Tensor, optional): ``(B, L)`` segment ids.
    """

    input_ids: Tensor
    target: Optional[Any] = None
    attention_mask: Optional[Tensor] = None
    token_type_ids: Optional[Tensor] = None

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def scores(self, scorer: Any) -> Tensor:
        """Tensor: ``(B, L)`` the scores of ``scorer`` for this batch."""
        return scorer.attribute(self)

    def part(self, instances: slice) -> "TokenBatch":
        """TokenBatch: The same batch for some ``instances`` only."""

        def cut(t: Any) -> Any:
            return None if t is None else t[instances]

        return TokenBatch(
            self.input_ids[instances],
            cut(self.target),
            cut(self.attention_mask),
            cut(self.token_type_ids),
        )


@dataclass(frozen=True)
class PromptBatch:
    """Prompts and answers, padded on the left to one width ``W``.

    Attributes:
        input_ids (Tensor): ``(B, W)`` prompt then answer token ids.
        attention_mask (Tensor): ``(B, W)``, 0 at padding.
        labels (Tensor): ``(B, W)``: the answer's ids at its positions,
            :data:`IGNORE_INDEX` elsewhere.
        scored (Tensor): ``(B, W)`` bool: the prompt tokens explained (not
            padding, not special, not the chat template's).
        prompts (tuple of str): The prompts as given (before any template).
        sources (Tensor, optional): ``(B, W)`` long: the source of the
            context each position lies in (its index in ``spans``), -1
            elsewhere; set by
            :func:`~captum_iba.evaluation.sources.with_sources`, which also
            narrows ``scored`` to the sources' tokens. None: no sources.
        spans (tuple): Per prompt, its sources as ``(start, end)``
            character spans of the prompt (empty without sources).
        explained (Tensor, optional): ``(B, W)`` bool: the answer positions
            whose log-probability is explained - a span of each answer (a
            sentence of it), set by :meth:`explaining`; the answer's tokens
            before the span are read as given, as the prompt is, and those
            after it are read by nothing explained. None (the default): the
            whole answer. Every method's objective reads it through
            :meth:`arguments` (the labels), :meth:`explained_ids`,
            :meth:`explained_range` and :attr:`lead_mask`.
        each_token (bool): Also explain each answer token on its own (a
            method's per-token scores, ``AnswerScores.tokens``: one more row
            per answer token, where the method gives them) - the causal LM's
            option (:meth:`with_each_token`). Default False: the whole
            answer.
    """

    input_ids: Tensor
    attention_mask: Tensor
    labels: Tensor
    scored: Tensor
    prompts: Tuple[str, ...] = ()
    sources: Optional[Tensor] = None
    spans: Tuple[Tuple[Tuple[int, int], ...], ...] = ()
    explained: Optional[Tensor] = None
    each_token: bool = False

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def with_each_token(self, each_token: bool = True) -> "PromptBatch":
        """The same batch, each answer token explained too (or not)."""
        return dataclasses.replace(self, each_token=bool(each_token))

    @property
    def answer_mask(self) -> Tensor:
        """``(B, W)`` bool: the answer's positions."""
        return self.labels != IGNORE_INDEX

    @property
    def prompt_mask(self) -> Tensor:
        """``(B, W)`` bool: the prompt's positions (template included)."""
        return self.attention_mask.bool() & ~self.answer_mask

    @property
    def explained_mask(self) -> Tensor:
        """``(B, W)`` bool: the answer's positions whose log-probability is
        explained (:attr:`explained`; the whole answer when None)."""
        if self.explained is None:
            return self.answer_mask
        return self.answer_mask & self.explained.to(self.answer_mask.device)

    @property
    def lead_mask(self) -> Tensor:
        """``(B, W)`` bool: what is read as given before the explained
        tokens: the prompt (template included) and the answer's tokens before
        its explained span (:attr:`prompt_mask` when the whole answer is
        explained)."""
        if self.explained is None:
            return self.prompt_mask
        first = self.explained_mask.long().cumsum(1) == 0
        return self.attention_mask.bool() & first

    @property
    def n_sources(self) -> int:
        """The most sources a prompt has (0 without sources)."""
        return max((len(s) for s in self.spans), default=0)

    def answer_ids(self, row: int) -> List[int]:
        """The answer of ``row`` as token ids."""
        return self.input_ids[row][self.answer_mask[row]].tolist()

    def explained_ids(self, row: int) -> List[int]:
        """The explained tokens of ``row``'s answer (all of them unless
        :attr:`explained` narrows them) as token ids."""
        return self.input_ids[row][self.explained_mask[row]].tolist()

    def explained_range(self, row: int) -> Tuple[int, int]:
        """``(start, end)``: where ``row``'s explained tokens lie among its
        answer's tokens (``(0, len(answer_ids(row)))`` for the whole
        answer)."""
        inside = self.explained_mask[row][self.answer_mask[row]].nonzero()
        return int(inside[0]), int(inside[-1]) + 1

    def explaining(self, ranges: Sequence[Tuple[int, int]]) -> "PromptBatch":
        """The same batch explaining a span of each answer: row ``b``'s
        answer tokens ``ranges[b]`` (``(start, end)`` among its answer's
        tokens), whose log-probability every method then explains; its
        tokens before them are read as given.

        Args:
            ranges (Sequence of (int, int)): One ``(start, end)`` per row,
                ``0 <= start < end <=`` the row's answer tokens.

        Returns:
            PromptBatch: The batch with :attr:`explained` set.

        Raises:
            ValueError: For a count other than the rows, or an empty range
                or one outside a row's answer.
        """
        if len(ranges) != len(self):
            raise ValueError(f"{len(ranges)} ranges for {len(self)} rows")
        explained = torch.zeros_like(self.answer_mask)
        for b, (start, end) in enumerate(ranges):
            columns = self.answer_mask[b].nonzero().flatten()
            if not 0 <= int(start) < int(end) <= len(columns):
                raise ValueError(
                    f"row {b}: the answer tokens ({start}, {end}) are empty or "
                    f"outside its {len(columns)} answer tokens"
                )
            explained[b, columns[int(start) : int(end)]] = True
        return dataclasses.replace(self, explained=explained)

    def arguments(self) -> Dict[str, Tensor]:
        """``input_ids``, ``attention_mask`` and ``labels``: the arguments of
        :class:`~captum_iba.attr.llm.CausalLMLogLikelihood`, whose sum over
        the labelled positions is the objective every log-likelihood method
        explains: ``labels`` holds the explained tokens' ids
        (:attr:`explained_mask`, the whole answer by default) and
        :data:`IGNORE_INDEX` elsewhere. The last column (the answers' last
        token, which predicts nothing) is left out of the ids and the mask;
        ``labels`` keeps it, one column longer."""
        labels = self.labels
        if self.explained is not None:
            labels = labels.masked_fill(~self.explained_mask, IGNORE_INDEX)
        return {
            "input_ids": self.input_ids[:, :-1],
            "attention_mask": self.attention_mask[:, :-1],
            "labels": labels,
        }

    def rows(self, index: Sequence[int]) -> "PromptBatch":
        """The batch of rows ``index`` (in that order; a row may repeat)."""
        at = torch.tensor(list(index), dtype=torch.long)

        def pick(t: Optional[Tensor]) -> Optional[Tensor]:
            return None if t is None else t[at]

        return PromptBatch(
            self.input_ids[at],
            self.attention_mask[at],
            self.labels[at],
            self.scored[at],
            tuple(self.prompts[b] for b in index) if self.prompts else (),
            pick(self.sources),
            tuple(self.spans[b] for b in index) if self.spans else (),
            pick(self.explained),
        )

    def per_token(self) -> Tuple["PromptBatch", Tensor]:
        """One row per answer token: row ``(b, k)`` is row ``b`` with only
        its ``k``-th answer token labelled (the tokens after it cannot change
        its probability in a causal model). Every token of the answer, a
        span explained or not: each row explains its one token.

        Returns:
            (PromptBatch, Tensor): The rows, and for each its ``(b, k)``.
        """
        rows: List[int] = []
        which: List[Tuple[int, int]] = []
        labels = []
        for b in range(len(self)):
            columns = self.answer_mask[b].nonzero().flatten().tolist()
            for k, column in enumerate(columns):
                label = torch.full_like(self.labels[b], IGNORE_INDEX)
                label[column] = self.labels[b, column]
                rows.append(b)
                which.append((b, k))
                labels.append(label)
        index = torch.tensor(rows, dtype=torch.long)
        batch = PromptBatch(
            self.input_ids[index],
            self.attention_mask[index],
            torch.stack(labels),
            self.scored[index],
            tuple(self.prompts[b] for b in rows) if self.prompts else (),
            None if self.sources is None else self.sources[index],
            tuple(self.spans[b] for b in rows) if self.spans else (),
        )
        return batch, torch.tensor(which, dtype=torch.long)

    def without(self, drop: Tensor, pad_token_id: int) -> Tuple["PromptBatch", Tensor]:
        """The batch with the positions in ``drop`` deleted, as the
        degradation test deletes tokens: each row's other positions keep
        their order and move to the right (the padding stays on the left, the
        answers end together), the batch as narrow as its longest row.

        Args:
            drop (Tensor): ``(B, W)`` bool, the prompt positions to delete
                (never an answer's).
            pad_token_id (int): The id the freed positions hold.

        Returns:
            (PromptBatch, Tensor): The shorter batch, and ``(B, W')`` the
            column of the original each of its positions comes from (-1 at
            new padding).

        Raises:
            ValueError: For a ``drop`` of another shape, or one that deletes
                an answer's position.
        """
        if tuple(drop.shape) != tuple(self.input_ids.shape):
            raise ValueError(
                f"drop must be (B, W) like the batch {tuple(self.input_ids.shape)}, "
                f"got {tuple(drop.shape)}"
            )
        drop = drop.bool().to(self.input_ids.device)
        if bool((drop & self.answer_mask).any()):
            raise ValueError("drop deletes an answer's position; only a prompt's")
        keep = self.attention_mask.bool() & ~drop
        width = int(keep.sum(1).max())
        order = torch.sort(keep.to(torch.uint8), dim=1, stable=True).indices
        cols = order[:, order.shape[1] - width :]
        held = keep.gather(1, cols)

        def take(t: Optional[Tensor], fill: Any) -> Optional[Tensor]:
            return None if t is None else t.gather(1, cols).masked_fill(~held, fill)

        batch = PromptBatch(
            take(self.input_ids, pad_token_id),
            take(self.attention_mask, 0),
            take(self.labels, IGNORE_INDEX),
            take(self.scored, False),
            self.prompts,
            take(self.sources, -1),
            self.spans,
            take(self.explained, False),
        )
        return batch, cols.masked_fill(~held, -1)


def scatter_back(values: Tensor, columns: Tensor, width: int) -> Tensor:
    """Per-position ``values`` of a shorter batch
    (:meth:`PromptBatch.without`) put back at the original batch's columns:
    ``(B, width)``, 0 at the positions the shorter batch does not hold (its
    new padding, ``columns`` -1, writes nowhere: never over a kept column).

    Args:
        values (Tensor): ``(B, W')`` one value per position of the shorter
            batch.
        columns (Tensor): ``(B, W')`` the original column of each (-1 at new
            padding), as :meth:`PromptBatch.without` returns them.
        width (int): The original batch's width ``W``.

    Returns:
        Tensor: ``(B, W)``, ``values`` ' dtype and device.
    """
    spare = torch.where(columns >= 0, columns, torch.full_like(columns, width))
    out = values.new_zeros(values.shape[0], width + 1)
    return out.scatter_(1, spare, values)[:, :width]


@dataclass(frozen=True)
class AnswerScores:
    """What a method returns for a causal LM's batch
    (:func:`~captum_iba.attr.llm.explain_answers` for IBA): per prompt token,
    zero at every position that is not scored (padding, the template, special
    tokens, the answer).

    Attributes:
        answer (Tensor, optional): ``(B, W)``, the scores for the whole
            answer (its total log-probability).
        tokens (Tensor, optional): ``(B, T, W)``, the scores for each output
            token (``T``: the longest answer; zero rows past an answer's
            end).
        unit (str): What a score is (``"nats"`` for the capacity, summed
            over the features; ``"signal"`` for a mask readout: the share of
            the token's signal kept, in [0, 1], the features' mean, as for
            classifiers).
        flat (Tensor, optional): ``(B,)`` bool: the whole answer's scores of
            the instance give no ranking (:func:`~captum_iba.attr._ranking.no_ranking`).
        sources (Tensor, optional): ``(B, S)`` the whole answer's score of
            each source of the context, from a method that scores sources
            as such (IBA's ``mask="source"``, an ablation of whole sources;
            NaN for a source a prompt does not have); None: pool the token
            scores (:func:`~captum_iba.evaluation.sources.source_scores`).
    """

    answer: Optional[Tensor]
    tokens: Optional[Tensor]
    unit: str = "nats"
    flat: Optional[Tensor] = None
    sources: Optional[Tensor] = None


#: A batch of either kind.
Batch = Union[TokenBatch, PromptBatch]
#: Its members, for ``isinstance``.
BATCH_TYPES = (TokenBatch, PromptBatch)
#: The scores of a batch: a classifier's ``(B, L)`` tensor, a causal LM's
#: :class:`AnswerScores`.
Scores = Union[Tensor, AnswerScores]
