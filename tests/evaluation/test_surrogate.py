"""iba-surrogate (captum_iba.evaluation.surrogate): ContextCite's linear
surrogate with one iba-deletion step as its prior. The fit against
analytical expectations; the scorer on a tiny random Llama against the
log-probabilities of its own ablations, computed by hand."""

import pytest
import torch

from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.iba import ONE_STEP_POOLING
from captum_iba.evaluation.sources import row_ablation, source_scores
from captum_iba.evaluation.surrogate import (
    IBASurrogateScorer,
    design_generators,
    distinct_masks,
    factorial_masks,
    focused_masks,
    outcome_ranks,
    prior_ridge,
    rank_ridge,
)
from captum_iba.metrics.context import log_odds, pair_log_probs
from tests.evaluation.test_context_anchors import _batch
from tests.helpers import no_hooks, tiny_causal_lm, tiny_word_tokenizer


def _ablations(n_ablations, n_sources, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n_ablations, n_sources, generator=gen) < 0.5


# the fit, analytically


def test_outcomes_linear_in_the_prior_give_the_prior_back_scaled():
    """y = b + X (c s): the residual is 0 and alpha = c, so w = c s exactly,
    whatever the penalty, even with fewer ablations than sources."""
    prior = torch.tensor([2.0, -1.0, 0.5, 0.0, 3.0, 1.0], dtype=torch.float64)
    for n_ablations in (3, 8, 64):
        keep = _ablations(n_ablations, 6)
        outcomes = 1.5 + keep.double() @ (0.7 * prior)
        for penalty in (1e-3, 1.0, 1e3):
            found = prior_ridge(keep, outcomes, prior, penalty)
            assert torch.allclose(found, 0.7 * prior, atol=1e-9)


def test_many_ablations_and_a_small_penalty_recover_the_true_weights():
    """Least squares, whatever the prior, when the ablations pin the weights."""
    true = torch.tensor([3.0, 0.0, 0.0, 1.0, 0.0, -1.0], dtype=torch.float64)
    keep = _ablations(400, 6)
    outcomes = 2.0 + keep.double() @ true
    wrong_prior = torch.tensor([0.0, 5.0, 5.0, 0.0, 5.0, 0.0], dtype=torch.float64)
    found = prior_ridge(keep, outcomes, wrong_prior, 1e-6)
    assert torch.allclose(found, true, atol=1e-6)


def test_a_large_penalty_gives_the_prior_at_its_least_squares_scale():
    keep = _ablations(32, 5)
    prior = torch.tensor([1.0, 2.0, 0.0, -1.0, 0.5], dtype=torch.float64)
    outcomes = keep.double() @ torch.tensor([0.0, 1.0, 2.0, 0.0, 1.0]).double()
    z = (keep.double() - keep.double().mean(0)) @ prior
    y = outcomes - outcomes.mean()
    alpha = float(z @ y / (z @ z))
    assert alpha > 0
    found = prior_ridge(keep, outcomes, prior, 1e9)
    assert torch.allclose(found, alpha * prior, atol=1e-6)


def test_a_prior_that_predicts_the_outcomes_backwards_is_not_followed():
    """alpha is clamped at 0: a prior anti-correlated with the outcomes
    shrinks the weights toward 0 (ridge regression), never toward -prior."""
    keep = _ablations(16, 4)
    true = torch.tensor([1.0, 0.0, 2.0, 0.5], dtype=torch.float64)
    outcomes = keep.double() @ true
    found = prior_ridge(keep, outcomes, -true, 1.0)
    zero = prior_ridge(keep, outcomes, torch.zeros(4, dtype=torch.float64), 1.0)
    assert torch.allclose(found, zero)


def test_with_every_subset_the_fit_is_each_sources_banzhaf_value():
    """Over every subset once, least squares gives source i the mean effect
    of adding it (its Banzhaf value): v0 v1 + 2 v2 gives (1/2, 1/2, 2)."""
    keep = distinct_masks(3, 16)
    assert keep.shape == (8, 3)
    x = keep.double()
    outcomes = x[:, 0] * x[:, 1] + 2 * x[:, 2]
    weights = prior_ridge(keep, outcomes, torch.zeros(3), penalty=1e-9)
    assert torch.allclose(weights, torch.tensor([0.5, 0.5, 2.0], dtype=torch.float64))


