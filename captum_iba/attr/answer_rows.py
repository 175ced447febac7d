"""A causal LM's rows (:class:`AnswerRows`): its prompts with their answers
and, where per-token scores are asked for, one row per answer token - how a
causal LM's kind (:data:`~captum_iba.attr.kinds.CAUSAL_LM`) packs a
:class:`~captum_iba.attr.batches.PromptBatch` for a method's one hook, builds
an :class:`~captum_iba.attr.batches.AnswerScores` back and runs the families
of attribution on it (Captum's through its LLM API,
:mod:`captum_iba.attr._llm_captum`)."""

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils import common
from captum_iba.attr.rows import (
    CaptumRun,
    Read,
    Rows,
    RowScores,
    row_passes,
    with_values,
)

__all__ = ["AnswerRows"]


@dataclass(frozen=True)
class AnswerRows(Rows):
    """A causal LM's rows: its prompts with their answers, then (where
    per-token scores are asked for) one row per answer token, that token's
    log-probability explained (see :class:`Rows`).

    Attributes:
        batch (PromptBatch): The prompts and answers.
        which (Tensor, optional): ``(R - instances, 2)`` the ``(instance,
            answer token)`` each further row explains.
        tokenizer (Any): The model's tokenizer (Captum's LLM API names the
            tokens with it).
    """

    batch: Any = None
    which: Optional[Tensor] = None
    tokenizer: Any = None

    @classmethod
    def pack(cls, batch: Any, scorer: Any) -> "AnswerRows":
        """A causal LM's :class:`~captum_iba.attr.batches.PromptBatch` as rows:
        its prompts and, where the batch asks for each answer token
        (``each_token``) and the method gives per-token scores (no
        ``per_token_note``), one row per answer token after them.

        Raises:
            ValueError: For a part of the answers explained by a method that
                explains whole answers only, or with ``each_token``.
        """
        if batch.explained is not None:
            _check_span(scorer, batch.each_token)
        which = None
        rows = batch
        if batch.each_token and not scorer.per_token_note:
            from captum_iba.attr.llm import concat_batches

            tokens, which = batch.per_token()
            rows = concat_batches([batch, tokens])
        return cls(
            rows.input_ids,
            rows.attention_mask,
            rows.scored,
            len(batch),
            scorer.model,
            tuple(scorer.special_token_ids),
            scorer.pad_token_id,
            rows,
            which,
            scorer.tokenizer,
        )

    def unpack(self, scorer: Any, scores: Union[Tensor, "RowScores"]) -> Any:
        """:class:`~captum_iba.attr.batches.AnswerScores`: the whole answers'
        scores and (with per-token rows) each output token's, zero wherever
        a token is not scored."""
        from captum_iba.attr.batches import AnswerScores

        found = with_values(scores)
        values = found.values
        width = self.input_ids.shape[1]
        if values.shape[1] < width:  # the answers' last token, read by none
            pad = values.new_zeros(values.shape[0], width - values.shape[1])
            values = torch.cat([values, pad], dim=1)
        B = self.instances
        scored = self.scored[:B]
        keep = scored.to(values.device)
        answer = values[:B] * keep
        tokens = None
        if self.which is not None:
            longest = int(self.which[:, 1].max()) + 1
            tokens = values.new_zeros(B, longest, width)
            tokens[self.which[:, 0], self.which[:, 1]] = values[B:]
            tokens = tokens * keep[:, None]
        unit = found.unit or scorer.unit
        return AnswerScores(answer, tokens, unit, found.flat, found.groups)

    @property
    def groups(self) -> Optional[Tensor]:
        return self.batch.sources

    @property
    def n_groups(self) -> int:
        return int(self.batch.n_sources)

    @property
    def prompts(self) -> Any:
        """PromptBatch: The instances' prompts and answers (without the
        per-token rows): the contract of a method that scores a context's
        sources as such (a prompt batch in, one score per source out)."""
        if self.which is None:
            return self.batch
        return self.batch.rows(list(range(self.instances)))

    def legacy(self, scorer: Any) -> Union[Tensor, RowScores]:
        """0.3's ``_prompt_scores(batch, per_token)`` of a causal LM."""
        hook = getattr(scorer, "_legacy_prompts", None)
        if hook is None:
            return super().legacy(scorer)
        found = hook(self.prompts, self.per_token)
        values = self.spread(found.answer, found.tokens)
        return RowScores(values, found.unit, found.flat, found.sources)

    def spread(self, instances: Tensor, per_token: Optional[Tensor]) -> Tensor:
        """``(R, W)`` row values from the instances' ``(B, W)`` and, where
        the rows hold per-token rows, each answer token's ``(B, T, W)``."""
        out = instances.new_zeros(len(self), instances.shape[1])
        out[: self.instances] = instances
        if self.which is not None and per_token is not None:
            out[self.instances :] = per_token[self.which[:, 0], self.which[:, 1]]
        return out

    @property
    def per_token(self) -> bool:
        """bool: Whether rows explain each answer token."""
        return self.which is not None

    def read(self) -> Read:
        args = self.batch.arguments()
        dev = common.model_device(self.model, self.device)
        mask, labels = args["attention_mask"].to(dev), args["labels"].to(dev)
        token_mask = self.scored[:, :-1].to(dev).bool()
        return Read(args["input_ids"].to(dev), (mask, labels), token_mask, None)

    def bottleneck(self, iba: Any, options: Any) -> RowScores:
        """IBA on every row in one call (:func:`~captum_iba.attr.llm.answer_rows`:
        the labelled tokens' log-likelihood kept high); a note where an
        instance's scores give no ranking."""
        from captum_iba.attr._ranking import say_if_flat
        from captum_iba.attr.llm import answer_rows, answer_unit

        scores, flat, used = answer_rows(iba, self.batch, {"config": options})
        flat = flat[: self.instances]
        say_if_flat(flat, iba, used)
        return RowScores(scores, answer_unit(used), flat)

    def record(self, scorer: Any, cpu_seconds: float) -> None:
        scorer.settings["cpu_seconds"] = cpu_seconds

    def sized(self, options: Any) -> Any:
        """``options`` with as many rows per pass as keep rows x tokens
        within :data:`~captum_iba.attr.batches.ROW_TOKENS` (a decoder keeps
        far more per token for its backward pass), unless they set
        ``internal_batch_size``."""
        from captum_iba.attr.batches import rows_per_pass

        rows = rows_per_pass(self.input_ids.shape[1], options.internal_batch_size)
        return options.replace(internal_batch_size=rows)

    def part(self, index: Sequence[int]) -> "AnswerRows":
        return self._of(self.batch.rows(list(index)))

    def without(self, drop: Tensor) -> Tuple["AnswerRows", Tensor]:
        shorter, columns = self.batch.without(drop, self.pad_token_id)
        return self._of(shorter), columns

    def with_ids(self, input_ids: Tensor) -> "AnswerRows":
        ids = input_ids.to(self.batch.input_ids.device)
        return self._of(dataclasses.replace(self.batch, input_ids=ids))

    @property
    def explained_tokens(self) -> Tensor:
        return self.batch.explained_mask.sum(1).cpu()

    def log_probability(self, rows_per_pass: Optional[int] = None) -> Tensor:
        """See :meth:`Rows.log_probability`: the explained tokens'
        log-likelihood (:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`)."""
        read, forward = self.read(), self.forward()
        mask, labels = read.args
        out = []
        with torch.no_grad():
            for part in row_passes(self, rows_per_pass):
                found = forward(read.input_ids[part], mask[part], labels[part])
                out.append(found.detach().double().reshape(-1).cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def _of(self, batch: Any) -> "AnswerRows":
        """Rows of the instances of ``batch`` (no per-token rows)."""
        return dataclasses.replace(
            self,
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            scored=batch.scored,
            instances=len(batch),
            batch=batch,
            which=None,
        )

    def logits(self, model: Any, inputs_embeds: Tensor) -> Tensor:
        """The sum of each row's explained tokens' logits, each at the
        position that predicts it (see :meth:`Rows.logits`); padding on the
        left read with position ids counted over the real tokens."""
        from captum_iba.attr.batches import IGNORE_INDEX
        from captum_iba.attr.llm_batch import position_ids

        read = self.read()
        mask, labels = read.args
        target = labels[:, 1:]
        logits = model(
            inputs_embeds=inputs_embeds,
            attention_mask=mask,
            position_ids=position_ids(mask),
            use_cache=False,
        ).logits
        answer = target != IGNORE_INDEX
        picked = logits.gather(-1, target.clamp_min(0)[..., None].to(logits.device))
        return (picked.squeeze(-1) * answer).sum(1)

    def forward(self, model: Any = None) -> Callable[..., Tensor]:
        from captum_iba.attr.llm import CausalLMLogLikelihood

        return CausalLMLogLikelihood(self.model if model is None else model)

    def captum(self, run: CaptumRun) -> Tensor:
        """See :meth:`Rows.captum`: through Captum's LLM API (the module
        :mod:`~captum_iba.attr._llm_captum`), which replaces the method's
        forward by the answer's log-probability; a layer method at the
        token embeddings."""
        from captum_iba.attr._llm_captum import llm_captum

        return llm_captum(self, run)


def _check_span(scorer: Any, per_token: bool) -> None:
    """Refuses a batch that explains a part of each answer for a method
    that explains the whole answer only (``explains_spans``), or with
    per-token scores (each output token's are the whole answer's tokens,
    whatever part is explained)."""
    if not scorer.explains_spans:
        raise ValueError(
            f"{scorer.name} explains the whole answer only: it cannot explain "
            "a part of it (the batch's explained tokens); leave it out, or "
            "explain the whole answer"
        )
    if per_token:
        raise ValueError(
            "per_token scores each output token of the whole answer: explain "
            "a part of the answer without per_token (the batch's each_token)"
        )
