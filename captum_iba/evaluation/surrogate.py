r"""IBA as the prior of ContextCite's linear surrogate (``iba-surrogate``).

ContextCite (Cohen-Wang et al., NeurIPS 2024) fits a linear surrogate of the
response's logit-probability over random ablations of a context's sources,
:math:`y_v \approx b + \sum_i w_i v_i` (:math:`v \in \{0, 1\}^S`, each
source kept with probability 1/2), by the Lasso: a prior that most weights
are zero, which needs 32 or more ablations to find the few that are not
(docs/studies/context_surrogate.rst: 8 ablations leave its LDS well below
32's). One
``iba-deletion`` step costs about one forward and backward of the prompt and
already ranks the sources the answer needs (its mask's log-odds, pooled by
the max: ``logit-max``); it is the better prior.

:func:`prior_ridge` is the maximum a posteriori surrogate under a Gaussian
prior centred on IBA's scores :math:`s`, scaled:

.. math::

    w = \arg\min_w \lVert y_c - X_c w \rVert^2
        + \lambda \lVert w - \alpha s \rVert^2
      = (X_c^\top X_c + \lambda I)^{-1} (X_c^\top y_c + \lambda \alpha s),

:math:`X_c, y_c` the ablations and outcomes centred (the intercept),
:math:`\alpha \ge 0` the least-squares scale of the prior's predictions
:math:`X_c s` to :math:`y_c`. With :math:`\lambda \to \infty` the surrogate
is IBA's scores (scaled); with :math:`\lambda \to 0` ordinary least squares
over the ablations alone. The outcomes are ContextCite's, per response
token (its ``outputs / num_output_tokens``), so one :math:`\lambda` serves
responses of any length; the weights are given back per response.

The LDS that judges the surrogate is a Spearman correlation: it is unchanged
by any increasing transform of the outcomes, while a least-squares fit is
not, and a few ablations whose log-odds fall far (the source the answer needs
left out) pull it. With ``outcome="ranks"`` (the default) the surrogate is
fitted to the outcomes' mid-ranks, scaled to :math:`(0, 1)`
(:func:`outcome_ranks`; the rank transform in regression, Iman and Conover,
*Technometrics* 21(4), 1979), and its weights are scaled by the ratio of the
log-odds' spread to the ranks' (:func:`rank_ridge`), so a score is still in
the log-odds' units: the fit is then the same for the outcomes and for any
increasing transform of them, up to that scale.

:class:`IBASurrogateScorer` runs it on a batch: one deletion step, then
``n_ablations`` ablations a prompt (the ablation rule of the context metrics;
drawn per prompt from ``seed`` and its tokens, never the metrics' held-out
ones), then the fit. The model is deterministic, so an ablation drawn twice
tells nothing new, and a random set of ablations tells the sources' effects
apart less well than a designed one: :func:`factorial_masks` takes a regular
two-level fractional factorial design (Box, Hunter and Hunter, *Statistics
for Experimenters*, 2nd ed., ch. 6): :math:`2^m` runs in which every source
is kept in half the runs and every two sources together in a quarter (the
columns orthogonal: each weight fitted apart from the others) and, while
:math:`S \le 2^{m-1}`, no source's effect is confounded with two sources'
interaction (resolution IV). When the sources have no more than
``n_ablations`` subsets (:math:`2^S`) it takes every one once
(:func:`distinct_masks`: the surrogate is then the least-squares fit over the
whole distribution the LDS samples, each source's Banzhaf value, at
:math:`2^S` ablations, not more). Where the sources outnumber what the
design separates (:math:`S \ge 2^m`: 16 or more sources at 16 ablations),
:func:`focused_masks` gives the design to the :math:`2^{m-1}` sources the
prior ranks highest and draws the others at random: on 32- and 64-source
contexts that beat drawing every source at random
(docs/studies/context_long.rst). It spends ablations as
ContextCite does, so it is not a one-pass method;
docs/studies/context_surrogate.rst measures it against ContextCite at equal
CPU time, docs/studies/context_surrogate_fresh.rst on fresh contexts.

The same method explains words - a classifier's prediction, a causal LM's
answer from its prompt's words - where the rows have no sources: a word is a
source one token long, removed as the degradation test removes it
(:mod:`~captum_iba.evaluation.word_surrogate`).
"""

