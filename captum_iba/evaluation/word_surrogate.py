r"""``iba-surrogate`` on words: the surrogate of
:mod:`~captum_iba.evaluation.surrogate` with a word as a source one token
long, for a classifier's prediction and a causal LM's answer alike.

:class:`~captum_iba.evaluation.surrogate.IBASurrogateScorer` takes this
route for rows without a context's sources (a classifier's instances, a
causal LM's prompts; :attr:`Rows.groups <captum_iba.attr.rows.Rows.groups>`
None). Per row of :math:`n` words (:attr:`Rows.scored
<captum_iba.attr.rows.Rows.scored>`: the tokens a method scores and the
degradation test removes):

* **the prior**: one ``iba-deletion`` step on the rows
  (:func:`~captum_iba.evaluation.iba.one_step_deletion`, built for the
  model's kind), each word's mask weight as its log-odds - the sources'
  ``logit-max`` pooling for sources of one token (:func:`token_prior`);
* **the ablations**: :math:`A` sets of kept words, the design focused on the
  words the prior ranks highest
  (:func:`~captum_iba.evaluation.surrogate.focused_masks`), drawn from the
  scorer's seed and the row's words; :math:`A` the scorer's
  ``n_ablations``, else :func:`word_ablations` of :math:`n`;
* **the removal**: the degradation test's (deletion by default:
  :meth:`Rows.without <captum_iba.attr.rows.Rows.without>`, each row compacted;
  a replacement strategy substitutes the ids in place, :meth:`Rows.with_ids
  <captum_iba.attr.rows.Rows.with_ids>`);
* **the outcome**: the log-odds of the explained output
  (:meth:`Rows.log_probability <captum_iba.attr.rows.Rows.log_probability>`:
  a class's probability, an answer's), per explained token
  (:func:`~captum_iba.evaluation.surrogate.per_token_log_odds`; a class
  spans one), fitted as the scorer's ``outcome`` says (its ranks by
  default);
* **the fit**: the prior ridge
  (:func:`~captum_iba.evaluation.surrogate.prior_ridge`,
  :func:`~captum_iba.evaluation.surrogate.rank_ridge`); a word's score is its
  weight, per explained token times the tokens.

On a model whose class log-odds are additive in the words (a bag of words),
the least-squares surrogate over every subset is each word's additive
effect; the prior decides where the ablations do not.
"""

from typing import Any, List, Tuple

import torch
from torch import Tensor

from captum_iba._utils import common
from captum_iba.attr.rows import Rows, RowScores, with_values
from captum_iba.evaluation.sources import pool_sources
from captum_iba.metrics.strategies import Deletion, RemovalStrategy

__all__ = ["FEWEST_ABLATIONS", "MOST_ABLATIONS", "token_prior", "word_ablations"]

#: The fewest and the most ablations of :func:`word_ablations`.
FEWEST_ABLATIONS, MOST_ABLATIONS = 16, 64


def word_ablations(n_words: int) -> int:
    r"""The ablations of an input of ``n_words`` words when none is given:
    the smallest power of two above :math:`n` - a two-level design of
    :math:`2^m > n` runs gives every word a column of its own, and its
    focused form gives the :math:`2^{m-1}` words the prior ranks highest
    columns free of two words' interactions - at least
    :data:`FEWEST_ABLATIONS`, at most :data:`MOST_ABLATIONS`: 16 ablations
    up to 15 words, 32 up to 31, 64 beyond.

    Args:
        n_words (int): The words (scored tokens) of the input, >= 0.

    Returns:
        int: The ablations.
    """
    return min(MOST_ABLATIONS, max(FEWEST_ABLATIONS, 2 ** int(n_words).bit_length()))


def token_prior(values: Tensor, scored: Tensor) -> Tensor:
    """``(R, L)`` float64: each scored token's mask weight (``values`` in
    [0, 1], ``(R, L')`` with ``L' <= L``) as its log-odds, the ``logit-max``
    pooling of :func:`~captum_iba.evaluation.sources.pool_sources` with every
    token its own source; 0 elsewhere."""
    R, L = scored.shape
    wide = values.new_zeros(R, L)
    wide[:, : values.shape[1]] = values[:, :L]
    scored = scored.bool().cpu()
    index = scored.long().cumsum(1) - 1
    index = index.masked_fill(~scored, -1)
    width = max(int(scored.sum(1).max()) if R else 0, 1)
    pooled = pool_sources(wide.cpu(), index, width, "logit-max")
    out = torch.zeros(R, L, dtype=torch.float64)
    out[scored] = pooled.gather(1, index.clamp_min(0))[scored]
    return out


def _removed(rows: Rows, drop: Tensor, removal: RemovalStrategy) -> Rows:
    """The rows with the positions ``drop`` removed by ``removal``."""
    if isinstance(removal, Deletion):
        return rows.without(drop)[0]
    changed = removal.apply(rows.input_ids.cpu(), drop.cpu())
    return rows.with_ids(changed)


def _designs(scorer: Any, rows: Rows, prior: Tensor) -> List[Tuple[Tensor, Tensor]]:
    """Per row, its words' columns and ``(A, n)`` bool kept words."""
    scored = rows.scored.bool().cpu()
    out = []
    for b in range(len(rows)):
        columns = scored[b].nonzero().flatten()
        n = len(columns)
        if n == 0:
            out.append((columns, torch.zeros(0, 0, dtype=torch.bool)))
            continue
        budget = scorer.n_ablations or word_ablations(n)
        seed = common.instance_seed(int(scorer.seed), rows.input_ids[b].cpu()[columns])
        out.append((columns, scorer._masks(prior[b, columns], budget, seed)))
    return out


def word_scores(scorer: Any, rows: Rows) -> RowScores:
    """The words route of
    :class:`~captum_iba.evaluation.surrogate.IBASurrogateScorer` (see the
    module docstring): ``(R, L)`` scores, each row's words their weights in
    its surrogate, 0 elsewhere."""
    prior_values = with_values(scorer.prior._scores(rows)).values
    prior = token_prior(prior_values.detach().double(), rows.scored)
    designs = _designs(scorer, rows, prior)
    index = [b for b, (_, keep) in enumerate(designs) for _ in range(len(keep))]
    out = torch.zeros(rows.input_ids.shape, dtype=torch.float64)
    if not index:
        return RowScores(out, scorer.unit)
    drop = torch.zeros(len(index), rows.input_ids.shape[1], dtype=torch.bool)
    start = 0
    for columns, keep in designs:
        drop[start : start + len(keep), columns] = ~keep
        start += len(keep)
    ablated = _removed(rows.part(index), drop.to(rows.device), scorer.removal)
    found = ablated.log_probability(scorer.internal_batch_size)
    tokens = rows.explained_tokens.double()
    outcomes = scorer._outcomes(found, tokens[index]).split(
        [len(keep) for _, keep in designs]
    )
    for b, (columns, keep) in enumerate(designs):
        if len(columns):
            weights = scorer.fit(keep, outcomes[b], prior[b, columns], scorer.penalty)
            out[b, columns] = weights * tokens[b]
    return RowScores(out, scorer.unit)
