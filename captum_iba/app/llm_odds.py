"""How much a causal LM wanted the answer it is explained for.

An explanation says which prompt words an answer's log-probability needs; it
cannot say whether the model wanted that answer at all. A weak model that
gives " positive" a probability of 0.2 for a negative review, or puts
"France?" last while answering "The capital of France", is explained
faithfully: the explanation shows what *that* model used. :func:`answer_odds`
measures it with one forward pass - each answer token's probability, the
whole answer's, and the model's strongest alternatives for the first answer
token - and an :class:`~captum_iba.app.page.Explanation` of the answer
(its :class:`~captum_iba.app.subjects.PromptSubject`) shows it on the page and
in the listing (docs/llm.rst, "Reading a result").
"""

import math
import textwrap
from dataclasses import dataclass
from typing import Any, List, Tuple

import torch

from captum_iba.app.words import token_labels

__all__ = [
    "LOW_PROBABILITY",
    "READING_NOTE",
    "TOP_ALTERNATIVES",
    "AnswerProbability",
    "answer_odds",
]

#: What the answer's probability tells a reader of the explanation (a note
#: of the page; docs/llm.rst, "Reading a result").
READING_NOTE = (
    "The answer's probability says how much the model wanted it: a low one, "
    "or another first token preferred, marks a weak or unsure model, whose "
    "explanation shows what it used, not what a reader would (docs/llm.rst, "
    "'Reading a result')."
)

#: How many of the model's strongest next tokens are shown.
TOP_ALTERNATIVES = 5

#: A whole answer's probability below which the terminal's listing prints
#: :data:`READING_NOTE` too (the page always shows it): 1e-3, a model that
#: barely wants its answer (an answer that ignores the query was at 5e-5).
LOW_PROBABILITY = 1e-3


@dataclass(frozen=True)
class AnswerProbability:
    """The probabilities of an answer under the model that gave it.

    Attributes:
        tokens (list of str): The answer's tokens, as decoded (a byte piece
            labelled with its character: :func:`~captum_iba.app.words.token_labels`).
        log_probs (list of float): Each token's log-probability (nats) given
            the prompt and the answer before it.
        alternatives (list of (str, float)): The model's most probable tokens
            at the first answer position, with their probabilities, best
            first.
        first_rank (int): The first answer token's rank among all tokens
            there (1: the model's own first choice).
    """

    tokens: List[str]
    log_probs: List[float]
    alternatives: List[Tuple[str, float]]
    first_rank: int

    @property
    def log_prob(self) -> float:
        """The whole answer's log-probability (nats): the tokens' sum."""
        return float(sum(self.log_probs))

    @property
    def prob(self) -> float:
        """The whole answer's probability."""
        return math.exp(self.log_prob)

    @property
    def low(self) -> bool:
        """Whether the model barely wants the answer: its probability is
        below :data:`LOW_PROBABILITY`, or another first token is preferred."""
        return self.prob < LOW_PROBABILITY or self.first_rank > 1

    def listed(self) -> List[str]:
        """The terminal's lines: :meth:`said`, and for a :attr:`low` answer
        the page's :data:`READING_NOTE` (wrapped)."""
        lines = [f"{what.lower()}: {text}" for what, text in self.said()]
        if self.low:
            lines += textwrap.wrap(f"note: {READING_NOTE}", 88, subsequent_indent="  ")
        return lines

    def said(self) -> List[Tuple[str, str]]:
        """Two facts for the page and the listing: the answer's probability
        (whole, then per token) and the strongest alternatives."""
        per = ", ".join(
            f"{t!r} {math.exp(lp):.3g}" for t, lp in zip(self.tokens, self.log_probs)
        )
        rank = "its first choice" if self.first_rank == 1 else f"#{self.first_rank}"
        best = ", ".join(f"{t!r} {p:.3g}" for t, p in self.alternatives)
        return [
            (
                "Answer's probability",
                f"{self.prob:.3g} (log-probability {self.log_prob:.3g} nats); "
                f"per token: {per}",
            ),
            (
                "Model's strongest first tokens",
                f"{best} (the answer's first token is {rank})",
            ),
        ]


@torch.no_grad()
def answer_odds(
    model: Any, tokenizer: Any, batch: Any, row: int = 0, k: int = TOP_ALTERNATIVES
) -> AnswerProbability:
    """The probabilities of ``batch``'s answer of ``row`` under ``model``.

    Args:
        model (nn.Module): The causal LM.
        tokenizer: Its tokenizer (to decode the tokens).
        batch (PromptBatch): Prompts and answers
            (:func:`~captum_iba.attr.llm_batch.prompt_batch`).
        row (int): Which one. Default 0.
        k (int): How many alternatives. Default :data:`TOP_ALTERNATIVES`.

    Returns:
        AnswerProbability: One forward pass's verdict.
    """
    from captum_iba.attr.llm_batch import position_ids

    ids = batch.input_ids[row : row + 1]
    mask = batch.attention_mask[row : row + 1]
    device = next(model.parameters()).device
    logits = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=position_ids(mask).to(device),
        use_cache=False,
    ).logits[0]
    columns = batch.answer_mask[row].nonzero().flatten().tolist()
    logp = torch.log_softmax(logits[[c - 1 for c in columns]].float(), dim=-1)
    answer = [int(ids[0, c]) for c in columns]
    picked = logp[torch.arange(len(answer)), answer].tolist()
    first = logp[0]
    top = first.topk(min(k, first.numel()))
    return AnswerProbability(
        tokens=token_labels(tokenizer, answer),
        log_probs=picked,
        alternatives=[
            (token_labels(tokenizer, [int(i)])[0], math.exp(float(v)))
            for v, i in zip(top.values, top.indices)
        ],
        first_rank=int((first > first[answer[0]]).sum()) + 1,
    )