from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor

from captum_iba._utils import common
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.attr.rows import Rows, RowScores
from captum_iba.evaluation.iba import ONE_STEP_POOLING, one_step_deletion
from captum_iba.evaluation.source_methods import AblationScorer
from captum_iba.evaluation.sources import source_scores
from captum_iba.evaluation.word_surrogate import word_scores
from captum_iba.metrics.context import log_odds
from captum_iba.metrics.strategies import as_removal
from captum_iba.registry import SURROGATE_DESIGNS, SURROGATE_OUTCOMES  # their home

__all__ = [
    "IBASurrogateScorer",
    "design_generators",
    "distinct_masks",
    "factorial_masks",
    "focused_masks",
    "outcome_ranks",
    "per_token_log_odds",
    "prior_ridge",
    "prior_scale",
    "rank_ridge",
]

#: The ablations of a context's sources when none is given (measured:
#: docs/studies/context_surrogate_fresh.rst).
SOURCE_ABLATIONS = 16
#: The probability of keeping a source in an ablation (ContextCite's).
KEEP_PROB = 0.5


def distinct_masks(n_sources: int, n_ablations: int, seed: int = 0) -> Tensor:
    """Ablations of ``n_sources`` sources drawn uniformly (each source kept
    with probability 1/2, ContextCite's distribution) without replacement:
    no subset twice, every subset (in a random order) when there are at most
    ``n_ablations``.

    Args:
        n_sources (int): Sources in the context, >= 1.
        n_ablations (int): Ablations wanted, >= 1.
        seed (int): Seed of their own generator (the global one is left
            alone). Default 0.

    Returns:
        Tensor: ``(min(n_ablations, 2 ** n_sources), n_sources)`` bool, True =
        kept, no two rows equal.

    Raises:
        ValueError: For no sources or no ablations.
    """
    if n_sources < 1 or n_ablations < 1:
        raise ValueError(
            f"n_sources and n_ablations must be at least 1; got {n_sources}, "
            f"{n_ablations}"
        )
    gen = torch.Generator().manual_seed(int(seed))
    bits = torch.arange(n_sources)
    if n_sources < 20 and 2**n_sources <= 4 * n_ablations:  # few subsets: pick some
        codes = torch.randperm(2**n_sources, generator=gen)[:n_ablations]
        return (codes[:, None] >> bits) & 1 == 1
    return _more_distinct(torch.zeros(0, n_sources, dtype=torch.bool), n_ablations, gen)


def _more_distinct(
    rows: Tensor,
    n_ablations: int,
    gen: torch.Generator,
    keep_prob: float = KEEP_PROB,
) -> Tensor:
    """``rows``, then draws (each source kept with probability
    ``keep_prob``) none of them seen before, up to ``n_ablations`` rows
    (rejection: for where the subsets far outnumber them)."""
    seen = dict.fromkeys(tuple(row) for row in rows.tolist())
    while len(seen) < n_ablations:
        row = torch.rand(rows.shape[1], generator=gen) < keep_prob
        seen.setdefault(tuple(row.tolist()), None)
    return torch.tensor(list(seen), dtype=torch.bool).reshape(-1, rows.shape[1])