def test_the_ranks_are_mid_ranks_scaled_into_the_unit_interval():
    """Ties share their mean rank: ranks 4, 1, 2.5, 2.5 of 4, less 1/2, over 4."""
    found = outcome_ranks(torch.tensor([3.0, 1.0, 2.0, 2.0]))
    assert torch.equal(
        found, torch.tensor([0.875, 0.125, 0.5, 0.5], dtype=torch.float64)
    )


def test_the_rank_fit_is_the_same_for_any_increasing_transform_of_the_outcomes():
    """rank_ridge's weights over the outcomes' spread do not change when the
    outcomes go through exp or a cube (increasing); prior_ridge's do."""
    keep = factorial_masks(6, 16, seed=2)
    prior = torch.tensor([1.0, 0.0, 2.0, 0.5, 0.0, 1.0], dtype=torch.float64)
    y = keep.double() @ torch.tensor([1.0, -0.5, 2.0, 0.0, 0.3, 1.2]).double()
    y = y + 0.1 * keep.double()[:, 0] * keep.double()[:, 2]  # no ties, not linear
    for g in (torch.exp, lambda v: (v - 1) ** 3):
        ranked, transformed = rank_ridge(keep, y, prior), rank_ridge(keep, g(y), prior)
        assert torch.allclose(ranked / y.std(), transformed / g(y).std(), atol=1e-12)
        raw, raw_g = prior_ridge(keep, y, prior), prior_ridge(keep, g(y), prior)
        assert not torch.allclose(raw / y.std(), raw_g / g(y).std(), atol=1e-3)


def test_the_rank_fit_is_the_fit_to_the_ranks_scaled_to_the_outcomes_spread():
    keep = _ablations(12, 4)
    y = torch.tensor([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0, 5.5, 3.5, 8.0, 9.5])
    prior = torch.tensor([0.5, 1.0, 0.0, 2.0], dtype=torch.float64)
    ranks = outcome_ranks(y)
    expected = prior_ridge(keep, ranks, prior) * y.double().std() / ranks.std()
    assert torch.allclose(rank_ridge(keep, y, prior), expected, atol=1e-12)
    flat = rank_ridge(keep, torch.full((12,), 2.0), prior)
    assert torch.equal(flat, torch.zeros(4, dtype=torch.float64))


@pytest.mark.parametrize("n_sources, n_ablations", [(3, 8), (4, 16), (5, 24), (12, 40)])
def test_the_ablations_are_distinct_and_all_of_them_when_few(n_sources, n_ablations):
    keep = distinct_masks(n_sources, n_ablations, seed=3)
    assert keep.shape == (min(n_ablations, 2**n_sources), n_sources)
    assert len({tuple(row) for row in keep.tolist()}) == len(keep)
    assert torch.equal(keep, distinct_masks(n_sources, n_ablations, seed=3))
    assert not torch.equal(keep, distinct_masks(n_sources, n_ablations, seed=4))


def test_the_ablations_keep_each_source_half_the_time():
    kept = torch.cat([distinct_masks(6, 12, seed) for seed in range(400)]).double()
    assert (kept.mean(0) - 0.5).abs().max() < 0.025  # 4,800 rows: sd .007


def _signs(keep):
    return keep.double() * 2 - 1


def _design_cases():
    for runs in (8, 16, 32):
        m = runs.bit_length() - 1
        for n_sources in range(m + 1, runs):
            yield runs, n_sources


