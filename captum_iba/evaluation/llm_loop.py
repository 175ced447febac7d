"""The corpus loop on a causal LM: every instance a zero-shot prompt, its
answer the model's choice among the task's answer words (or the gold word).

:class:`PromptJob` is a :class:`~captum_iba.evaluation.loop.CorpusJob` whose
units are :class:`~captum_iba.attr.batches.PromptBatch` es; it differs from
a classifier's job only by its task's hooks (a unit, its batch, the scores
read from the answer, the test, a row), the method loop being
:func:`~captum_iba.evaluation.loop.score_unit`'s: the corpus
engine (``captum-iba evaluate --model <causal LM>``, many processes,
resumable) runs it as it runs a classifier's job. Per unit, the model's
choice is read once (:class:`~captum_iba.attr.llm_choice.CausalLMChoice`),
every method scores the prompt tokens for the answer word explained, and the
degradation test removes the content (the review, the article, the sentence
pair; never the instruction) in the method's order, tracking the answer's
probability among the answer words
(:func:`~captum_iba.metrics.choice_degradation_test`).
"""

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import Tensor

from captum_iba._utils.common import model_device
from captum_iba.attr.llm_batch import PromptBatch, prompt_batch
from captum_iba.attr.llm_choice import CausalLMChoice
from captum_iba.evaluation.llm_degradation import content_mask, degrade_scores
from captum_iba.evaluation.loop import CorpusJob
from captum_iba.evaluation.sources import split_sources, with_sources
from captum_iba.metrics import DegradationResult

__all__ = ["PromptJob", "PromptUnit", "content_words", "scorer_batch"]


def content_words(prompt: str, span: Tuple[int, int]) -> List[Tuple[int, int]]:
    """A prompt task's sources: the words of its content (characters
    ``span`` of ``prompt``; runs of non-whitespace,
    :func:`~captum_iba.evaluation.sources.split_sources` with ``"word"``), as
    character spans of the prompt."""
    a, b = span
    return split_sources(prompt[a:b], "word", offset=a)


def scorer_batch(
    scorer: Any,
    tokenizer: Any,
    batch: PromptBatch,
    spans: Sequence[Tuple[int, int]],
    chat: bool = False,
) -> PromptBatch:
    """A prompt task's batch as ``scorer`` explains it: as it is, or for a
    method that needs a context's sources (``contextcite-<A>``, ``loso``,
    ``shapley-sources``, ``at2``, ``iba-sources``: its ``needs_sources``)
    with the words of each prompt's content as its sources
    (:func:`content_words`;
    :func:`~captum_iba.evaluation.sources.with_sources`), every token of a
    word then holding the word's score.

    A content of one word is one source, scored by the method's own rule
    (leave-one-source-out's and Shapley's: the effect of leaving it out; a
    surrogate's: its fit over the two subsets; ``iba-sources``: its one
    mask weight); its removal order is the same whatever the score.

    Args:
        scorer: The method's scorer.
        tokenizer: The tokenizer ``batch`` was made with.
        batch (PromptBatch): The prompts and answers.
        spans (Sequence of (int, int)): Per prompt, its content's characters.
        chat (bool): Whether ``batch`` wrapped the prompts in the chat
            template.

    Raises:
        ValueError: For such a method, when a prompt's content has no word.
    """
    if not getattr(scorer, "needs_sources", False):
        return batch
    words = []
    for row, (prompt, span) in enumerate(zip(batch.prompts, spans)):
        words.append(content_words(prompt, span))
        if not words[-1]:
            raise ValueError(
                f"{scorer.name} scores the words of a prompt's content as its "
                f"sources, and prompt {row}'s content has none"
            )
    return with_sources(tokenizer, batch, words, chat=chat, least=1)


@dataclass(frozen=True)
class PromptUnit:
    """One unit of prompts, built once for every method.

    Attributes:
        indices (list[int]): The instances (indices into the corpus).
        batch (PromptBatch): Their prompts and the answer words explained.
        content (Tensor): ``(B, W)`` bool, the removable tokens.
        target (Tensor): ``(B,)`` each answer's index among the words.
        probs (Tensor): ``(B, C)`` the model's probabilities of the words
            (among them) on the intact prompts.
    """

    indices: List[int]
    batch: PromptBatch
    content: Tensor
    target: Tensor
    probs: Tensor


