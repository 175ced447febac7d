"""The degradation test for a causal LM's answers, from a method's scores.

:func:`content_mask` finds a prompt's content (the review, the article, the
premise and hypothesis) among its tokens from the content's characters; then
:func:`degrade_answers` scores a :class:`~captum_iba.attr.batches.PromptBatch`
with any method that explains causal LMs (``scorer.attribute(batch)``)
and runs :func:`~captum_iba.metrics.prompt_degradation_test` on its answers,
the content removed in the method's order, the instruction, the chat
template and the answer kept.
"""

from typing import Any, List, Mapping, Optional, Sequence, Tuple

from torch import Tensor

from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.attr.llm_choice import CausalLMChoice
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.sources import source_index
from captum_iba.metrics import (
    DegradationOptions,
    choice_degradation_test,
    prompt_degradation_test,
)
from captum_iba.metrics.result import DegradationResult

__all__ = ["content_mask", "degrade_answers", "degrade_scores"]


def content_mask(
    tokenizer: Any,
    batch: PromptBatch,
    spans: Sequence[Tuple[int, int]],
    chat: bool = False,
) -> Tensor:
    """``(B, W)`` bool: the prompt tokens of ``batch`` that lie in each
    prompt's content, given as characters ``(start, end)`` of the prompt (the
    content as the one source of :func:`~captum_iba.evaluation.sources.source_index`).

    Args:
        tokenizer: The tokenizer ``batch`` was made with (a fast one: its
            offsets locate the tokens).
        batch (PromptBatch): Prompts padded left
            (:func:`~captum_iba.attr.llm_batch.prompt_batch`).
        spans (Sequence of (int, int)): Per prompt, where its content is.
        chat (bool): Whether ``batch`` wrapped the prompts in the chat
            template (as ``prompt_batch``'s ``chat``).

    Raises:
        ValueError: For a span count that differs from the prompts, a
            tokenizer without offsets, or a span that holds no token.
    """
    return source_index(tokenizer, batch, [[span] for span in spans], chat) >= 0


def degrade_answers(
    scorer: TokenScorer,
    batch: PromptBatch,
    content: Tensor,
    options: Optional[DegradationOptions] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    choices: Optional[Sequence[int]] = None,
) -> DegradationResult:
    """``scorer``'s scores of ``batch``, tested: the content removed in their
    order, the probability of each answer tracked - its absolute probability,
    or with ``choices`` its probability among a task's answer words
    (:func:`~captum_iba.metrics.choice_degradation_test`).

    Args:
        scorer (TokenScorer): A method that explains causal LMs
            (``build_scorers``).
        batch (PromptBatch): Prompts and the answers to explain.
        content (Tensor): ``(B, W)`` bool, the removable tokens
            (:func:`content_mask`).
        options (DegradationOptions, optional): Default: the paper's levels,
            deletion, from the scorer's tokenizer (its special and pad ids).
        metadata (Mapping, optional): Default: the scorer's name and settings.
        choices (Sequence of int, optional): The token ids of the task's
            answer words, in class order; each answer is then one of them,
            one token. Default None: the answer's absolute probability.

    Returns:
        DegradationResult: As :func:`~captum_iba.metrics.prompt_degradation_test`.
    """
    if options is None:
        options = DegradationOptions.for_tokenizer(scorer.tokenizer)
    scores = scorer.attribute(batch).answer
    if metadata is None:
        metadata = {"method": scorer.name, "attribution": dict(scorer.settings)}
    return degrade_scores(
        scorer.model, batch, scores, content, options, metadata, choices
    )


def degrade_scores(
    model: Any,
    batch: PromptBatch,
    scores: Tensor,
    content: Tensor,
    options: DegradationOptions,
    metadata: Optional[Mapping[str, Any]] = None,
    choices: Optional[Sequence[int]] = None,
) -> DegradationResult:
    """The degradation test of ``scores`` of ``batch`` 's prompt tokens (as
    :func:`degrade_answers`, the scores given).

    Args:
        model (Any): The causal LM.
        batch (PromptBatch): Prompts and the answers explained.
        scores (Tensor): ``(B, W)`` a method's scores of them.
        content (Tensor): ``(B, W)`` bool, the removable tokens.
        options (DegradationOptions): The test's options.
        metadata (Mapping, optional): Recorded in the result.
        choices (Sequence of int, optional): As :func:`degrade_answers`'.

    Returns:
        DegradationResult: The test's result.
    """
    scores = scores.detach().cpu()
    if choices is not None:
        sizes = batch.answer_mask.sum(1)
        if bool((sizes != 1).any()):
            raise ValueError(
                "with choices, each answer is one answer word, one token; the "
                f"answers have {sizes.tolist()} tokens"
            )
        chosen = batch.input_ids[batch.answer_mask]
        return choice_degradation_test(
            CausalLMChoice(model, choices),
            batch.input_ids,
            scores,
            batch.answer_mask,
            target=_choice_index(chosen, choices),
            attention_mask=batch.attention_mask,
            removable=content,
            options=options,
            metadata=metadata,
        )
    return prompt_degradation_test(
        CausalLMLogLikelihood(model),
        batch.input_ids,
        scores,
        batch.answer_mask,
        attention_mask=batch.attention_mask,
        removable=content,
        options=options,
        metadata=metadata,
    )


def _choice_index(answers: Tensor, choices: Sequence[int]) -> List[int]:
    """Each answer token's index among ``choices``.

    Raises:
        ValueError: For an answer of more than one token or not a choice.
    """
    where = {int(c): i for i, c in enumerate(choices)}
    bad = sorted({int(a) for a in answers} - set(where))
    if bad:
        raise ValueError(
            f"answer token(s) {bad} are not among the choices {list(choices)}: "
            "each answer must be one of the task's answer words, one token"
        )
    return [where[int(a)] for a in answers]
