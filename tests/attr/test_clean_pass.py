"""The clean pass once (captum_iba.attr._speed.CleanForms): an attribution's
later calls, whose paths are kept and whose targets do not read the clean
output, stop the clean forward at the layers; the scores are those of a
fresh attribution, which runs it whole."""

import pytest
import torch
from torch import nn

from captum_iba import InformationBottleneckAttribution
from tests.helpers import tiny_causal_lm, tiny_hf_model


def _batch(vocab):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return ids, mask


def _case(kind):
    """The forward, the layer, the head that ends a whole forward, the
    inputs, further arguments and target."""
    if kind == "bert":
        model = tiny_hf_model("bert")
        ids, mask = _batch(60)
        layer = model.base_model.encoder.layer[0]
        return model, layer, model.classifier, ids, (mask,), [0, 1, 1]
    from captum_iba.attr.llm import CausalLMLogLikelihood

    inner = tiny_causal_lm("llama")
    ids, mask = _batch(20)
    layer = inner.model.layers[1] if kind == "llama" else inner.model.embed_tokens
    args = (mask, torch.where(mask.bool(), ids, -100))
    return CausalLMLogLikelihood(inner), layer, inner.lm_head, ids, args, None


def _heads(iba, head, ids, args, target, **kw):
    """The scores of one call and how many times it ran the head."""
    calls = []
    handle = head.register_forward_hook(lambda *a: calls.append(1))
    try:
        out = iba.attribute(ids, target=target, additional_forward_args=args,
                            steps=2, seed=0, **kw)  # fmt: skip
    finally:
        handle.remove()
    return out, len(calls)


@pytest.mark.parametrize("kind", ["bert", "llama", "llama-embeddings"])
def test_later_calls_stop_the_clean_forward_at_the_layer(kind):
    model, layer, head, ids, args, target = _case(kind)
    iba = InformationBottleneckAttribution(model, layer)
    _, first = _heads(iba, head, ids, args, target)
    again, second = _heads(iba, head, ids, args, target)
    # the first call runs the clean output and the replay check, the second neither
    assert first - second == 2
    fresh, _ = _heads(
        InformationBottleneckAttribution(model, layer), head, ids, args, target
    )
    torch.testing.assert_close(again, fresh)
    assert not layer._forward_hooks and not head._forward_hooks


def test_the_predicted_class_keeps_the_clean_output():
    model, layer, head, ids, args, _ = _case("bert")
    iba = InformationBottleneckAttribution(model, layer)
    _, first = _heads(iba, head, ids, args, None)
    again, second = _heads(iba, head, ids, args, None)
    assert first - second == 1  # the replay check only: target=None reads the output
    fresh, _ = _heads(
        InformationBottleneckAttribution(model, layer), head, ids, args, None
    )
    torch.testing.assert_close(again, fresh)


def test_without_cuts_every_call_runs_the_clean_output():
    model, layer, head, ids, args, target = _case("bert")
    iba = InformationBottleneckAttribution(model, layer, cuts=False)
    _, first = _heads(iba, head, ids, args, target)
    _, second = _heads(iba, head, ids, args, target)
    assert first - second == 1


class Columns(nn.Module):
    """Log-probabilities of ``k`` classes (``k`` a further argument), plus
    ``shift`` (which makes them positive)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.head = nn.Embedding(20, 6), nn.Linear(6, 4)

    def forward(self, ids, k=4, shift=0.0):
        logits = self.head(self.embed(ids).mean(1))[:, :k]
        return torch.log_softmax(logits, -1) + shift


def test_a_later_output_of_another_form_is_refused():
    model = Columns()
    ids = torch.randint(0, 20, (2, 5), generator=torch.Generator().manual_seed(1))
    iba = InformationBottleneckAttribution(model, model.embed)

    def call(k, shift=0.0):
        return iba.attribute(ids, target=[0, 1], additional_forward_args=(k, shift),
                             objective="log_probability", steps=2, seed=0)  # fmt: skip

    call(4)
    with pytest.raises(ValueError, match=r"returned shape \(3,\) per row.*had \(4,\)"):
        call(3)
    with pytest.raises(ValueError, match="needs log-probabilities"):
        call(4, shift=5.0)
    assert call(4).shape == (2, 5, 6)


def test_the_baselines_forward_stops_at_the_layer():
    """The baselines' output is never read: their forward ends at the layer,
    so a prior that uses them runs the head as often as one that does not."""
    model, layer, head, ids, args, target = _case("bert")
    runs = {}
    for prior in ("baseline", "paper"):
        iba = InformationBottleneckAttribution(
            model, layer, pad_token_id=0, special_token_ids=[1, 2]
        )
        runs[prior] = _heads(iba, head, ids, args, target, prior=prior)[1]
    assert runs["baseline"] == runs["paper"]
