"""The methods for causal LMs (captum_iba.evaluation.llm_scorers) on tiny
random Llama and GPT-2 built from configs: every registered method that
explains causal LMs runs
on the batch route, whole answer and per output token, leaves the model as
it found it (no hook, no parameter state changed), and refuses bad input."""

import pytest
import torch

from captum_iba.attr.llm import no_ranking
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.attnlrp import attnlrp_available
from captum_iba.registry import METHODS
from captum_iba.request import check_request
from tests.helpers import light_options, no_hooks, tiny_causal_lm, tiny_word_tokenizer

KINDS = ("llama", "gpt2")
#: The methods that score a context's sources, on a batch with sources only
#: (tests/evaluation/test_context_anchors.py runs them on one).
SOURCE_METHODS = (
    "iba-sources", "loso", "shapley-sources", "contextcite-32", "contextcite-256",
)  # fmt: skip
LLM_METHODS = [
    m
    for m in METHODS.names()
    if "causal-lm" in METHODS.entry(m).facts["models"]
    and (m != "AttnLRP" or attnlrp_available()[0])  # lxt: transformers 4.x
    and m != "at2"  # trained weights and sources: the lab, tests/lab/test_at2.py
    and m != "iba-heads"  # taught weights: the lab, tests/lab/test_at2_taught.py
    # a fitted explainer: tests/evaluation/test_amortized_llm.py
    and "explainer" not in METHODS.entry(m).facts["uses"]
    and m not in SOURCE_METHODS
]


def _scorer(model, tok, method):
    request = check_request([method], {}, None, model_kind="causal-lm")
    options = light_options(method)
    request = check_request([method], options, None, model_kind="causal-lm")
    return build_scorers(request, Resources(model, tok))[method]


def _batch(tok):
    return prompt_batch(
        tok, ["the cat sat on the mat", "a dog ran"], [" is big", " in park"]
    )


def test_one_name_per_method_for_both_kinds():
    """The methods explain a classifier and a causal LM under one name; the
    deprecated llm- names are those methods for causal LMs only; a method for one kind
    is refused on the other, naming those that fit."""
    assert {"IBA", "iba-faithful", "iba-deletion", "IG", "LOO", "random"} <= set(
        LLM_METHODS
    )
    assert not [m for m in METHODS.names() if m.startswith("llm-")]
    for name in ("iba-deletion", "ig", "ablation", "loo", "saliency"):
        check_request([name], model_kind="causal-lm")
        check_request([name], model_kind="classifier")
    with pytest.raises(ValueError, match="llm-ig explains causal LMs.*iba-deletion"):
        check_request(["llm-ig"], model_kind="classifier")
    with pytest.raises(ValueError, match="LIME-text explains classifiers.*IG"):
        check_request(["lime-text"], model_kind="causal-lm")


@pytest.mark.parametrize("method", SOURCE_METHODS)
def test_a_method_over_sources_refuses_a_batch_without_them(method):
    if method.startswith("contextcite"):
        pytest.importorskip("context_cite")
    assert "causal-lm" in METHODS.entry(method).facts["models"]
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    with pytest.raises(ValueError, match="no sources.*with_sources"):
        _scorer(model, tok, method).attribute(_batch(tok))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", LLM_METHODS)
def test_every_method_scores_the_prompt_tokens(kind, method):
    model, tok = tiny_causal_lm(kind), tiny_word_tokenizer()
    before = {
        n: (p.requires_grad, p.detach().clone()) for n, p in model.named_parameters()
    }
    batch = _batch(tok)
    scorer = _scorer(model, tok, method)
    found = scorer.attribute(batch, per_token=True)
    assert found.answer.shape == batch.input_ids.shape[:1] + found.answer.shape[1:]
    assert torch.isfinite(found.answer).all()
    # the scored tokens only (never padding nor special tokens)
    assert (found.answer[~batch.scored] == 0).all()
    assert (found.answer[batch.scored] != 0).any()
    if found.tokens is not None:  # (B, answer tokens, prompt tokens)
        assert found.tokens.shape[0] == 2 and found.tokens.shape[1] == 2
        assert torch.isfinite(found.tokens).all()
    assert no_hooks(model) and not model.training
    for name, p in model.named_parameters():
        assert p.requires_grad == before[name][0] and p.grad is None
        assert torch.equal(p.detach(), before[name][1]), name


class _Raises(torch.nn.Module):
    def forward(self, *args, **kwargs):
        raise RuntimeError("the layer fails")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["llm-iba-deletion", "llm-iba", "llm-ig"])
def test_no_hook_left_when_the_model_raises(kind, method):
    model, tok = tiny_causal_lm(kind), tiny_word_tokenizer()
    scorer = _scorer(model, tok, method)
    layers = model.model.layers if kind == "llama" else model.transformer.h
    last = len(layers) - 1
    good = layers[last]
    layers[last] = _Raises()
    try:
        with pytest.raises(RuntimeError, match="the layer fails"):
            scorer.attribute(_batch(tok), per_token=True)
    finally:
        layers[last] = good
    assert no_hooks(model)
    embeddings = model.get_input_embeddings()
    assert type(embeddings).__name__ == "Embedding"