@pytest.mark.parametrize("runs, n_sources", list(_design_cases()))
def test_the_design_is_balanced_orthogonal_and_distinct(runs, n_sources):
    """Each source kept in half the runs, each two together in a quarter (the
    +-1 columns orthogonal to each other and to the intercept), no run twice."""
    keep = factorial_masks(n_sources, runs, seed=runs + n_sources)
    assert keep.shape == (runs, n_sources)
    assert len({tuple(row) for row in keep.tolist()}) == runs
    z = torch.cat([torch.ones(runs, 1, dtype=torch.float64), _signs(keep)], 1)
    assert torch.equal(z.T @ z, runs * torch.eye(n_sources + 1, dtype=torch.float64))


def _two_source_products(z):
    n = z.shape[1]
    return torch.stack(
        [z[:, i] * z[:, j] for i in range(n) for j in range(i + 1, n)], 1
    )


@pytest.mark.parametrize(
    "runs, n_sources", [(8, 4), (16, 5), (16, 6), (16, 8), (32, 16)]
)
def test_up_to_half_the_runs_no_source_is_confounded_with_two(runs, n_sources):
    """Resolution IV: every source's column orthogonal to every product of
    two sources' columns; with m + 1 sources (resolution V, m >= 4) the
    products orthogonal to each other too."""
    z = _signs(factorial_masks(n_sources, runs, seed=7))
    pairs = _two_source_products(z)
    assert torch.equal(z.T @ pairs, torch.zeros(n_sources, pairs.shape[1]).double())
    if runs >= 16 and n_sources == runs.bit_length():  # m + 1, m >= 4
        gram = pairs.T @ pairs
        assert torch.equal(gram, runs * torch.eye(len(gram), dtype=torch.float64))


def test_on_the_design_the_fit_is_the_banzhaf_value_of_two_way_outcomes():
    """v0 v1 + 2 v2 + v3 v4 over 6 sources: each source's Banzhaf value is
    (1/2, 1/2, 2, 1/2, 1/2, 0); least squares on 16 designed runs (of 64
    subsets) gives it exactly, on 16 random distinct ones it does not."""
    expected = torch.tensor([0.5, 0.5, 2.0, 0.5, 0.5, 0.0], dtype=torch.float64)

    def fit(keep):
        x = keep.double()
        outcomes = x[:, 0] * x[:, 1] + 2 * x[:, 2] + x[:, 3] * x[:, 4]
        return prior_ridge(keep, outcomes, torch.zeros(6), penalty=1e-9)

    assert torch.allclose(fit(factorial_masks(6, 16, seed=2)), expected, atol=1e-6)
    assert not torch.allclose(fit(distinct_masks(6, 16, seed=2)), expected, atol=1e-2)


def test_the_design_follows_its_seed_and_draws_the_rest_distinct():
    keep = factorial_masks(8, 24, seed=5)
    assert keep.shape == (24, 8)
    assert len({tuple(row) for row in keep.tolist()}) == 24
    z = _signs(keep[:16])  # the design's runs first
    assert torch.equal(z.T @ z, 16 * torch.eye(8, dtype=torch.float64))
    assert torch.equal(keep, factorial_masks(8, 24, seed=5))
    assert not torch.equal(keep, factorial_masks(8, 24, seed=6))


@pytest.mark.parametrize(
    "n_sources, n_ablations", [(3, 8), (4, 16), (16, 16), (20, 16)]
)
def test_without_a_design_the_ablations_are_the_distinct_ones(n_sources, n_ablations):
    """Every subset when there are few; drawn distinct when no 2^m-run
    design holds the sources."""
    assert torch.equal(
        factorial_masks(n_sources, n_ablations, seed=1),
        distinct_masks(n_sources, n_ablations, seed=1),
    )


