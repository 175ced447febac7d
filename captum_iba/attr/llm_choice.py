r"""A causal LM's choice among a task's answer words, read as a classifier.

A zero-shot prompt task (a review and "positive or negative?") asks a causal
LM to choose among a few answer words, each one token. Its choice is one
next-token distribution: :class:`CausalLMChoice` returns the log-probability
of every answer word there, ``(B, C)``, whose softmax over the ``C`` words is
the model's probability of each answer *among the task's answers*,

.. math::

    p(c \mid \text{prompt}, \text{choices}) =
    \frac{p(w_c \mid \text{prompt})}{\sum_{c'} p(w_{c'} \mid \text{prompt})}.

A small chat model gives its label words a tiny absolute probability as its
first answer token (it starts its answers otherwise), so the degradation test
tracks this normalised probability
(:func:`~captum_iba.metrics.choice_degradation_test`); as a ``(B, C)``
forward it is also a classifier any attribution method can explain
(``target`` = the answer's index).
"""

import inspect
from typing import Any, Optional, Sequence

import torch
from torch import Tensor, nn

from captum_iba.attr.llm_batch import position_ids

__all__ = ["CausalLMChoice"]


class CausalLMChoice(nn.Module):
    r"""``forward(input_ids, attention_mask, answer_mask) -> (B, C)``: the
    log-probability, in nats, of each answer word as the next token where
    the answer starts.

    The answer starts at each row's first ``answer_mask`` position (its
    answer token is then part of the ids, as in a
    :class:`~captum_iba.attr.batches.PromptBatch`) or, without
    ``answer_mask``, after the row's last real token (the ids are the prompt
    alone). Position ids are counted over real tokens, so padding on either
    side gives the same numbers. Only the positions read are projected to the
    vocabulary (``logits_to_keep`` where the model takes it).

    Args:
        model (nn.Module): A Hugging Face ``...ForCausalLM``.
        choices (Sequence[int]): The token id of each answer word, in class
            order (:func:`~captum_iba.app.llm_tasks.answer_token_ids`).

    Raises:
        ValueError: For fewer than two choices, or a repeated one.
    """

    def __init__(self, model: nn.Module, choices: Sequence[int]) -> None:
        super().__init__()
        choices = [int(c) for c in choices]
        if len(choices) < 2 or len(set(choices)) != len(choices):
            raise ValueError(
                f"choices must be two or more distinct token ids; got {choices}"
            )
        self.model = model
        self.register_buffer("choices", torch.tensor(choices), persistent=False)
        params = inspect.signature(model.forward).parameters
        self._keeps = "logits_to_keep" in params
        self.training = False  # its own flag only: the model keeps its mode

    @property
    def config(self) -> Any:
        """The wrapped model's config (its pad token id)."""
        return getattr(self.model, "config", None)

    def read_at(self, attention_mask: Tensor, answer_mask: Optional[Tensor]) -> Tensor:
        """``(B,)`` the position whose next-token distribution is the choice.

        Raises:
            ValueError: For a row with no answer token, or one whose answer
                has no token before it.
        """
        if answer_mask is None:
            width = attention_mask.shape[1]
            last = width - 1 - attention_mask.flip(1).long().argmax(1)
            return last
        answer = answer_mask.bool()
        if not bool(answer.any(1).all()):
            raise ValueError("answer_mask marks no answer token in some row")
        first = answer.long().argmax(1)
        if bool((first == 0).any()):
            raise ValueError("an answer starts at position 0: no token predicts it")
        return first - 1

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Optional[Tensor] = None,
        answer_mask: Optional[Tensor] = None,
    ) -> Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        at = self.read_at(attention_mask, answer_mask).to(input_ids.device)
        keep = torch.unique(at)  # sorted: the columns the logits keep
        extra = {"logits_to_keep": keep} if self._keeps else {}
        logits = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids(attention_mask),
            use_cache=False,
            **extra,
        ).logits
        column = torch.searchsorted(keep, at) if self._keeps else at
        rows = torch.arange(input_ids.shape[0], device=logits.device)
        logp = torch.log_softmax(logits[rows, column].float(), dim=-1)
        return logp[:, self.choices.to(logp.device)]