def test_no_ranking_names_flat_scores():
    scored = torch.ones(2, 5, dtype=torch.bool)
    flat = torch.tensor([[288.0, 288.0, 288.0, 288.1, 290.0], [1.0, 2, 3, 4, 5]])
    assert no_ranking(flat, scored).tolist() == [True, False]


def test_flat_scores_warn(monkeypatch):
    """A configuration whose scores give no ranking says so."""
    import captum_iba.attr.llm as llm

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    scorer = _scorer(model, tok, "llm-iba-faithful")
    monkeypatch.setattr(
        llm, "no_ranking", lambda s, k: torch.ones(s.shape[0], dtype=bool)
    )
    with pytest.warns(UserWarning, match="gives no ranking for instance"):
        found = scorer.attribute(_batch(tok))
    assert found.flat.all()


def test_the_faithful_configuration_shares_a_weight_per_token():
    """llm-iba-faithful is the faithful configuration with mask='token' (the
    registry's entry), and its scores are one weight per token."""
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    scorer = _scorer(model, tok, "llm-iba-faithful")
    assert scorer.options.mask == "token" and scorer.options.prior.name == "baseline"
    assert scorer.settings["options"]["mask"] == "token"
    assert _scorer(model, tok, "llm-iba").options.mask == "feature"


@pytest.mark.parametrize(
    "method, advice",
    [("llm-iba", "mask='token'"), ("llm-iba-faithful", "config='deletion'")],
)
def test_the_flat_warning_says_what_to_try(monkeypatch, method, advice):
    """A per-feature noise mask is told of mask='token'; a token mask is not."""
    import captum_iba.attr.llm as llm

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    scorer = _scorer(model, tok, method)
    monkeypatch.setattr(
        llm, "no_ranking", lambda s, k: torch.ones(s.shape[0], dtype=bool)
    )
    with pytest.warns(UserWarning, match="gives no ranking") as caught:
        scorer.attribute(_batch(tok))
    text = " ".join(str(w.message) for w in caught)
    assert advice in text
    if method == "llm-iba-faithful":
        assert "mask='token'" not in text


def test_the_fused_route_gives_the_attention_no_broadcast_value(monkeypatch):
    """Eq. R2 in the fused attention: both SDPA calls of a layer above the
    bottleneck get a value with no stride-0 dimension (such a broadcast view
    made PyTorch's CPU attention fall back to its math kernel, whose L x L
    weights made memory quadratic), and no attention mask."""
    import torch.nn.functional as F

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    model.config._attn_implementation = "sdpa"
    seen = []
    original = F.scaled_dot_product_attention

    def spy(query, key, value, attn_mask=None, **kwargs):
        seen.append((0 not in value.stride(), attn_mask is None))
        return original(query, key, value, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    batch = prompt_batch(tok, ["the cat sat on the mat"], [" is big"])
    _scorer(model, tok, "llm-iba-deletion").attribute(batch)
    assert len(seen) >= 2 and all(dense for dense, _ in seen)
    assert all(no_mask for _, no_mask in seen)


#: Light options of each method, for the test of the random state.
RNG_LIGHT = {
    "llm-shapley": {"shap_samples": 2},
    "llm-lime": {"lime_samples": 8},
    "llm-kernel-shap": {"shap_samples": 8},
    "llm-ig": {"ig_steps": 4},
    "llm-ablation": {},
    "llm-iba": {"steps": 2},
}


@pytest.mark.parametrize("method", sorted(RNG_LIGHT))
def test_the_callers_random_state_is_left_alone(method):
    """Every method leaves the caller's torch, Python and NumPy random states
    as they were, as IBA does (Captum's sampling methods and IG advanced
    torch's global generator, LIME Python's too)."""
    import random

    import numpy as np

    from captum_iba.app.llm_explanation import explain_answer

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    torch.manual_seed(1234)
    random.seed(1234)
    np.random.seed(1234)
    states = torch.get_rng_state(), random.getstate(), np.random.get_state()[1]
    explain_answer(
        "the cat sat on the mat", model, method, tokenizer=tok, target=" ran in",
        **RNG_LIGHT[method],
    )  # fmt: skip
    assert torch.equal(torch.get_rng_state(), states[0])
    assert random.getstate() == states[1]
    assert (np.random.get_state()[1] == states[2]).all()


def test_a_users_llm_scorer_explains_a_causal_lm_the_rule_does_not_know():
    """0.3's LLMScorer base keeps forcing the causal-LM route: a wrapped
    model whose class name the kind rule does not know still gets the
    causal LM's pad id (the end of text), settings and prompt hook."""
    from captum_iba.attr.llm import AnswerScores
    from captum_iba.evaluation.llm_scorers import LLMScorer

    class Wrapped(torch.nn.Module):  # not ...ForCausalLM by name
        pass

    class Uniform(LLMScorer):
        def _scores(self, batch, per_token):
            return AnswerScores(torch.ones(batch.input_ids.shape), None)

    tok = tiny_word_tokenizer()
    tok.pad_token = None
    scorer = Uniform(Wrapped(), tokenizer=tok, name="uniform")
    assert scorer.kind == "causal-lm" and scorer.pad_token_id == tok.eos_token_id
    assert set(scorer.settings) == {"method", "setting"}
    batch = _batch(tiny_word_tokenizer())
    found = scorer.attribute(batch)
    assert torch.equal(found.answer, batch.scored.float())