def design_generators(n_base: int, n_sources: int) -> List[int]:
    r"""The columns of a regular two-level design in ``n_base`` base factors
    (:math:`2^m` runs), each a product of base factors given as a bit mask:
    the base factors; then, for ``n_base + 1`` sources, the product of all
    (resolution :math:`m + 1`); else products of an odd number of them (3,
    5, ...: resolution IV while ``n_sources <= 2 ** (n_base - 1)``), then of
    an even number (resolution III).

    Args:
        n_base (int): Base factors :math:`m`.
        n_sources (int): Columns wanted, ``n_base < n_sources < 2 ** n_base``.

    Returns:
        List[int]: ``n_sources`` distinct non-zero bit masks.

    Raises:
        ValueError: For ``n_sources`` outside that range.
    """
    if not n_base < n_sources < 2**n_base:
        raise ValueError(
            f"need n_base < n_sources < 2 ** n_base; got {n_base}, {n_sources}"
        )
    base = [1 << j for j in range(n_base)]
    if n_sources == n_base + 1:
        return base + [2**n_base - 1]
    weight = [bin(c).count("1") for c in range(2**n_base)]
    odd = sorted(
        (c for c in range(2**n_base) if weight[c] >= 3 and weight[c] % 2),
        key=lambda c: (weight[c], c),
    )
    even = sorted(
        (c for c in range(2**n_base) if weight[c] >= 2 and not weight[c] % 2),
        key=lambda c: (-weight[c], c),
    )
    return (base + odd + even)[:n_sources]


def factorial_masks(n_sources: int, n_ablations: int, seed: int = 0) -> Tensor:
    r"""Ablations of ``n_sources`` sources as a regular two-level fractional
    factorial design (the module docstring): :math:`2^m` runs, :math:`2^m`
    the largest power of two up to ``n_ablations``, the columns of
    :func:`design_generators` given to the sources in a random order, each
    flipped (kept <-> left out) at random, the runs shuffled; the rest of
    ``n_ablations`` drawn uniformly, none twice. Each source is kept in half
    the design's runs and its columns are orthogonal. Where the sources have
    no more than ``n_ablations`` subsets, or too many for such a design
    (:math:`S \ge 2^m`), it is :func:`distinct_masks`.

    Args:
        n_sources (int): Sources in the context, >= 1.
        n_ablations (int): Ablations wanted, >= 1.
        seed (int): Seed of their own generator (the global one is left
            alone). Default 0.

    Returns:
        Tensor: ``(min(n_ablations, 2 ** n_sources), n_sources)`` bool, True =
        kept, no two rows equal.

    Raises:
        ValueError: For no sources or no ablations.
    """
    n_base = max(int(n_ablations), 1).bit_length() - 1
    if not 2**n_base > n_sources >= 1 or 2**n_sources <= n_ablations:
        return distinct_masks(n_sources, n_ablations, seed)  # and its errors
    gen = torch.Generator().manual_seed(int(seed))
    runs = torch.arange(2**n_base)[:, None] & torch.tensor(
        design_generators(n_base, n_sources)
    )
    kept = sum((runs >> j) & 1 for j in range(n_base)) % 2 == 1
    flips = torch.rand(n_sources, generator=gen) < KEEP_PROB
    kept = kept[:, torch.randperm(n_sources, generator=gen)] ^ flips
    kept = kept[torch.randperm(len(kept), generator=gen)]
    return _more_distinct(kept, n_ablations, gen)


def focused_masks(prior: Tensor, n_ablations: int, seed: int = 0) -> Tensor:
    r"""Ablations for more sources than a design of ``n_ablations`` runs
    separates: :func:`factorial_masks` over the :math:`F = 2^{m-1}` sources
    the prior ranks highest (:math:`2^m` the largest power of two up to
    ``n_ablations``: resolution IV among them, each of their effects fitted
    apart from the others'), the other sources kept or left out at random
    (probability 1/2 each), so the surrogate still sees every source. Where
    the factorial design already separates every source (:math:`S < 2^m`)
    or the sources have no more than ``n_ablations`` subsets, it is
    :func:`factorial_masks`.

    Args:
        prior (Tensor): ``(S,)`` the prior's scores (higher: more important).
        n_ablations (int): Ablations wanted, >= 1.
        seed (int): Seed of their own generator. Default 0.

    Returns:
        Tensor: ``(min(n_ablations, 2 ** S), S)`` bool, True = kept, no two
        rows equal.

    Raises:
        ValueError: For no sources or no ablations.
    """
    n_sources = int(prior.numel())
    n_base = max(int(n_ablations), 1).bit_length() - 1
    if n_base < 2 or n_sources < 2**n_base or 2**n_sources <= n_ablations:
        return factorial_masks(n_sources, n_ablations, seed)  # and its errors
    top = torch.argsort(prior.double(), descending=True, stable=True)[
        : 2 ** (n_base - 1)
    ]
    gen = torch.Generator().manual_seed(int(seed) + 1)  # the rest's own draws
    design = factorial_masks(len(top), n_ablations, seed)  # distinct rows
    kept = torch.rand(len(design), n_sources, generator=gen) < KEEP_PROB
    kept[:, top] = design
    return _more_distinct(kept, n_ablations, gen)


