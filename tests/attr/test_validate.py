"""attribute() refuses bad input with a message naming the argument (P8, P9)."""

import pytest
import torch

from captum_iba import InformationBottleneckAttribution
from tests.helpers import no_hooks, tiny_hf_model


@pytest.fixture(scope="module")
def iba():
    torch.manual_seed(0)
    model = tiny_hf_model("bert")
    return InformationBottleneckAttribution(model, model.bert.encoder.layer[1])


IDS = torch.randint(5, 50, (2, 6), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    "kwargs, error, says",
    [
        (dict(inputs=IDS[:0]), ValueError, "no instance"),
        (dict(inputs=IDS[None]), ValueError, r"shape \(B, L\)"),
        (dict(inputs=IDS + 100), ValueError, "vocabulary 0..59"),
        (dict(inputs=-IDS), ValueError, "vocabulary"),
        (dict(inputs=torch.randint(5, 50, (1, 600))), ValueError, "512 positions"),
        (dict(internal_batch_size=4.5), ValueError, "internal_batch_size"),
        (dict(seed=2**70), ValueError, "seed"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(beta=float("inf")), ValueError, "beta must be a finite"),
        (dict(lr=float("inf")), ValueError, "lr must be a finite"),
        (dict(init_alpha=float("-inf")), ValueError, "init_alpha must be a finite"),
        (dict(init_alpha=float("nan")), ValueError, "init_alpha must be a finite"),
        (dict(target=True), TypeError, "target"),
        (dict(target=[0.5, 1.7]), TypeError, "target"),
    ],
)
def test_bad_input_names_the_argument(iba, kwargs, error, says):
    call = dict(inputs=IDS, target=0, steps=1, n_samples=2)
    call.update(kwargs)
    with pytest.raises(error, match=says):
        iba.attribute(**call)


def test_nan_weights_give_a_clear_error():
    model = tiny_hf_model("bert")
    with torch.no_grad():
        model.bert.encoder.layer[0].output.dense.weight[0, 0] = float("nan")
    iba = InformationBottleneckAttribution(model, model.bert.encoder.layer[1])
    with pytest.raises(FloatingPointError, match="non-finite"):
        iba.attribute(IDS, target=0, steps=1, n_samples=2)


def test_float_inputs_are_not_token_checked():
    """Embeddings as inputs (a forward without a config) are left alone."""
    model = tiny_hf_model("bert")

    def forward(embeds):
        return model(inputs_embeds=embeds).logits

    emb = model.bert.embeddings.word_embeddings(IDS).detach()
    iba = InformationBottleneckAttribution(forward, model.bert.encoder.layer[1])
    assert iba.attribute(emb, target=0, steps=1, n_samples=2).shape[:2] == (2, 6)


def _poison(model, where, value):
    params = {
        "below": model.bert.encoder.layer[0].output.dense.weight,
        "above": model.bert.encoder.layer[2].output.dense.weight,
        "head": model.classifier.weight,
    }
    with torch.no_grad():
        params[where][0, 0] = value


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize(
    "where, says",
    [
        ("below", "layer 'bert.encoder.layer.1' produced non-finite"),
        ("above", "not finite .* although layer 'bert.encoder.layer.1'.* above"),
        ("head", "not finite .* although layer 'bert.encoder.layer.1'.* above"),
    ],
)
def test_non_finite_weights_above_and_below_the_bottleneck(where, says, value):
    """Issue 20, item 6: NaN or inf weights anywhere give one clear error
    saying on which side of the bottleneck (not torch's "atol ... -nan")."""
    torch.manual_seed(0)
    model = tiny_hf_model("bert")
    _poison(model, where, value)
    for stack in (True, False):
        iba = InformationBottleneckAttribution(
            model, model.bert.encoder.layer[1], layer_stack=stack
        )
        with pytest.raises(FloatingPointError, match=says):
            iba.attribute(IDS, target=0, steps=1, n_samples=2)
        assert no_hooks(model) and all(p.grad is None for p in model.parameters())


def test_lengths_past_the_positions_of_every_kind_of_model():
    """Issue 20: RoBERTa's positions count from pad_token_id + 1 (40 entries,
    38 tokens), GPT-2 behind CausalLMLogLikelihood has n_positions."""
    from captum_iba.attr.llm import CausalLMLogLikelihood
    from tests.helpers import causal_lm_layers, tiny_causal_lm

    roberta = tiny_hf_model("roberta")
    ids = torch.randint(5, 50, (1, 39))
    iba = InformationBottleneckAttribution(roberta, roberta.roberta.encoder.layer[0])
    with pytest.raises(ValueError, match="39 tokens, more than the model's 38"):
        iba.attribute(ids, target=0, steps=1, n_samples=2)
    iba.attribute(ids[:, :38], target=0, steps=1, n_samples=2)
    lm = tiny_causal_lm("gpt2")
    wrapped = CausalLMLogLikelihood(lm)
    ids = torch.randint(3, 19, (1, 33))
    labels = ids.clone()
    labels[:, :30] = -100
    iba = InformationBottleneckAttribution(wrapped, causal_lm_layers(lm)[1])
    with pytest.raises(ValueError, match="33 tokens, more than the model's 32"):
        iba.attribute(ids, additional_forward_args=(torch.ones_like(ids), labels))
