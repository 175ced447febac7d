"""Tests for captum_iba.evaluation.explainers: registered methods as callables."""

import copy

import pytest
import torch

from captum_iba.evaluation import RandomScorer, method_explainer
from captum_iba.metrics import cascading_randomization
from tests.evaluation.conftest import check_scores


def test_unknown_method_fails_before_any_work():
    with pytest.raises(ValueError, match="Unknown method 'nope'"):
        method_explainer("nope")


def test_random_explainer_matches_its_scorer(model, tokenizer, batch):
    ids, mask, _ = batch
    explain = method_explainer("random", tokenizer, seed=3)
    scores = explain(model, ids, mask, torch.zeros(ids.shape[0], dtype=torch.long))
    expected = RandomScorer(model, seed=3, tokenizer=tokenizer).attribute(
        ids, attention_mask=mask
    )
    assert torch.equal(scores, expected)


def test_iba_explainer_resolves_its_layer_in_the_model_it_is_given(
    model, tokenizer, batch
):
    """Each call builds the scorer on the model passed in (the randomised copy),
    not on the model the explainer was first used with."""
    ids, mask, tt = batch
    explain = method_explainer(
        "IBA", tokenizer, layer_index=1, method_options={"steps": 2, "n_samples": 2}
    )
    target = torch.tensor([0, 1, 0])
    a = explain(model, ids, mask, target, token_type_ids=tt)
    check_scores(a, ids, mask)
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.bert.encoder.layer[0].parameters():
            p.add_(torch.randn_like(p))
    b = explain(other, ids, mask, target, token_type_ids=tt)
    assert not torch.allclose(a, b)
    assert torch.equal(explain(model, ids, mask, target, token_type_ids=tt), a)


def test_explainer_runs_in_the_randomisation_check(model, tokenizer, batch):
    ids, mask, tt = batch
    before = {k: v.clone() for k, v in model.state_dict().items()}
    explain = method_explainer("IG", tokenizer, method_options={"n_steps": 4})
    result = cascading_randomization(
        explain, model, ids, attention_mask=mask, token_type_ids=tt,
        tokenizer=tokenizer, method="IG",
    )  # fmt: skip
    assert result.stages[0] == "head" and result.stages[-1] == "embeddings"
    assert result.defined().min() > 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