def per_token_log_odds(log_probs: Tensor, tokens: Any) -> Tensor:
    """The ablations' outcomes as the surrogate fits them: the response's
    logit-probability per response token (ContextCite's ``outputs /
    num_output_tokens``), finite where :math:`p = 1`.

    Args:
        log_probs (Tensor): ``(A,)`` the response's log-probability per
            ablation.
        tokens (int or Tensor): The response's tokens (``(A,)``: per
            ablation).

    Returns:
        Tensor: ``(A,)``.
    """
    return log_odds(log_probs.clamp_max(-1e-12)) / tokens


def prior_scale(xc: Tensor, yc: Tensor, prior: Tensor) -> Tensor:
    r""":math:`\alpha \ge 0`, the least-squares scale of the prior's
    predictions :math:`X_c s` to the centred outcomes :math:`y_c` (0 where the
    prior predicts nothing).

    Args:
        xc (Tensor): ``(A, S)`` the ablations, centred (float64).
        yc (Tensor): ``(A,)`` the outcomes, centred.
        prior (Tensor): ``(S,)`` the prior's scores.

    Returns:
        Tensor: A 0-d tensor.
    """
    z = xc @ prior
    return (z @ yc / (z @ z)).clamp_min(0.0) if float(z @ z) > 0 else z.new_zeros(())


def prior_ridge(
    keep: Tensor, outcomes: Tensor, prior: Tensor, penalty: float = 1.0
) -> Tensor:
    r"""The linear surrogate's weights shrunk toward a scaled prior (the
    module docstring's equation).

    Args:
        keep (Tensor): ``(A, S)`` bool, the sources kept in each ablation.
        outcomes (Tensor): ``(A,)`` the outcome of each ablation.
        prior (Tensor): ``(S,)`` the prior's scores.
        penalty (float): :math:`\lambda > 0`. Default 1.

    Returns:
        Tensor: ``(S,)`` float64 weights.

    Raises:
        ValueError: For shapes that do not match, a penalty not above 0 or a
            value that is not finite.
    """
    x, y, s = keep.double(), outcomes.double().reshape(-1), prior.double()
    if x.dim() != 2 or x.shape[0] != y.shape[0] or s.shape != (x.shape[1],):
        raise ValueError(
            f"keep (A, S), outcomes (A,) and prior (S,) must match; got "
            f"{tuple(keep.shape)}, {tuple(outcomes.shape)}, {tuple(prior.shape)}"
        )
    if not penalty > 0:
        raise ValueError(f"penalty must be > 0; got {penalty!r}")
    if not (torch.isfinite(y).all() and torch.isfinite(s).all()):
        raise ValueError("outcomes and prior must be finite")
    xc, yc = x - x.mean(0), y - y.mean()
    alpha = prior_scale(xc, yc, s)
    gram = xc.T @ xc + penalty * torch.eye(x.shape[1], dtype=x.dtype)
    return torch.linalg.solve(gram, xc.T @ yc + penalty * alpha * s)


def outcome_ranks(outcomes: Tensor) -> Tensor:
    """The outcomes' mid-ranks (ties share their mean rank), scaled to
    :math:`(0, 1)`: :math:`(r - 1/2) / A` for rank :math:`r` of :math:`A`.

    Args:
        outcomes (Tensor): ``(A,)`` the outcome of each ablation.

    Returns:
        Tensor: ``(A,)`` float64 scaled ranks.
    """
    y = outcomes.double().reshape(-1)
    below = (y[None, :] < y[:, None]).sum(1)
    tied = (y[None, :] == y[:, None]).sum(1)
    return (below + (tied + 1) / 2 - 0.5) / len(y)


