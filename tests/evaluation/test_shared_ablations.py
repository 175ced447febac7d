"""The long-context study's ``iba-surrogate`` variants
(``experiments/context_study.py``'s ``iba-surrogate-<k>[-log-odds][-focused]
[-p<penalty>]``) and their shared work (``studylib.shared_ablations``): a
variant sharing another's ablations and prior scores exactly as it would
alone, without running the model again for what it shares."""

import pytest
import torch

from captum_iba.evaluation.surrogate import IBASurrogateScorer
from tests.evaluation.test_context_anchors import _batch
from tests.helpers import experiment, study_module, tiny_causal_lm, tiny_word_tokenizer


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", layers=2, positions=64), tiny_word_tokenizer()


def _counting(model):
    calls = []
    handle = model.register_forward_pre_hook(lambda *_: calls.append(1))
    return calls, handle


def test_a_variant_sharing_anothers_ablations_scores_as_alone(lm):
    model, tok = lm
    batch = _batch(tok)
    alone = {
        p: IBASurrogateScorer(model, n_ablations=6, penalty=p, tokenizer=tok)
        .attribute(batch)
        .sources
        for p in (1.0, 8.0)
    }
    shared = study_module("shared_ablations").Shared()
    first, second = (
        shared.attach(
            IBASurrogateScorer(model, n_ablations=6, penalty=p, tokenizer=tok)
        )
        for p in (1.0, 8.0)
    )
    assert torch.equal(
        first.attribute(batch).sources.nan_to_num(), alone[1.0].nan_to_num()
    )
    calls, handle = _counting(model)
    try:
        found = second.attribute(batch).sources
    finally:
        handle.remove()
    assert torch.equal(found.nan_to_num(), alone[8.0].nan_to_num())
    assert not torch.equal(found.nan_to_num(), alone[1.0].nan_to_num())
    assert calls == []  # neither the prior nor an ablation ran again


def test_another_design_through_the_shared_work_scores_as_alone(lm):
    model, tok = lm
    batch = _batch(tok)
    shared = study_module("shared_ablations").Shared()
    shared.attach(IBASurrogateScorer(model, n_ablations=6, tokenizer=tok)).attribute(
        batch
    )
    focused = IBASurrogateScorer(model, n_ablations=6, design="focused", tokenizer=tok)
    expected = focused.attribute(batch).sources
    found = (
        shared.attach(
            IBASurrogateScorer(model, n_ablations=6, design="focused", tokenizer=tok)
        )
        .attribute(batch)
        .sources
    )
    assert torch.equal(found.nan_to_num(), expected.nan_to_num())


@pytest.mark.parametrize(
    "name, settings",
    [
        (
            "iba-surrogate-16",
            dict(n_ablations=16, outcome="ranks", design="factorial", penalty=1.0),
        ),
        ("iba-surrogate-8-log-odds", dict(n_ablations=8, outcome="log-odds")),
        ("iba-surrogate-16-focused-p8", dict(design="focused", penalty=8.0)),
        ("iba-surrogate-16-p0.5", dict(penalty=0.5, design="factorial")),
    ],
)
def test_the_study_names_its_variants_settings(lm, name, settings):
    model, tok = lm
    scorer = experiment("context_study").surrogate_scorers([name])[name](model, tok)
    assert {k: scorer.settings[k] for k in settings} == settings


@pytest.mark.parametrize(
    "name",
    [
        "iba-surrogate-x",
        "iba-surrogate-16-focus",
        "iba-surrogate-1",
        "iba-surrogate-16-p",
    ],
)
def test_the_study_refuses_a_variant_it_does_not_know(name):
    with pytest.raises(SystemExit, match="the methods are iba-surrogate-<k>"):
        experiment("context_study").surrogate_scorers([name])
