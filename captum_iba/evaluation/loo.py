"""Leave-one-out by deletion: exact, batched, the cheapest strong anchor.

A token's score is how much the target's probability falls when that token
alone is deleted from the input (the sequence compacted, masks and segment ids
following, exactly as the degradation test deletes):

.. math::
    s_i = p(y \\mid x) - p(y \\mid x_{\\setminus i}).

It is the degradation test's first step for every token at once, so it is
hard to beat at the first removal level; it ignores interactions between
tokens.

A causal LM's leave-one-out (``ablation``) is Captum's ``FeatureAblation``
through its ``LLMAttribution`` (:mod:`~captum_iba.evaluation.captum_prompts`):
the token replaced by the pad token, the drop of the answer's
log-probability.
"""

from typing import Any, Callable, List, Optional

import torch
from captum.attr import FeatureAblation
from torch import Tensor

from captum_iba._utils.common import hf_call
from captum_iba.attr.rows import CaptumRun, Rows
from captum_iba.evaluation.captum_prompts import CaptumPromptScorer
from captum_iba.metrics._removal import delete_tokens

__all__ = ["LeaveOneOutScorer"]


class LeaveOneOutScorer(CaptumPromptScorer):
    """Leave-one-out occlusion by deletion (see the module docstring).

    One forward row per removable token, batched over instances and tokens;
    a pass holds at most ``max_tokens_per_pass`` tokens (rows x width).

    Args:
        model (Callable): HF model, or ``(ids, mask[, tt]) -> logits``.
        output (str): A classifier's: ``"probs"`` (default: the drop of the
            target's softmax probability, what the degradation test measures)
            or ``"log_odds"`` (the drop of its log-odds).
        max_tokens_per_pass (int): A classifier's: bounds the memory of a
            forward pass. Default 16,384. The scores do not depend on it.
        **kwargs: See :class:`~captum_iba.evaluation.TokenScorer`.
    """

    meaning = (
        "how much the class's {output} drops when the token is deleted: + for "
        "the class, - against it"
    )

    def __init__(
        self,
        model: Callable[..., Any],
        output: str = "probs",
        max_tokens_per_pass: int = 16384,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self._refuse_unread(
            output=output != "probs",
            max_tokens_per_pass=max_tokens_per_pass != 16384,
        )
        if output not in ("probs", "log_odds"):
            raise ValueError(f"output must be 'probs' or 'log_odds'; got {output!r}")
        if isinstance(max_tokens_per_pass, bool) or max_tokens_per_pass < 1:
            raise ValueError("max_tokens_per_pass must be a positive integer")
        self.output = output
        self.max_tokens_per_pass = int(max_tokens_per_pass)
        self._record(
            dict(
                removal="delete",
                output=output,
                max_tokens_per_pass=self.max_tokens_per_pass,
            )
        )

    def _captum_run(self) -> CaptumRun:
        """Captum's ``FeatureAblation`` (a token replaced by the pad token)
        where a kind runs Captum's class its own way (a causal LM's LLM
        API); where the model is read directly, each token deleted
        (:meth:`_deleted`), as the degradation test deletes it."""
        return CaptumRun(FeatureAblation, seed=self.seed, own=self._deleted)

    def _value(self, logits: Tensor, target: Tensor) -> Tensor:
        logp = torch.log_softmax(logits.double(), dim=-1)
        lp = logp.gather(1, target[:, None]).squeeze(1)
        if self.output == "probs":
            return lp.exp()
        others = logp.scatter(1, target[:, None], float("-inf"))
        return lp - torch.logsumexp(others, dim=1)

    def _run(self, tensors: List[Optional[Tensor]], lengths: Tensor) -> Tensor:
        """Logits of compacted rows, shortest first, each pass trimmed to its
        longest row and holding at most ``max_tokens_per_pass`` tokens."""
        order = torch.sort(lengths, stable=True).indices
        outs, start = [], 0
        while start < order.numel():
            width = max(int(lengths[order[start]]), 1)
            stop = start + 1
            while stop < order.numel():
                grown = max(int(lengths[order[stop]]), 1)
                if grown * (stop + 1 - start) > self.max_tokens_per_pass:
                    break
                width, stop = grown, stop + 1
            sel = order[start:stop]
            part = [None if t is None else t[sel, :width] for t in tensors]
            outs.append(hf_call(self.model, *part))
            start = stop
        logits = torch.cat(outs)
        out = torch.empty_like(logits)
        out[order] = logits
        return out

    def _deleted(self, rows: Rows) -> Tensor:
        """``(R, L)``: how far the explained output drops when each removable
        token of a row is deleted (one forward row per token, batched)."""
        read = rows.read()
        ids, mask = rows.input_ids, rows.attention_mask
        tt = read.args[1] if len(read.args) > 1 else None
        target = read.target
        assert target is not None
        removable = rows.removable()
        rows, cols = removable.nonzero(as_tuple=True)
        scores = torch.zeros(ids.shape, dtype=torch.float64, device=ids.device)
        if rows.numel() == 0:
            return scores
        keep = mask.bool()[rows].clone()
        keep[torch.arange(rows.numel(), device=ids.device), cols] = False
        tensors = [ids[rows], mask[rows], None if tt is None else tt[rows]]
        compacted, lengths = delete_tokens(
            keep.cpu(),
            [None if t is None else t.cpu() for t in tensors],
            [self.pad_token_id, 0, 0],
        )
        compacted = [None if t is None else t.to(ids.device) for t in compacted]
        with torch.no_grad():
            original = self._value(hf_call(self.model, ids, mask, tt), target)
            degraded = self._value(self._run(compacted, lengths), target[rows])
        scores[rows, cols] = original[rows] - degraded
        return scores
