"""The two kinds of batch a method explains, one per task.

* :class:`TokenBatch` - a classifier's batch: token ids, the class explained
  per instance, the attention mask and the segment ids; a method scores each
  token for the class (``(B, L)``);
* :class:`~captum_iba.attr.llm_batch.PromptBatch` - a causal LM's batch:
  prompts and their answers (:func:`~captum_iba.attr.llm_batch.prompt_batch`);
  a method scores each prompt token for the answer
  (:class:`~captum_iba.attr.llm.AnswerScores`).

Every method takes either through the one contract
``scorer.attribute(batch)`` (:class:`~captum_iba.evaluation.TokenScorer`).
A causal LM's passes are sized by :func:`rows_per_pass` (rows x tokens
within :data:`ROW_TOKENS`).
"""

from dataclasses import dataclass
from typing import Any, Optional

from torch import Tensor

__all__ = ["ROW_TOKENS", "TokenBatch", "rows_per_pass"]

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
