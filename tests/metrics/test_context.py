"""ContextCite's metrics (captum_iba.metrics.context) by hand: a toy whose
response log-odds is a known linear function of the sources kept, and a tiny
causal LM for the padding."""

import math

import pytest
import torch
import torch.nn.functional as F

from captum_iba.metrics.context import (
    IGNORE_INDEX,
    ablate_sources,
    ablation_masks,
    context_test,
    linear_datamodeling_score,
    response_log_probs,
    top_k_drop,
)

#: Each source's effect on the response's logit (source i is token 10 + i).
W = torch.tensor([2.0, -1.0, 0.5, 3.0, 0.0, 1.5])
BIAS = -1.0


def prompt_ids(keep):
    """Query token 1, then the kept sources' tokens, then token 2."""
    return [1] + [10 + i for i, k in enumerate(keep) if k] + [2]


def toy_log_likelihood(ids, mask, labels):
    """log p(response) = logsigmoid(z), z = BIAS + the kept sources' W: so
    the response's log-odds is z exactly."""
    present = torch.stack([((ids == 10 + i) & (mask == 1)).any(1) for i in range(6)])
    z = BIAS + (W[:, None] * present.double()).sum(0)
    assert (labels[:, -1] == 5).all() and (labels[:, :-1] == IGNORE_INDEX).all()
    return F.logsigmoid(z)


def test_ablations_are_seeded_and_keep_about_half():
    a = ablation_masks(6, 400, keep_prob=0.5, seed=3)
    assert a.shape == (400, 6) and a.dtype == torch.bool
    assert torch.equal(a, ablation_masks(6, 400, keep_prob=0.5, seed=3))
    assert not torch.equal(a, ablation_masks(6, 400, keep_prob=0.5, seed=4))
    assert 0.45 < a.double().mean() < 0.55
    state = torch.get_rng_state()
    ablation_masks(6, 10)
    assert torch.equal(state, torch.get_rng_state())  # the caller's RNG left alone


@pytest.mark.parametrize(
    "args, match",
    [((1, 32), "n_sources"), ((4, 1), "n_ablations"), ((4, 8, 1.0), "keep_prob")],
)
def test_bad_ablation_arguments_are_named(args, match):
    with pytest.raises(ValueError, match=match):
        ablation_masks(*args)


def test_the_true_effects_have_lds_one_and_their_opposite_minus_one():
    ablations = ablate_sources(toy_log_likelihood, prompt_ids, [5], 6, 32, seed=0)
    # the actual outcome is the toy's z, exactly
    z = BIAS + ablations.keep.double() @ W.double()
    torch.testing.assert_close(ablations.log_odds, z)
    lds = linear_datamodeling_score(torch.stack([W, -W, torch.zeros(6)]), ablations)
    assert lds[0] == pytest.approx(1.0) and lds[1] == pytest.approx(-1.0)
    assert math.isnan(lds[2])  # zero scores predict nothing


def test_top_k_drop_by_hand():
    scores = torch.stack([W, -W])
    drops = top_k_drop(toy_log_likelihood, prompt_ids, [5], scores, ks=(1, 3, 6))
    z0 = BIAS + float(W.sum())

    def drop(removed):
        z = z0 - float(W[list(removed)].sum())
        return F.logsigmoid(torch.tensor(z0)) - F.logsigmoid(torch.tensor(z))

    # W's top 1 is source 3 (3.0); its top 3: 3, 0, 5; -W's: 1, then 4, 2
    assert drops[0, 0] == pytest.approx(float(drop([3])))
    assert drops[0, 1] == pytest.approx(float(drop([3, 0, 5])))
    assert drops[1, 1] == pytest.approx(float(drop([1, 4, 2])))
    assert drops[1, 1] < 0 < drops[0, 1]  # removing what hurts raises p
    assert math.isnan(drops[0, 2]) and math.isnan(drops[1, 2])  # k = S


def test_context_test_gives_every_method_both_metrics():
    out = context_test(
        toy_log_likelihood,
        prompt_ids,
        [5],
        {"truth": W, "random": W[[2, 5, 0, 4, 1, 3]]},
    )
    assert set(out) == {"truth", "random"}
    assert out["truth"].lds == pytest.approx(1.0) and out["truth"].n_ablations == 32
    assert out["truth"].lds > out["random"].lds
    assert out["truth"].top_k_drop[1] > out["random"].top_k_drop[1]
    assert sorted(out["truth"].top_k_drop) == [1, 3, 5]


def test_bad_scores_and_responses_are_refused():
    ablations = ablate_sources(toy_log_likelihood, prompt_ids, [5], 6, 8)
    with pytest.raises(ValueError, match="S = 6 sources"):
        linear_datamodeling_score(torch.ones(5), ablations)
    with pytest.raises(ValueError, match="non-finite"):
        linear_datamodeling_score(
            torch.tensor([1.0, float("nan")] + [0.0] * 4), ablations
        )
    with pytest.raises(ValueError, match="empty"):
        response_log_probs(toy_log_likelihood, prompt_ids, [], ablations.keep)
    with pytest.raises(ValueError, match="positive"):
        top_k_drop(toy_log_likelihood, prompt_ids, [5], W, ks=(0,))


def test_left_padding_on_a_causal_lm_changes_nothing():
    """Rows of different lengths in one call score as they do alone."""
    from captum_iba.attr.llm import CausalLMLogLikelihood
    from tests.helpers import tiny_causal_lm

    model = CausalLMLogLikelihood(tiny_causal_lm("llama", seed=2))
    sources = [[3, 4, 5], [8, 9], [10, 11, 12, 13]]

    def ids_of(keep):
        return [1] + [t for s, k in zip(sources, keep) for t in s if k] + [7]

    keep = ablation_masks(3, 6, seed=1)
    together = response_log_probs(model, ids_of, [14, 15], keep, batch_size=6)
    alone = response_log_probs(model, ids_of, [14, 15], keep, batch_size=1)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)
