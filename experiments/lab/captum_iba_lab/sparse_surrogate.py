"""``iba-surrogate`` 's sparse design, a study variant that lost (issue 88):
every source drawn at random, kept with probability 0.3 instead of
ContextCite's 1/2 - shorter ablated prompts, about 0.7x the CPU time an
ablation. On a fresh draw of 32- and 64-source contexts, 32 sparse
ablations were level with ContextCite-32 but below the product's default of
16 designed ones at 32 sources (-.042 LDS) at 1.2x their cost
(docs/studies/context_long_fifth.rst), so it left the product's
``--surrogate-design``; the context study runs it as
``iba-surrogate-<k>-sparse`` (``experiments/context_study.py``).
"""

from typing import Any

import torch
from torch import Tensor

from captum_iba.evaluation.surrogate import (
    IBASurrogateScorer,
    _more_distinct,  # the product's draw of distinct ablations
    distinct_masks,
)

__all__ = ["SPARSE_KEEP_PROB", "SparseSurrogateScorer", "sparse_masks"]

#: The probability of keeping a source in an ablation of the sparse design.
SPARSE_KEEP_PROB = 0.3


def sparse_masks(
    n_sources: int, n_ablations: int, seed: int = 0, keep_prob: float = SPARSE_KEEP_PROB
) -> Tensor:
    """Ablations of ``n_sources`` sources, each kept with probability
    ``keep_prob`` (0.3: shorter ablated prompts than ContextCite's 1/2, so
    cheaper forward passes; docs/studies/context_long_fifth.rst), none twice;
    every subset (in a random order) when there are at most ``n_ablations``.

    Args:
        n_sources (int): Sources in the context, >= 1.
        n_ablations (int): Ablations wanted, >= 1.
        seed (int): Seed of their own generator. Default 0.
        keep_prob (float): The probability of keeping a source, in (0, 1).
            Default :data:`SPARSE_KEEP_PROB`.

    Returns:
        Tensor: ``(min(n_ablations, 2 ** n_sources), n_sources)`` bool, True =
        kept, no two rows equal.

    Raises:
        ValueError: For no sources or no ablations, or a probability outside
            (0, 1).
    """
    if not 0.0 < keep_prob < 1.0:
        raise ValueError(f"keep_prob must be in (0, 1); got {keep_prob!r}")
    if n_sources < 1 or n_ablations < 1 or 2**n_sources <= n_ablations:
        return distinct_masks(n_sources, n_ablations, seed)  # and its errors
    gen = torch.Generator().manual_seed(int(seed))
    empty = torch.zeros(0, n_sources, dtype=torch.bool)
    return _more_distinct(empty, n_ablations, gen, keep_prob)


class SparseSurrogateScorer(IBASurrogateScorer):
    """``iba-surrogate`` with the sparse design: every source at random,
    kept with probability :data:`SPARSE_KEEP_PROB` (:func:`sparse_masks`);
    its settings say ``design="sparse"``.

    Args:
        model: A Hugging Face causal LM.
        **kwargs: See :class:`~captum_iba.evaluation.surrogate.
            IBASurrogateScorer` (but ``design``).
    """

    def __init__(self, model: Any, **kwargs: Any) -> None:
        if "design" in kwargs:
            raise TypeError("SparseSurrogateScorer draws its own design: no design=")
        super().__init__(model, **kwargs)
        self.design = "sparse"
        self.settings.update(keep_prob=SPARSE_KEEP_PROB, design=self.design)

    def _masks(self, prior: Tensor, n_ablations: int, seed: int) -> Tensor:
        return sparse_masks(len(prior), n_ablations, seed)