@pytest.mark.parametrize("n_sources, n_ablations", [(16, 16), (64, 16), (40, 32)])
def test_the_focused_design_separates_the_priors_top_sources(n_sources, n_ablations):
    """Over the prior's top 2^(m-1) sources (a permutation of them scored
    highest) the runs are a resolution IV design: balanced, orthogonal, no
    source confounded with two; the others are drawn, every row distinct."""
    prior = torch.randperm(n_sources, generator=torch.Generator().manual_seed(3))
    keep = focused_masks(prior.double(), n_ablations, seed=4)
    assert keep.shape == (n_ablations, n_sources)
    assert len({tuple(row) for row in keep.tolist()}) == n_ablations
    runs = 2 ** (n_ablations.bit_length() - 1)
    top = prior >= n_sources - runs // 2
    z = _signs(keep[:runs, top])
    assert torch.equal(z.T @ z, runs * torch.eye(runs // 2, dtype=torch.float64))
    pairs = _two_source_products(z)
    assert torch.equal(z.T @ pairs, torch.zeros(runs // 2, pairs.shape[1]).double())
    rest = keep[:, ~top].double().mean()
    assert 0.35 < float(rest) < 0.65  # the others kept about half the time
    assert torch.equal(keep, focused_masks(prior.double(), n_ablations, seed=4))


@pytest.mark.parametrize("n_sources, n_ablations", [(5, 16), (15, 16), (3, 16)])
def test_where_the_design_separates_every_source_focused_is_factorial(
    n_sources, n_ablations
):
    prior = torch.arange(n_sources).double()
    assert torch.equal(
        focused_masks(prior, n_ablations, seed=2),
        factorial_masks(n_sources, n_ablations, seed=2),
    )


def test_on_many_sources_the_focused_design_recovers_the_top_sources_effects():
    """64 sources, 16 runs, outcomes 3 v_a + v_b (a, b among the prior's top
    8): least squares on the focused design gives a and b their effects and
    the other top sources none, each fitted apart from the rest."""
    prior = torch.zeros(64, dtype=torch.float64)
    prior[[5, 9, 17, 30, 41, 50, 60, 63]] = torch.arange(8, 0, -1).double()
    keep = focused_masks(prior, 16, seed=0)
    x = keep.double()
    outcomes = 3 * x[:, 9] + x[:, 41]
    top = [5, 9, 17, 30, 41, 50, 60, 63]
    xt = torch.cat([torch.ones(16, 1, dtype=torch.float64), x[:, top]], 1)
    fitted = torch.linalg.lstsq(xt, outcomes[:, None]).solution[1:, 0]
    expected = torch.tensor([0, 3, 0, 0, 1, 0, 0, 0], dtype=torch.float64)
    assert torch.allclose(fitted, expected, atol=1e-9)


@pytest.mark.parametrize("n_base, n_sources", [(4, 4), (4, 16), (3, 2)])
def test_the_generators_refuse_a_size_with_no_design(n_base, n_sources):
    with pytest.raises(ValueError, match="n_sources"):
        design_generators(n_base, n_sources)


@pytest.mark.parametrize("n_sources, n_ablations", [(0, 16), (4, 0)])
def test_the_design_refuses_nothing_to_ablate(n_sources, n_ablations):
    with pytest.raises(ValueError, match="at least 1"):
        factorial_masks(n_sources, n_ablations)


@pytest.mark.parametrize(
    "args, match",
    [
        ((torch.ones(4, 3).bool(), torch.zeros(5), torch.zeros(3)), "must match"),
        ((torch.ones(4, 3).bool(), torch.zeros(4), torch.zeros(2)), "must match"),
        ((torch.ones(4, 3).bool(), torch.zeros(4), torch.zeros(3), 0.0), "penalty"),
        (
            (torch.ones(4, 3).bool(), torch.tensor([0, 1, float("inf"), 0]),
             torch.zeros(3)),
            "finite",
        ),
    ],
)  # fmt: skip
def test_the_fit_refuses_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        prior_ridge(*args)


# the scorer, on a tiny Llama


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", layers=2, positions=64), tiny_word_tokenizer()


@pytest.mark.parametrize(
    "outcome, fit", [("ranks", rank_ridge), ("log-odds", prior_ridge)]
)
def test_the_scores_are_the_fit_of_its_own_ablations(lm, outcome, fit):
    """Each prompt's scores: the fit (to the ranks or to the log-odds) of the
    response's logit-probability (per token) under its ablations, recomputed
    by hand from the prompts those ablations leave, toward one deletion
    step's logit-max scores."""
    model, tok = lm
    batch = _batch(tok)
    scorer = IBASurrogateScorer(model, n_ablations=6, outcome=outcome, tokenizer=tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    found = scorer.attribute(batch).sources
    assert no_hooks(model)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    prior = source_scores(scorer.prior.attribute(batch), batch, ONE_STEP_POOLING)
    ll = CausalLMLogLikelihood(model)
    for b in range(len(batch)):
        n, answer = len(batch.spans[b]), batch.answer_ids(b)
        keep = scorer._keep(batch, b, prior[b, :n])
        assert keep.shape == (min(6, 2**n), n)
        ids_of = row_ablation(tok, batch, b)
        lp = pair_log_probs(
            ll, [ids_of(k) for k in keep.tolist()], [answer] * len(keep)
        )
        expected = fit(keep, log_odds(lp) / len(answer), prior[b, :n])
        assert torch.allclose(found[b, :n], expected * len(answer), atol=1e-6)
    assert torch.isnan(found[1, 2])  # the second prompt has two sources


def test_the_ablations_follow_the_seed_and_the_prompt(lm):
    model, tok = lm
    batch = _batch(tok)
    one = IBASurrogateScorer(model, n_ablations=8, tokenizer=tok)
    prior = torch.zeros(3)
    assert torch.equal(one._keep(batch, 0, prior), one._keep(batch, 0, prior))
    other = IBASurrogateScorer(model, n_ablations=8, seed=1, tokenizer=tok)
    assert not torch.equal(one._keep(batch, 0, prior), other._keep(batch, 0, prior))
    second = one._keep(batch, 1, prior[:2])
    assert not torch.equal(one._keep(batch, 0, prior)[:, :2], second)


def _registered(lm, **options):
    """``iba-surrogate`` as the registry builds it for a causal LM, with
    ``options`` (the command line's names)."""
    model, tok = lm
    return build_scorers(
        ["iba-surrogate"],
        Resources(model, tok),
        method_options={"iba-surrogate": options},
        kind="causal-lm",
    )["iba-surrogate"]


def test_the_registered_method_takes_its_options(lm):
    tok = lm[1]
    scorer = _registered(lm, ablations=5)
    assert isinstance(scorer, IBASurrogateScorer)
    assert scorer.settings["n_ablations"] == 5
    assert scorer.settings["outcome"] == "ranks"
    assert scorer.fit is rank_ridge
    scorer = _registered(lm, surrogate_outcome="log-odds")
    assert scorer.settings["outcome"] == "log-odds"
    assert scorer.fit is prior_ridge
    assert scorer.settings["prior"] == "iba-deletion, 1 step, logit-max"
    assert scorer.settings["design"] == "focused"
    scorer = _registered(lm, surrogate_design="factorial")
    assert scorer.settings["design"] == "factorial"
    assert scorer.settings["keep_prob"] == 0.5
    keep = scorer._keep(_batch(tok), 0, torch.zeros(3))  # 3 sources: 8 subsets
    assert len({tuple(row) for row in keep.tolist()}) == 8 == len(keep)


def test_the_sparse_design_left_for_the_lab(lm):
    """Issue 88 item 6: the sparse design lost (no more faithful than the
    default at 1.2x its cost, docs/studies/context_long_fifth.rst) and is the
    lab's (tests/lab/test_sparse_surrogate.py): the product's option and
    class refuse it, naming the designs they draw."""
    with pytest.raises(ValueError, match="must be one of 'focused', 'factorial'"):
        _registered(lm, surrogate_design="sparse")
    with pytest.raises(ValueError, match="design must be one of"):
        IBASurrogateScorer(lm[0], tokenizer=lm[1], design="sparse")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_ablations": 1}, "n_ablations"),
        ({"penalty": 0.0}, "penalty"),
        ({"outcome": "logits"}, "outcome must be one of"),
        ({"design": "random"}, "design must be one of"),
    ],
)
def test_the_scorer_refuses_bad_settings(lm, kwargs, match):
    model, tok = lm
    with pytest.raises(ValueError, match=match):
        IBASurrogateScorer(model, tokenizer=tok, **kwargs)
