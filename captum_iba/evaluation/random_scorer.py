"""The floor of every comparison: seeded uniform random scores, of a
classifier's tokens or a causal LM's prompt tokens."""

from typing import Any, Callable, Optional

import torch
from torch import Tensor

from captum_iba._utils.common import instance_seed
from captum_iba.attr.rows import Rows
from captum_iba.evaluation.scorers import TokenScorer

__all__ = ["RandomScorer", "seeded_uniform"]


class RandomScorer(TokenScorer):
    """Seeded uniform random scores (a lower bound for any method).

    Each instance's scores are drawn at its real tokens from a generator seeded
    with :func:`~captum_iba._utils.common.instance_seed` (``seed`` and the
    instance's token ids): an instance gets the same scores in any batch,
    order, padding width or process. A causal LM's prompt gets them at its
    scored tokens (every output token the answer's draw).

    Args:
        model (Callable, optional): Unused but for its kind (kept for a
            uniform interface).
        seed (int): Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    #: It reads no model: a classifier's target is not resolved for it.
    reads_model = False
    unit = "random"
    meaning = "uniform random numbers in [0, 1): a floor to compare with, no meaning"
    prompt_meaning = "uniform random numbers in [0, 1): a floor to compare with"

    def __init__(
        self, model: Optional[Callable[..., Any]] = None, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)  # type: ignore[arg-type]
        self.seed = int(seed)
        self.settings.update(distribution="uniform[0, 1)", seed=self.seed)
        # nothing is explained: a class the kind records is not read
        self.settings.update({k: "n/a" for k in self.settings if k == "explains"})
        self.settings.update(seeding="per instance")

    def _scores(self, rows: Rows) -> Tensor:
        """Uniform scores of the rows' real tokens (no forward pass, no
        target needed): a row that explains one output of an instance holds
        the instance's tokens, so it gets the instance's draw."""
        return seeded_uniform(rows.input_ids, rows.attention_mask, self.seed)


def seeded_uniform(input_ids: Tensor, mask: Tensor, seed: int) -> Tensor:
    """``(B, L)`` uniform scores in [0, 1) at the real tokens (``mask``), 0
    elsewhere; each row's from a generator seeded with
    :func:`~captum_iba._utils.common.instance_seed` (``seed``, its real ids)."""
    out = torch.zeros(input_ids.shape)
    real = mask.bool().cpu()
    for b in range(input_ids.shape[0]):
        ids = input_ids[b].cpu()[real[b]]
        gen = torch.Generator().manual_seed(instance_seed(seed, ids))
        out[b, real[b]] = torch.rand(ids.shape[0], generator=gen)
    return out
