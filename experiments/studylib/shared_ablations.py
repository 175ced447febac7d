"""Study-only: the ``iba-surrogate`` variants one run compares share their
work (issue 77's long contexts).

Variants that differ in the fit alone (the prior's weight) draw the same
ablations and the same prior as the variant they share them with: the model
is deterministic, so their outcomes are the same numbers. :class:`Shared`
keeps each ablated prompt's outcome and each batch's prior once, so a second
variant pays only for what differs. A record's CPU-seconds are then the
first variant's whole cost and the others' share of what was new to them:
the study reports the variants' cost from the first (docs/studies).
"""

from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import Tensor


class Shared:
    """The outcomes and priors every attached scorer has computed."""

    def __init__(self) -> None:
        self.outcomes: Dict[Tuple[Any, ...], float] = {}
        self.priors: Dict[Tuple[Any, ...], Any] = {}

    def attach(self, scorer: Any) -> Any:
        """``scorer`` (an ``IBASurrogateScorer``) reading and filling the
        shared outcomes and priors; given back."""
        ablated, prior = scorer._ablated, scorer.prior.attribute

        def row_key(batch: Any, b: int) -> Tuple[Any, ...]:
            return (tuple(batch.input_ids[b].tolist()), batch.explained_range(b))

        def shared_ablated(batch: Any, keeps: Sequence[Tensor]) -> List[Tensor]:
            rows = [row_key(batch, b) for b in range(len(keeps))]
            todo = [
                keep[[(row, tuple(k)) not in self.outcomes for k in keep.tolist()]]
                for row, keep in zip(rows, keeps)
            ]
            if any(len(t) for t in todo):
                for row, t, found in zip(rows, todo, ablated(batch, todo)):
                    for k, value in zip(t.tolist(), found.tolist()):
                        self.outcomes[(row, tuple(k))] = value
            return [
                torch.tensor(
                    [self.outcomes[(row, tuple(k))] for k in keep.tolist()],
                    dtype=torch.float64,
                )
                for row, keep in zip(rows, keeps)
            ]

        def shared_prior(batch: Any) -> Any:
            key = tuple(tuple(batch.input_ids[b].tolist()) for b in range(len(batch)))
            if key not in self.priors:
                self.priors[key] = prior(batch)
            return self.priors[key]

        scorer._ablated, scorer.prior.attribute = shared_ablated, shared_prior
        return scorer
