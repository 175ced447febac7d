"""Whether scores rank anything: the one test of a degenerate result.

A method's scores of an instance are **flat** when, at the tokens that may be
ranked (real, not special), they all lie within :data:`RTOL` of the largest
magnitude: nothing tells one token from another, so the result is no
ranking, whatever its numbers. IBA flags its own instances with it
(:class:`~captum_iba.InformationBottleneckAttribution` records them in
``last_run``), :func:`captum_iba.explain` says "no ranking" instead of top
words, and the corpus engine counts the flat rows of each method.

:func:`flat_reason` is the one no-ranking check of an explanation's listing,
for every method on both kinds of model (a classifier's text, a causal LM's
prompt), and :func:`check_finite` the one error for NaN or infinite logits
or scores, which no ranking can be read from.

A causal LM's prompt scores are judged by the looser :func:`tied_rows`: most
tokens tied with the median (a long prompt keeps a few tokens apart even
when the mask barely moved, :func:`captum_iba.attr.llm.no_ranking`).
"""

from typing import Any, List, Optional, Sequence

import torch
from torch import Tensor

__all__ = [
    "NEAR_RTOL",
    "RTOL",
    "check_finite",
    "flat_reason",
    "flat_rows",
    "is_flat",
    "is_near_flat",
    "spread_said",
    "tied_rows",
]

#: Relative spread (to the largest magnitude) at or below which scores are flat:
#: 0.1 %. IBA after the last layer of MiniLM-L6 (its head reads [CLS] alone)
#: gives the words 0.49925-0.49942 (a spread of 0.03 %: the information term
#: alone moves them), a layer that ranks spreads them by percents (layer 4 of
#: the same model: 0.504-0.610, 17 %).
RTOL = 1e-3


def flat_rows(scores: Tensor, mask: Optional[Tensor] = None) -> List[int]:
    """The rows of ``scores`` that are flat at the positions of ``mask``.

    Args:
        scores (Tensor): ``(B, L)`` per-token scores (any further dimensions
            are reduced first by their mean).
        mask (Tensor, optional): ``(B, L)``, True (or 1) at the tokens that
            may be ranked. Default: every position.

    Returns:
        list[int]: The flat rows, among those with at least two such tokens.
    """
    s = scores.detach().float()
    if s.dim() > 2:
        s = s.reshape(s.shape[:2] + (-1,)).mean(-1)
    m = torch.ones_like(s, dtype=torch.bool) if mask is None else mask.bool()
    m = m.to(s.device)
    high = torch.where(m, s, torch.full_like(s, -float("inf"))).amax(1)
    low = torch.where(m, s, torch.full_like(s, float("inf"))).amin(1)
    scale = torch.where(m, s.abs(), torch.zeros_like(s)).amax(1)
    flat = (high - low <= RTOL * scale + 1e-12) & (m.sum(1) >= 2)
    return [int(i) for i in flat.nonzero().flatten().tolist()]


def tied_rows(scores: Tensor, mask: Tensor, share: float = 0.5) -> List[int]:
    """The rows of ``scores`` where more than ``share`` of the tokens of
    ``mask`` lie within :data:`RTOL` of the row's median (rows with fewer
    than three such tokens are never tied).

    Args:
        scores (Tensor): ``(B, L)`` per-token scores.
        mask (Tensor): ``(B, L)``, True at the tokens that may be ranked.
        share (float): The share of tied tokens above which a row is tied.

    Returns:
        list[int]: The tied rows.
    """
    out = []
    for i, (row, keep) in enumerate(zip(scores, mask.bool().to(scores.device))):
        values = row[keep].detach().float()
        if values.numel() < 3:
            continue
        median = values.median()
        ties = (values - median).abs() <= RTOL * median.abs().clamp_min(1e-12)
        if ties.float().mean() > share:
            out.append(i)
    return out


def is_flat(values: Sequence[float]) -> bool:
    """Whether one instance's scores (the tokens that may be ranked, at least
    two) are flat."""
    return len(values) >= 2 and bool(flat_rows(torch.tensor([list(values)])))


def spread_said(what: str = "token") -> str:
    """What flat means, for messages: ``"every token's score is within 0.1 %
    of the largest"``."""
    return f"every {what}'s score is within {100 * RTOL:g} % of the largest"


#: Relative spread (to the largest magnitude) at or below which scores that
#: rank are **nearly flat**: 15 %. The paper's configuration on Gemma 3 270M
#: gives a review prompt's tokens 3.38e3 to 3.8e3 (issue 53) or 3.53e3 to
#: 4.0e3 (12 %: every token keeps most of the capacity it started with, the
#: order comes from small moves), the deletion configuration spreads the same
#: tokens over 97 % of the largest (docs/studies/llm_cost.rst, "A second family").
NEAR_RTOL = 0.15


def is_near_flat(values: Sequence[float]) -> bool:
    """Whether one instance's scores (at least two, the tokens that may be
    ranked) rank, but within :data:`NEAR_RTOL` of the largest magnitude: a
    ranking to read with care (:func:`is_flat` ones give none)."""
    if len(values) < 2 or is_flat(values):
        return False
    high, low = max(values), min(values)
    scale = max(abs(v) for v in values)
    return high - low <= NEAR_RTOL * scale


def flat_reason(pieces: Sequence[float], words: Sequence[float]) -> str:
    """Why one instance's scores rank nothing, for every method and both
    kinds of model: its pieces' scores (a word of several pieces sums or
    averages them) or its words' are flat (:func:`is_flat`: e.g. all zero,
    as LIME or KernelSHAP with one sample give); "" when both rank.

    Args:
        pieces (Sequence[float]): The scores of the pieces that may be ranked.
        words (Sequence[float]): The scores of the words they form.

    Returns:
        str: ``"every word's score is within 0.1 % of the largest (0 to 0),
        so none ranks above another"``, or "".
    """
    level, values = "piece", list(pieces)
    if not is_flat(values):
        level, values = "word", list(words)
        if not is_flat(values):
            return ""
    return (
        f"{spread_said(level)} ({min(values):.4g} to {max(values):.4g}), so none "
        "ranks above another"
    )


def check_finite(values: Any, what: str) -> None:
    """The one error for NaN or infinite logits or scores (no ranking can be
    read from them), for every method and both kinds of model.

    Args:
        values (Tensor or Sequence[float]): The logits or scores.
        what (str): What they are, e.g. ``"llm-ablation's scores"``.

    Raises:
        ValueError: Naming ``what`` and the likely cause.
    """
    t = values.detach() if isinstance(values, Tensor) else torch.tensor(values)
    if not bool(torch.isfinite(t.float()).all()):
        raise ValueError(
            f"{what} are not finite (NaN or inf): the model's weights or its "
            "computation are not finite (a damaged model file?), so nothing can "
            "be ranked"
        )
