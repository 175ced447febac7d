"""One run on the response's summed log-probability gives Captum's
``LLMGradientAttribution.seq_attr`` (the sum of its per-token runs) for the
methods linear in their target, on a tiny GPT-2 and Llama; other methods are
refused."""

import pytest
import torch
from captum.attr import (
    LayerGradientShap,
    LayerGradientXActivation,
    LayerIntegratedGradients,
    LLMGradientAttribution,
    TextTokenInput,
)

from captum_iba._utils.modules import embeddings_of
from captum_iba.evaluation.summed_gradient import SummedLLMGradientAttribution
from tests.helpers import no_hooks, tiny_causal_lm, tiny_word_tokenizer

PROMPT = "the cat sat on the mat"
RESPONSE = "a dog ran"


def _both(model, tok, method_class, **options):
    method = method_class(model, embeddings_of(model))
    inp = TextTokenInput(PROMPT, tok, skip_tokens=[])
    target = torch.tensor(tok.encode(RESPONSE, add_special_tokens=False))
    captum = LLMGradientAttribution(method, tok).attribute(inp, target, **options)
    summed = SummedLLMGradientAttribution(method, tok).attribute(inp, target, **options)
    return captum, summed


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize(
    "method_class, options",
    [
        (LayerIntegratedGradients, {"n_steps": 8, "baselines": 0}),
        (LayerGradientXActivation, {}),
    ],
)
def test_one_summed_run_equals_the_sum_of_captums_runs(kind, method_class, options):
    model, tok = tiny_causal_lm(kind), tiny_word_tokenizer()
    captum, summed = _both(model, tok, method_class, **options)
    assert summed.token_attr is None
    assert summed.seq_attr.shape == captum.seq_attr.shape == (6,)
    assert captum.seq_attr.abs().max() > 1e-3  # a test that can fail
    torch.testing.assert_close(summed.seq_attr, captum.seq_attr, atol=1e-5, rtol=1e-4)
    assert summed.input_tokens == captum.input_tokens
    assert no_hooks(model)


def test_the_summed_target_is_the_response_log_probability():
    """The summed run's target is the response's log-probability: each
    token's log-probability at the position before it, summed (checked
    against the model's own forward pass)."""
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    method = LayerIntegratedGradients(model, embeddings_of(model))
    attr = SummedLLMGradientAttribution(method, tok)
    inp = TextTokenInput(PROMPT, tok, skip_tokens=[])
    target = torch.tensor(tok.encode(RESPONSE, add_special_tokens=False))
    value = attr.attr_method.forward_func(inp.to_tensor(), inp, target.tolist())
    ids = torch.cat([inp.to_model_input(inp.to_tensor()), target.unsqueeze(0)], 1)
    with torch.no_grad():
        logp = model(ids).logits.log_softmax(-1)[0]
    n = ids.shape[1] - len(target)
    expected = sum(logp[n - 1 + i, t] for i, t in enumerate(target.tolist()))
    torch.testing.assert_close(value.detach()[0], expected)


def test_a_method_with_random_draws_is_refused():
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    method = LayerGradientShap(model, embeddings_of(model))
    with pytest.raises(TypeError, match="LayerGradientShap.*LLMGradientAttribution"):
        SummedLLMGradientAttribution(method, tok)


def test_an_empty_response_is_refused():
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    attr = SummedLLMGradientAttribution(
        LayerIntegratedGradients(model, embeddings_of(model)), tok
    )
    inp = TextTokenInput(PROMPT, tok, skip_tokens=[])
    with pytest.raises(ValueError, match="target is empty"):
        attr.attribute(inp, torch.tensor([], dtype=torch.long))