def rank_ridge(
    keep: Tensor, outcomes: Tensor, prior: Tensor, penalty: float = 1.0
) -> Tensor:
    """:func:`prior_ridge` fitted to :func:`outcome_ranks`, the weights scaled
    by the outcomes' standard deviation over the ranks' (zero when the
    outcomes are all equal).

    Args:
        keep (Tensor): ``(A, S)`` bool, the sources kept in each ablation.
        outcomes (Tensor): ``(A,)`` the outcome of each ablation.
        prior (Tensor): ``(S,)`` the prior's scores.
        penalty (float): :math:`\\lambda > 0`. Default 1.

    Returns:
        Tensor: ``(S,)`` float64 weights.

    Raises:
        ValueError: As :func:`prior_ridge`.
    """
    ranks = outcome_ranks(outcomes)
    weights = prior_ridge(keep, ranks, prior, penalty)
    spread = ranks.std()
    return weights * (outcomes.double().std() / spread) if spread > 0 else weights


class IBASurrogateScorer(AblationScorer):
    """ContextCite's linear surrogate with one ``iba-deletion`` step as its
    prior (see the module docstring): a source's score is its weight in the
    surrogate of the response's logit-probability; on rows without sources
    (a classifier's instances, a causal LM's prompts) a word's, in the
    surrogate of the explained output's log-odds over the degradation test's
    removals (:mod:`~captum_iba.evaluation.word_surrogate`).

    Args:
        model: A Hugging Face causal LM or sequence classifier.
        n_ablations (int, optional): Ablations an input: a fractional
            factorial design where one fits (over the prior's top sources
            where the sources outnumber it: ``design``), none twice (at most
            :math:`2^S` for S sources). None (default): 16 for a context's
            sources; for words,
            :func:`~captum_iba.evaluation.word_surrogate.word_ablations` of
            their number.
        penalty (float): The prior's weight :math:`\\lambda` (per response
            token). Default 1.
        seed (int): The ablations of an input are drawn from it and the
            input's tokens. Default 0.
        outcome (str): What the surrogate is fitted to: ``"ranks"`` (the
            outcomes' ranks, :func:`rank_ridge`; the default) or
            ``"log-odds"`` (:func:`prior_ridge` on the log-odds per token).
        design (str): ``"focused"`` (:func:`focused_masks`; the default:
            where the sources outnumber what a factorial design separates,
            the design over the prior's top sources, else the factorial
            design) or ``"factorial"`` (:func:`factorial_masks`: at random
            where no design holds the sources; 0.3.0's draws).
        removal (str, int, Callable or RemovalStrategy): How an ablation
            removes words: the degradation test's strategies
            (:func:`~captum_iba.metrics.strategies.as_removal`). Default
            ``"delete"``. A context's sources are removed as text.
        prior_scorer (TokenScorer, optional): The prior, a scorer of the
            model whose scores are a mask in [0, 1]. Default one
            ``iba-deletion`` step
            (:func:`~captum_iba.evaluation.iba.one_step_deletion`).
        **kwargs: See :class:`~captum_iba.evaluation.source_methods.AblationScorer`
            (the tokenizer is needed for a context's sources only).
    """

    per_token_note = "it fits one surrogate of the whole response a prompt"
    #: A context's sources are removed as text, when it meets them.
    sources_only = False
    meaning = (
        "the weight of the token in a linear surrogate of the class's log-odds "
        "(or of their ranks) over removals of the tokens, shrunk toward one "
        "iba-deletion step's scores: + for the class, - against it"
    )
    prompt_meaning = (
        "the weight of the token (with a context's sources: of its source, each "
        "token of a source holding it) in a linear surrogate of the response's "
        "logit-probability (or of its ranks) over removals of them, shrunk "
        "toward one iba-deletion step's scores"
    )
    unit = "logit-probability"

    def __init__(
        self,
        model: Any,
        n_ablations: Optional[int] = None,
        penalty: float = 1.0,
        seed: int = 0,
        outcome: str = "ranks",
        design: str = "focused",
        internal_batch_size: Optional[int] = None,
        removal: Any = "delete",
        prior_scorer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, internal_batch_size, **kwargs)
        if n_ablations is not None and (
            isinstance(n_ablations, bool) or int(n_ablations) < 2
        ):
            raise ValueError(f"n_ablations must be >= 2; got {n_ablations!r}")
        if not float(penalty) > 0:
            raise ValueError(f"penalty must be > 0; got {penalty!r}")
        if outcome not in SURROGATE_OUTCOMES:
            raise ValueError(
                f"outcome must be one of {SURROGATE_OUTCOMES}; got {outcome!r}"
            )
        if design not in SURROGATE_DESIGNS:
            raise ValueError(
                f"design must be one of {SURROGATE_DESIGNS}; got {design!r}"
            )
        self.removal = as_removal(
            removal, self.tokenizer, pad_token_id=self.pad_token_id
        )
        self.n_ablations = None if n_ablations is None else int(n_ablations)
        self.penalty, self.seed = penalty, seed
        self.design = design
        self.fit = rank_ridge if outcome == "ranks" else prior_ridge
        self.prior = prior_scorer or one_step_deletion(
            self.model,
            self.tokenizer,
            self.model_kind,
            self.special_token_ids,
            self.pad_token_id,
        )
        self.settings.update(
            n_ablations=SOURCE_ABLATIONS if n_ablations is None else self.n_ablations,
            penalty=float(penalty),
            seed=seed,
            keep_prob=KEEP_PROB,
            design=design,
            outcome=outcome,
            prior=f"iba-deletion, 1 step, {ONE_STEP_POOLING}",
            word_ablations=(
                self.n_ablations
                if n_ablations is not None
                else "16 up to 15 words, 32 up to 31, 64 beyond"
            ),
            word_removal=self.removal.name,
        )
        if prior_scorer is not None:
            self.settings["prior"] = prior_scorer.name

    def _masks(self, prior: Tensor, n_ablations: int, seed: int) -> Tensor:
        """The kept sources (or words) of ``n_ablations`` ablations by the
        scorer's design, ``prior`` their prior's scores."""
        if self.design == "focused":
            return focused_masks(prior, n_ablations, seed)
        return factorial_masks(len(prior), n_ablations, seed)

    def _keep(self, batch: PromptBatch, b: int, prior: Tensor) -> Tensor:
        ids = batch.input_ids[b][batch.prompt_mask[b]]
        seed = common.instance_seed(int(self.seed), ids)
        return self._masks(prior, self.n_ablations or SOURCE_ABLATIONS, seed)

    @staticmethod
    def _outcomes(log_probs: Tensor, tokens: Any) -> Tensor:
        """The ablations' outcomes as the surrogate fits them
        (:func:`per_token_log_odds`)."""
        return per_token_log_odds(log_probs, tokens)

    def _scores(self, rows: Rows) -> RowScores:
        """A context's sources where the rows have them; else their words
        (:func:`~captum_iba.evaluation.word_surrogate.word_scores`)."""
        if rows.groups is None:
            return word_scores(self, rows)
        self._check_tokenizer()
        return super()._scores(rows)

    def _source_scores(
        self, batch: PromptBatch, per_token: bool
    ) -> Tuple[Tensor, Optional[Tensor]]:
        prior = source_scores(self.prior.attribute(batch), batch, ONE_STEP_POOLING)
        keeps = [
            self._keep(batch, b, prior[b, : len(batch.spans[b])])
            for b in range(len(batch))
        ]
        out = self._empty(batch)
        for b, found in enumerate(self._ablated(batch, keeps)):
            n, tokens = len(batch.spans[b]), len(batch.explained_ids(b))
            outcomes = self._outcomes(found, tokens)
            weights = self.fit(keeps[b], outcomes, prior[b, :n], self.penalty)
            out[b, :n] = weights * tokens
        return out, None
