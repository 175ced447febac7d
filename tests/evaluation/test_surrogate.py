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
    distinct_masks,
    prior_ridge,
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


def test_the_scores_are_the_fit_of_its_own_ablations(lm):
    """Each prompt's scores: prior_ridge over the response's logit-probability
    (per token) under its ablations, recomputed by hand from the prompts
    those ablations leave, toward one deletion step's logit-max scores."""
    model, tok = lm
    batch = _batch(tok)
    scorer = IBASurrogateScorer(model, n_ablations=6, tokenizer=tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    found = scorer.attribute(batch).sources
    assert no_hooks(model)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    prior = source_scores(scorer.prior.attribute(batch), batch, ONE_STEP_POOLING)
    ll = CausalLMLogLikelihood(model)
    for b in range(len(batch)):
        n, answer = len(batch.spans[b]), batch.answer_ids(b)
        keep = scorer._keep(batch, b)
        assert keep.shape == (min(6, 2**n), n)
        ids_of = row_ablation(tok, batch, b)
        lp = pair_log_probs(
            ll, [ids_of(k) for k in keep.tolist()], [answer] * len(keep)
        )
        expected = prior_ridge(keep, log_odds(lp) / len(answer), prior[b, :n])
        assert torch.allclose(found[b, :n], expected * len(answer), atol=1e-6)
    assert torch.isnan(found[1, 2])  # the second prompt has two sources


def test_the_ablations_follow_the_seed_and_the_prompt(lm):
    model, tok = lm
    batch = _batch(tok)
    one = IBASurrogateScorer(model, n_ablations=8, tokenizer=tok)
    assert torch.equal(one._keep(batch, 0), one._keep(batch, 0))
    other = IBASurrogateScorer(model, n_ablations=8, seed=1, tokenizer=tok)
    assert not torch.equal(one._keep(batch, 0), other._keep(batch, 0))
    assert not torch.equal(one._keep(batch, 0)[:, :2], one._keep(batch, 1))


def test_the_registered_method_takes_its_ablations(lm):
    model, tok = lm
    scorer = build_scorers(
        ["iba-surrogate"],
        Resources(model, tok),
        method_options={"iba-surrogate": {"ablations": 5}},
        kind="causal-lm",
    )["iba-surrogate"]
    assert isinstance(scorer, IBASurrogateScorer)
    assert scorer.settings["n_ablations"] == 5
    assert scorer.settings["prior"] == "iba-deletion, 1 step, logit-max"


@pytest.mark.parametrize(
    "kwargs, match",
    [({"n_ablations": 1}, "n_ablations"), ({"penalty": 0.0}, "penalty")],
)
def test_the_scorer_refuses_bad_settings(lm, kwargs, match):
    model, tok = lm
    with pytest.raises(ValueError, match=match):
        IBASurrogateScorer(model, tokenizer=tok, **kwargs)
