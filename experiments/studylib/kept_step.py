"""Study candidates for a causal LM's default at AttnLRP's cost (issue 78):
one deletion step, then more steps on shorter prompts.

:class:`KeptStep` wraps ``iba-deletion`` with one step (a scorer built by the
study) and runs it on the whole prompt (from lambda = 1/2, the first step of
``iba-deletion``), then once per :class:`Pass` on the prompt with some of the
scored tokens deleted for real, chosen by the scores so far: those ranked low
(``mode="kept"``: the top ``share`` kept) or those ranked high
(``mode="rest"``: the top ``share`` deleted), and in rest mode also the
bottom ``trim`` (the tokens the scores so far rank lowest: the pass reads
fewer tokens and costs less). A token's score is its mask averaged over the
passes; a token a pass deleted counts as kept (1) there when it was deleted
as one of the top (rest mode: the answer needs it), else as deleted (0). A
rest pass with ``combine="last"`` ranks the tokens it reads by its own mask
alone, between the top it deleted and the bottom it trimmed.

Each later pass runs on fewer tokens, so it costs less than a full step.
"""

from dataclasses import dataclass
from typing import Any, List

import torch

from captum_iba.attr.batches import AnswerScores, PromptBatch, scatter_back
from captum_iba.evaluation.iba import top_share


@dataclass(frozen=True)
class Pass:
    """One pass after the first: what it deletes (module docstring)."""

    mode: str = "rest"
    share: float = 0.25
    trim: float = 0.0
    #: ``"mean"``: the masks averaged over the passes; ``"last"`` (rest mode):
    #: the tokens the pass reads ranked by its mask alone, below those it
    #: deleted as the top and above those it trimmed.
    combine: str = "mean"

    @property
    def stem(self) -> str:
        """How the pass names a record: ``rest0.25`` (as before trims),
        ``rest0.25-trim0.3``, ``rest0.25-last``."""
        trim = f"-trim{self.trim:g}" if self.trim else ""
        last = "-last" if self.combine == "last" else ""
        return f"{self.mode}{self.share:g}{trim}{last}"


def parse_passes(given: str) -> List[Pass]:
    """``MODE:SHARE[:TRIM][+MODE:SHARE[:TRIM]...]`` as passes, e.g.
    ``rest:0.25:0.3+rest:0.5:0.3``."""
    passes = []
    for part in given.split("+"):
        mode, share, *more = part.split(":")
        trim = float(more[0]) if more and more[0] else 0.0
        combine = more[1] if len(more) > 1 else "mean"
        if mode not in ("kept", "rest") or len(more) > 2:
            raise ValueError(f"--second: MODE:SHARE[:TRIM[:COMBINE]]; got {part!r}")
        if (trim or combine != "mean") and mode != "rest":
            raise ValueError(f"--second: trims and combines are rest's; got {part!r}")
        if combine not in ("mean", "last"):
            raise ValueError(f"--second: COMBINE is mean or last; got {part!r}")
        passes.append(Pass(mode, float(share), trim, combine))
    return passes


class KeptStep:
    """One deletion step, then one per pass on a shorter prompt (module
    docstring)."""

    def __init__(self, one_step: Any, passes: List[Pass], rest_from: int = 0) -> None:
        self.one_step, self.passes = one_step, list(passes)
        #: The fewest scored tokens of a prompt that takes the passes (0: all;
        #: ``iba-fast`` 's rule: 128).
        self.rest_from = int(rest_from)
        self.settings = dict(
            one_step.settings,
            second="+".join(p.stem for p in self.passes),
            **({"rest_from": self.rest_from} if self.rest_from else {}),
        )

    def __getattr__(self, name: str) -> Any:  # the wrapped scorer's facts
        return getattr(self.__dict__["one_step"], name)

    def _pass(self, batch: PromptBatch, now: torch.Tensor, p: Pass) -> Any:
        """The pass's masks (deleted tokens 1 or 0), the top and the trimmed."""
        scored = batch.scored.bool()
        top = top_share(now, scored, p.share)
        out = p.mode == "rest"
        drop = top if out else scored & ~top
        low = top_share(-now, scored, p.trim) if out and p.trim else top & False
        drop = drop | low
        pad = int(getattr(self.one_step, "pad_token_id", 0) or 0)
        small, cols = batch.without(drop, pad)  # as the degradation test deletes
        found = self.one_step.attribute(small).answer.detach()
        mask = scatter_back(found, cols, now.shape[1])
        mask = torch.where(top, torch.ones_like(mask), mask) if out else mask
        return mask, top, low

    def attribute(self, batch: PromptBatch) -> AnswerScores:
        first = self.one_step.attribute(batch).answer.detach()
        long = (batch.scored.sum(1) >= self.rest_from).nonzero().flatten()
        if len(long) == 0:
            return AnswerScores(answer=first, tokens=None)
        if len(long) < len(first):  # the passes on the long prompts alone
            out = first.clone()
            out[long] = self._passes(batch.rows(long.tolist()), first[long])
            return AnswerScores(answer=out, tokens=None)
        return AnswerScores(answer=self._passes(batch, first), tokens=None)

    def _passes(self, batch: PromptBatch, first: torch.Tensor) -> torch.Tensor:
        scored = batch.scored.bool()
        total, now = first.clone(), first
        for i, p in enumerate(self.passes, start=2):
            mask, top, low = self._pass(batch, now, p)
            total = total + mask
            if p.combine == "last":  # its own order between the top and the low
                total = torch.where(top, 2 + now, torch.where(low, now - 2, mask))
                total = total * i  # so that total / i is that order
            now = total / i
        return torch.where(scored, now, first)