@dataclass
class PromptJob(CorpusJob):
    """A corpus run on a causal LM (see the module docstring).

    Besides :class:`~captum_iba.evaluation.loop.CorpusJob`'s fields (its
    ``target`` ``"predicted"`` explains the model's own choice, ``"label"``
    the gold word; ``max_length`` is not used: the prompts were made to fit
    the model's positions before, their content cut where asked), it holds
    the prompts.

    Attributes:
        prompts (Sequence[str]): Each instance's prompt.
        spans (Sequence of (int, int)): Where its content lies (characters).
        answers (Sequence[str]): The answer word of each class.
        choices (Sequence[int]): Their token ids (one token each).
        chat (bool): Whether the prompts are user turns of the chat template.
        cut (Sequence[int]): Per instance, the content tokens cut to fit
            (recorded per row as ``content_tokens_cut``); empty: none was.
    """

    prompts: Sequence[str] = ()
    spans: Sequence[Tuple[int, int]] = ()
    answers: Sequence[str] = ()
    choices: Sequence[int] = field(default_factory=list)
    chat: bool = False
    cut: Sequence[int] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        n = len(self.data)
        if len(self.prompts) != n or len(self.spans) != n:
            raise ValueError(
                f"{len(self.prompts)} prompts and {len(self.spans)} content spans "
                f"for {n} instances"
            )
        if len(self.answers) != len(self.choices) or len(self.choices) < 2:
            raise ValueError(
                f"{len(self.answers)} answer words for {len(self.choices)} token "
                "ids: give one id per word, two or more"
            )

    def unit_tensors(self, indices: Sequence[int]) -> PromptUnit:
        """The unit's prompts, the model's choice on them, and the answers
        explained (its choice, or the gold word): each a single token, put in
        the answer's place of the batch tokenised once."""
        prompts = [self.prompts[i] for i in indices]
        first = prompt_batch(  # any answer word: the choice is read before it
            self.tokenizer, prompts, [self.answers[0]] * len(prompts), chat=self.chat
        )
        device = model_device(self.model)
        choice = CausalLMChoice(self.model, self.choices)
        with torch.no_grad():  # the answer token follows the read position
            logits = choice(
                first.input_ids.to(device),
                first.attention_mask.to(device),
                first.answer_mask.to(device),
            ).cpu()
        if self.target == "label":
            target = torch.tensor([int(self.data.labels[i]) for i in indices])
        else:
            target = logits.argmax(1)
        words = torch.tensor(list(self.choices))[target]  # the answer tokens
        answer = first.answer_mask
        ids = first.input_ids.masked_scatter(answer, words)
        labels = first.labels.masked_scatter(answer, words)
        batch = replace(first, input_ids=ids, labels=labels)
        spans = [self.spans[i] for i in indices]
        content = content_mask(self.tokenizer, batch, spans, chat=self.chat)
        probs = logits.double().softmax(1)
        return PromptUnit(list(indices), batch, content, target, probs)

    def batch_of(self, unit: Any, scorer: Any = None) -> PromptBatch:
        """The unit's prompts and the answers explained, as ``scorer`` takes
        them (:func:`scorer_batch`)."""
        spans = [self.spans[i] for i in unit.indices]
        return scorer_batch(scorer, self.tokenizer, unit.batch, spans, self.chat)

    def unit_scores(self, found: Any) -> Tensor:
        """The scores of the prompt tokens for the whole answer, on the
        CPU."""
        return found.answer.detach().cpu()

    def test(
        self, unit: Any, name: str, scorer: Any, scores: Tensor, seconds: float
    ) -> DegradationResult:
        """The content removed in the order of method ``name``'s ``scores``,
        the answer's probability among the answer words tracked
        (:func:`~captum_iba.evaluation.llm_degradation.degrade_scores`);
        ``seconds`` (per instance) recorded with the scorer's settings."""
        record = dict(scorer.settings, seconds_per_instance=seconds)
        return degrade_scores(
            self.model,
            unit.batch,
            scores,
            unit.content,
            self.degradation_options(scorer),
            metadata=dict(
                method=name,
                seed=getattr(scorer, "seed", None),
                attribution=dict(record, setting=self.preset.name),
            ),
            choices=self.choices,
        )

    def instance_row(self, unit: Any, j: int, scores: Tensor) -> Dict[str, Any]:
        """The record of the unit's ``j``-th prompt: the instance, its prompt
        and the answer word explained, the class explained and chosen, and
        the prompt's tokens (template and answer included, padding left out)
        with the method's scores (zero at the tokens not scored)."""
        index, batch = unit.indices[j], unit.batch
        real = batch.attention_mask[j].bool()
        ids = batch.input_ids[j][real]
        target = int(unit.target[j])
        row = self.instance_fields(index, target, unit.probs[j])
        row.update(
            prompt=self.prompts[index],
            answer=self.answers[target],
            tokens=self.tokenizer.convert_ids_to_tokens(ids.tolist()),
            input_ids=ids.tolist(),
            scores=scores[j][real].tolist(),
        )
        if self.cut:
            row["content_tokens_cut"] = int(self.cut[index])
        return row

    def row_fields(self, fields: Dict[str, str]) -> Dict[str, str]:
        """The engine's field descriptions, as a prompt's record has them."""
        words = ", ".join(repr(a) for a in self.answers)
        rule = "the model's choice" if self.target == "predicted" else "the gold label"
        out = dict(fields)
        out.update(
            target=f"the answer explained, as the index of its word among {words}: "
            f"{rule}",
            predicted="the model's choice (index): its most probable answer word",
            target_probability="the model's probability of the answer explained "
            "among the answer words (softmax over their next-token logits)",
            prompt="the prompt given to the causal LM (before any chat template)",
            answer="the answer word explained",
            tokens="the prompt's tokens (template and answer included), padding "
            "left out",
            scores="one score per token, zero at tokens not scored (the template, "
            "special tokens, the answer); the unit is the method's "
            "(settings.json: scores.<method>.meaning)",
        )
        if self.cut:
            out["content_tokens_cut"] = (
                "the content's tokens cut from its end to fit --max-length (the "
                "instruction never cut)"
            )
        return out
