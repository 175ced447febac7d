"""The lab's sparse design of ``iba-surrogate``
(:mod:`captum_iba_lab.sparse_surrogate`), which left the product's
``--surrogate-design`` (issue 88 item 6): its draws, and its scorer as the
context study builds it for ``iba-surrogate-<k>-sparse``."""

import pytest
import torch
from captum_iba_lab.sparse_surrogate import SparseSurrogateScorer, sparse_masks

from captum_iba.evaluation.surrogate import IBASurrogateScorer
from tests.evaluation.test_context_anchors import _batch
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer


def test_the_sparse_design_keeps_few_sources_distinct_and_seeded():
    """Each source kept with probability 0.3 (the share over 64 x 32 draws
    within four standard errors), no row twice, the same rows for the same
    seed and others for another."""
    keep = sparse_masks(32, 64, seed=5)
    assert keep.shape == (64, 32)
    assert len({tuple(row) for row in keep.tolist()}) == 64
    share = float(keep.double().mean())
    assert abs(share - 0.3) < 4 * (0.3 * 0.7 / keep.numel()) ** 0.5
    assert torch.equal(keep, sparse_masks(32, 64, seed=5))
    assert not torch.equal(keep, sparse_masks(32, 64, seed=6))
    rare = sparse_masks(32, 200, seed=0, keep_prob=0.2)
    assert (
        abs(float(rare.double().mean()) - 0.2) < 4 * (0.2 * 0.8 / rare.numel()) ** 0.5
    )


@pytest.mark.parametrize("n_sources, n_ablations", [(3, 16), (4, 16), (2, 8)])
def test_the_sparse_design_takes_every_subset_where_there_are_few(
    n_sources, n_ablations
):
    keep = sparse_masks(n_sources, n_ablations, seed=1)
    assert len({tuple(row) for row in keep.tolist()}) == 2**n_sources == len(keep)


@pytest.mark.parametrize("keep_prob", [0.0, 1.0, -0.2])
def test_the_sparse_design_refuses_a_probability_outside_0_1(keep_prob):
    with pytest.raises(ValueError, match="keep_prob"):
        sparse_masks(8, 4, keep_prob=keep_prob)


def test_the_sparse_scorer_draws_its_design_and_says_so():
    """The scorer is ``iba-surrogate`` but for its draws: its settings say
    the sparse design and its probability, and a prompt's ablations are
    :func:`sparse_masks` of the seed the product's scorer draws from (3
    sources: every one of the 8 subsets)."""
    model, tok = tiny_causal_lm("llama", layers=2, positions=64), tiny_word_tokenizer()
    scorer = SparseSurrogateScorer(model, tokenizer=tok)
    product = IBASurrogateScorer(model, tokenizer=tok)
    assert (scorer.settings["design"], scorer.settings["keep_prob"]) == ("sparse", 0.3)
    own = ("method", "design", "keep_prob")  # its class, its draws
    assert {k: v for k, v in scorer.settings.items() if k not in own} == {
        k: v for k, v in product.settings.items() if k not in own
    }
    assert scorer.settings["method"] == "SparseSurrogateScorer"
    prior = torch.arange(20.0)
    assert torch.equal(scorer._masks(prior, 16, 11), sparse_masks(20, 16, 11))
    assert not torch.equal(scorer._masks(prior, 16, 11), product._masks(prior, 16, 11))
    keep = scorer._keep(_batch(tok), 0, torch.zeros(3))
    assert len({tuple(row) for row in keep.tolist()}) == 8 == len(keep)
    with pytest.raises(TypeError, match="no design="):
        SparseSurrogateScorer(model, tokenizer=tok, design="focused")
