"""Issue 77's fourth-round variant ``studylib.shrunk_fit``: the surrogate's
weights soft-thresholded at k spreads, against analytical values, and the
scorer's weights the threshold of its plain fit."""

import pytest
import torch

from captum_iba.evaluation.surrogate import IBASurrogateScorer
from tests.evaluation.test_context_anchors import _batch
from tests.helpers import study_module, tiny_causal_lm, tiny_word_tokenizer


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", layers=2, positions=64), tiny_word_tokenizer()


def test_the_soft_threshold_subtracts_k_spreads_and_zeroes_the_rest():
    """Median 0 and absolute deviations {0, 1, 1, 1, 1, 2, 2, 9}: their
    median 1, the spread 1 / 0.6745; k = 0.6745 subtracts exactly 1."""
    soft_threshold = study_module("shrunk_fit").soft_threshold
    w = torch.tensor([0.0, 1.0, -1.0, 1.0, -1.0, 2.0, -2.0, 9.0])
    got = soft_threshold(w, 0.6745)
    expected = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 8.0], dtype=got.dtype)
    assert torch.allclose(got, expected)
    assert torch.equal(soft_threshold(w, 0.0), w.double())
    assert torch.equal(soft_threshold(w, 100.0), torch.zeros(8, dtype=got.dtype))


def test_the_shrunk_scorer_gives_the_threshold_of_its_plain_fit(lm):
    model, tok = lm
    module = study_module("shrunk_fit")
    batch = _batch(tok)
    plain = IBASurrogateScorer(model, n_ablations=6, tokenizer=tok)
    shrunk = module.shrunk(IBASurrogateScorer(model, n_ablations=6, tokenizer=tok), 1)
    assert shrunk.settings["shrink"] == 1.0 and "shrink" not in plain.settings
    a, b = plain.attribute(batch).sources, shrunk.attribute(batch).sources
    for row in range(len(batch)):
        n, tokens = len(batch.spans[row]), len(batch.explained_ids(row))
        expected = module.soft_threshold(a[row, :n] / tokens, 1.0) * tokens
        assert torch.allclose(b[row, :n], expected, atol=1e-9)
    with pytest.raises(ValueError, match="shrink"):
        module.shrunk(plain, -1.0)
