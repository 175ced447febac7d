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
    pair_log_probs,
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


def test_the_calls_take_rows_of_like_length_and_give_them_back_in_order():
    """Rows of 3-9 tokens in calls of 2: the calls take them in order of
    length (each holds neighbours, so it pads little), and each pair's
    outcome is its own, in the pairs' order."""
    keeps = [[k == j for k in range(6)] for j in (3, 0, 5, 1)]
    keeps += [[True] * 6, [False] * 6, [True, False] * 3]
    prompts = [prompt_ids(keep) for keep in keeps]
    widths = []

    def recording(ids, mask, labels):
        widths.append(sorted(mask.sum(1).tolist()))
        return toy_log_likelihood(ids, mask, labels)

    found = pair_log_probs(recording, prompts, [[5]] * len(prompts), batch_size=2)
    alone = torch.cat([pair_log_probs(toy_log_likelihood, [p], [[5]]) for p in prompts])
    assert torch.equal(found, alone)
    assert [w for call in widths for w in call] == sorted(len(p) + 1 for p in prompts)


# A part of the response (issue 77, item 3): a response of two tokens, 5
# then 6, each with its own known log-odds over the sources kept; a span's
# outcome is its tokens' log-probability, the tokens before it given.
W6 = torch.tensor([-1.0, 2.5, 0.0, 1.0, -2.0, 0.5])


def two_token_log_likelihood(ids, mask, labels):
    """log p(token 5) = logsigmoid(BIAS + W . kept), log p(token 6) =
    logsigmoid(W6 . kept), summed over the labelled ones (the response is
    [5, 6], at the row's end)."""
    present = torch.stack([((ids == 10 + i) & (mask == 1)).any(1) for i in range(6)])
    z5 = BIAS + (W[:, None] * present.double()).sum(0)
    z6 = (W6[:, None] * present.double()).sum(0)
    assert (ids[:, -2:] == torch.tensor([5, 6])).all()
    five, six = labels[:, -2] == 5, labels[:, -1] == 6
    assert (labels[:, :-2] == IGNORE_INDEX).all()
    return F.logsigmoid(z5) * five + F.logsigmoid(z6) * six


@pytest.mark.parametrize("span, truth", [((0, 1), W), ((1, 2), W6)])
def test_a_span_s_outcome_is_its_own_tokens_log_probability(span, truth):
    ablations = ablate_sources(
        two_token_log_likelihood, prompt_ids, [5, 6], 6, 32, seed=0, span=span
    )
    assert ablations.span == span
    bias = BIAS if span == (0, 1) else 0.0
    z = bias + ablations.keep.double() @ truth.double()
    torch.testing.assert_close(ablations.log_odds, z)  # its log-odds, exactly
    other = W6 if truth is W else W
    lds = linear_datamodeling_score(torch.stack([truth, other]), ablations)
    assert lds[0] == pytest.approx(1.0) and lds[1] < 0.5
    # the top-k drop of the span, by hand: source 1 is W6's best (2.5)
    drops = top_k_drop(
        two_token_log_likelihood, prompt_ids, [5, 6], truth, ks=(1,), span=span
    )
    z0 = bias + float(truth.sum())
    best = int(torch.argmax(truth))
    expected = F.logsigmoid(torch.tensor(z0)) - F.logsigmoid(
        torch.tensor(z0 - float(truth[best]))
    )
    assert float(drops[0, 0]) == pytest.approx(float(expected))
    out = context_test(
        two_token_log_likelihood, prompt_ids, [5, 6], {"truth": truth}, ks=(1,),
        ablations=ablations, span=span,
    )  # fmt: skip
    assert out["truth"].lds == pytest.approx(1.0)


def test_the_spans_of_a_response_add_up_to_it():
    """The whole response's log-probability is its parts' sum: the outcome
    of the whole (no span) is that of the span (0, 2), and of (0, 1) plus
    (1, 2)."""
    keep = ablation_masks(6, 8, seed=3)
    whole = response_log_probs(two_token_log_likelihood, prompt_ids, [5, 6], keep)
    both = response_log_probs(
        two_token_log_likelihood, prompt_ids, [5, 6], keep, span=(0, 2)
    )
    parts = [
        response_log_probs(two_token_log_likelihood, prompt_ids, [5, 6], keep, span=s)
        for s in ((0, 1), (1, 2))
    ]
    torch.testing.assert_close(whole, both)
    torch.testing.assert_close(whole, parts[0] + parts[1])


@pytest.mark.parametrize("span", [(0, 0), (1, 3), (-1, 1), (True, 2), (0,)])
def test_a_span_outside_the_response_is_refused(span):
    keep = ablation_masks(6, 4, seed=0)
    with pytest.raises(ValueError, match="span must be"):
        response_log_probs(
            two_token_log_likelihood, prompt_ids, [5, 6], keep, span=span
        )


def test_ablations_of_another_span_are_refused():
    ablations = ablate_sources(
        two_token_log_likelihood, prompt_ids, [5, 6], 6, 8, span=(0, 1)
    )
    with pytest.raises(ValueError, match=r"tokens \(0, 1\), not of span \(1, 2\)"):
        context_test(
            two_token_log_likelihood, prompt_ids, [5, 6], {"w": W}, ks=(1,),
            ablations=ablations, span=(1, 2),
        )  # fmt: skip
