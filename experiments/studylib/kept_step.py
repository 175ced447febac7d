"""Study candidates for a causal LM's default at AttnLRP's cost (issue 78):
one deletion step, then a second on a shorter prompt.

:class:`KeptStep` wraps ``iba-deletion`` with one step (a scorer built by the
study) and runs it twice: first on the whole prompt (from lambda = 1/2, the
first step of ``iba-deletion``), then on the prompt with the scored tokens the
first step ranked low deleted for real (``mode="kept"``: the top ``share``
kept) or with those it ranked high deleted (``mode="rest"``: the top
``share`` deleted). A token's score is its mask averaged over the two steps
(``iba-deletion``'s readout), a deleted token's second mask being 0 (kept
mode) - or, in rest mode, 1 for the tokens taken out (they are the ones the
answer needs) and the second step's mask for the rest.

The second pass runs on fewer tokens, so it costs less than a full step.
"""

from typing import Any

import torch

from captum_iba.attr.batches import AnswerScores, PromptBatch
from captum_iba.attr.llm_batch import IGNORE_INDEX


def _right_compacted(batch: PromptBatch, keep: torch.Tensor, pad: int) -> Any:
    """``batch`` with the positions not in ``keep`` deleted, each row's kept
    positions moved to the right end (left padding, as ``prompt_batch``)."""
    order = torch.sort(keep.to(torch.uint8), dim=1, stable=True).indices
    width = int(keep.sum(1).max())
    cols = order[:, -width:]
    held = keep.gather(1, cols)

    def take(t: torch.Tensor, fill: Any) -> torch.Tensor:
        return t.gather(1, cols).masked_fill(~held, fill)

    return (
        PromptBatch(
            input_ids=take(batch.input_ids, pad),
            attention_mask=take(batch.attention_mask, 0),
            labels=take(batch.labels, IGNORE_INDEX),
            scored=take(batch.scored, False),
            prompts=batch.prompts,
        ),
        cols,
        held,
    )


class KeptStep:
    """Two deletion steps, the second on a shorter prompt (module docstring)."""

    def __init__(self, one_step: Any, share: float = 0.5, mode: str = "kept") -> None:
        self.one_step, self.share, self.mode = one_step, share, mode
        self.settings = dict(one_step.settings, second=mode, share=share)

    def __getattr__(self, name: str) -> Any:  # the wrapped scorer's facts
        return getattr(self.__dict__["one_step"], name)

    def attribute(self, batch: PromptBatch) -> AnswerScores:
        first = self.one_step.attribute(batch).answer.detach()
        scored = batch.scored.bool()
        n = scored.sum(1)
        k = torch.clamp((n.float() * self.share).round().long(), min=1)
        ranked = first.masked_fill(~scored, float("-inf"))
        rank = torch.argsort(torch.argsort(ranked, dim=1, descending=True), dim=1)
        top = scored & (rank < k[:, None])
        out = self.mode == "rest"
        drop = top if out else scored & ~top
        keep = batch.attention_mask.bool() & ~drop
        pad = int(getattr(self.one_step, "pad_token_id", 0) or 0)
        small, cols, held = _right_compacted(batch, keep, pad)
        second_small = self.one_step.attribute(small).answer.detach()
        second = torch.zeros_like(first)
        second.scatter_(1, cols, torch.where(held, second_small, 0.0))
        if out:
            second = torch.where(drop, torch.ones_like(second), second)
        scores = torch.where(scored, (first + second) / 2, first)
        return AnswerScores(answer=scores, tokens=None)
