"""The exact cuts and the bfloat16 option of IBA (captum_iba.attr._speed)."""

import pytest
import torch
from torch import nn

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr._precision import BF16_ENV_VAR
from captum_iba.attr._seam import Seam
from captum_iba.attr._speed import ClsRowLayer, instances_per_chunk
from tests.helpers import tiny_hf_model


def _batch(vocab=60):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    return ids, mask


def _attr(model, layer, **kw):
    ids, mask = _batch()
    iba = InformationBottleneckAttribution(model, layer, **kw)
    out = iba.attribute(ids, target=[0, 1, 1], additional_forward_args=(mask,),
                        steps=3, n_samples=4, seed=0)  # fmt: skip
    run = iba.last_run[0]
    return out, run["path"] + ("+cuts" if run["cuts"] else "")


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_cls_row_layer_equals_the_full_layer_at_row_0(kind):
    model = tiny_hf_model(kind)
    layer = model.base_model.encoder.layer[-1]
    assert ClsRowLayer.supports(layer)
    h = torch.randn(2, 7, 16)
    mask = torch.zeros(2, 1, 7, 7)
    mask[1, :, :, 5:] = torch.finfo(torch.float32).min
    with torch.no_grad():
        full = layer(h, mask)
        full = full[0] if isinstance(full, tuple) else full
        cut = ClsRowLayer(layer)(h, mask)
    torch.testing.assert_close(cut[:, 0], full[:, 0], rtol=1e-6, atol=1e-6)
    assert torch.isnan(cut[:, 1:]).all()


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_cuts_give_the_full_computation(kind):
    model = tiny_hf_model(kind)
    layer = model.base_model.transformer.layer[0] if kind == "distilbert" else (
        model.base_model.encoder.layer[0]
    )  # fmt: skip
    cut, path = _attr(model, layer)
    full, full_path = _attr(model, layer, cuts=False)
    assert path == "stack+cuts" and full_path == "stack"
    torch.testing.assert_close(cut, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_deletion_at_the_embeddings_replays_them_with_the_cls_cut(kind):
    """config="deletion" at the embeddings: the embeddings are not computed
    at each step (a stub returns their output) and the last layer computes
    its [CLS] row only, and both terms share a pass; the scores equal those
    of the hooks (without the cuts: exactly)."""
    from tests.helpers import no_hooks

    model = tiny_hf_model(kind)
    ids, mask = _batch()
    runs = {}
    for name, kw in (("cut", {}), ("plain", dict(cuts=False))):
        iba = InformationBottleneckAttribution(
            model, model.base_model.embeddings, special_token_ids=[], **kw
        )
        out = iba.attribute(ids, target=[0, 1, 1], additional_forward_args=(mask,),
                            config="deletion", steps=3)  # fmt: skip
        runs[name] = (out, iba.last_run[0]["path"], iba.last_run[0]["cuts"])
    hooks = InformationBottleneckAttribution(
        model, model.base_model.embeddings, special_token_ids=[], cuts=False
    )
    with pytest.MonkeyPatch.context() as patch:  # no replay: the hooks
        patch.setattr(Seam, "replay_matches", lambda self, path: False)
        via_hooks = hooks.attribute(ids, [0, 1, 1], (mask,), config="deletion", steps=3)
    assert hooks.last_run[0]["path"] == "hooks"
    assert runs["cut"][1:] == ("embeddings", True)
    assert runs["plain"][1:] == ("embeddings", False)
    torch.testing.assert_close(runs["plain"][0], via_hooks, rtol=0, atol=0)
    torch.testing.assert_close(runs["cut"][0], via_hooks, rtol=1e-5, atol=1e-5)
    assert no_hooks(model) and type(model.base_model.embeddings).__name__.endswith(
        "Embeddings"
    )


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_deletion_at_a_decoders_embeddings_replays_them_through_the_wrapper(kind):
    """On a causal LM wrapped by CausalLMLogLikelihood, config="deletion" at
    embed_tokens / wte takes the embeddings replay too (the model found as
    the wrapper's .model); the scores equal those of the hooks, and the
    model's embeddings are put back."""
    from captum_iba.attr.llm import CausalLMLogLikelihood, explain_answers
    from captum_iba.attr.llm_batch import prompt_batch
    from tests.helpers import no_hooks, tiny_causal_lm, tiny_word_tokenizer

    model, tok = tiny_causal_lm(kind), tiny_word_tokenizer()
    embeddings = model.get_input_embeddings()
    batch = prompt_batch(tok, ["the cat sat on the mat", "a dog"], [" ran", " is big"])
    found = {}
    for name in ("replay", "hooks"):
        iba = InformationBottleneckAttribution(CausalLMLogLikelihood(model), embeddings)
        with pytest.MonkeyPatch.context() as patch:
            if name == "hooks":
                patch.setattr(Seam, "replay_matches", lambda self, path: False)
            out = explain_answers(
                iba, batch, per_token=True, config="deletion", steps=3
            )
        found[name] = (out, iba.last_run[0]["path"])
    assert found["replay"][1] == "embeddings" and found["hooks"][1] == "hooks"
    torch.testing.assert_close(found["replay"][0].answer, found["hooks"][0].answer)
    torch.testing.assert_close(found["replay"][0].tokens, found["hooks"][0].tokens)
    assert no_hooks(model) and model.get_input_embeddings() is embeddings


class MeanPooledBert(nn.Module):
    """A BERT whose head averages every row of the last layer."""

    def __init__(self):
        super().__init__()
        self.inner = tiny_hf_model("bert")
        self.head = nn.Linear(16, 2)

    def forward(self, ids, mask):
        h = self.inner.bert(ids, mask).last_hidden_state
        return self.head(h.mean(1))


def test_cls_cut_refused_when_the_head_reads_other_rows():
    model = MeanPooledBert().eval()
    cut, path = _attr(model, model.inner.bert.encoder.layer[0])
    full, _ = _attr(model, model.inner.bert.encoder.layer[0], cuts=False)
    assert path == "stack"  # the NaN rows showed in the check: no cut
    torch.testing.assert_close(cut, full)


def test_model_left_as_found(monkeypatch):
    monkeypatch.setenv(BF16_ENV_VAR, "on")  # bf16 itself, on any CPU
    model = tiny_hf_model("bert")
    model.classifier.weight.requires_grad_(False)
    flags = [p.requires_grad for p in model.parameters()]
    modules = list(model.modules())
    attn = model.config._attn_implementation
    _attr(model, model.bert.encoder.layer[0], precision="bf16")
    with pytest.raises(ValueError):
        InformationBottleneckAttribution(model, model.bert.encoder.layer[0]).attribute(
            _batch()[0], target=5, additional_forward_args=(_batch()[1],)
        )
    assert [p.requires_grad for p in model.parameters()] == flags
    assert list(model.modules()) == modules
    assert model.config._attn_implementation == attn
    assert all(p.grad is None for p in model.parameters())


def test_bf16_is_float32_out_and_close(monkeypatch):
    monkeypatch.setenv(BF16_ENV_VAR, "on")  # bf16 itself, on any CPU
    model = tiny_hf_model("bert")
    half, _ = _attr(model, model.bert.encoder.layer[0], precision="bf16")
    full, _ = _attr(model, model.bert.encoder.layer[0])
    assert half.dtype == torch.float32 and torch.isfinite(half).all()
    assert not torch.equal(half, full)
    torch.testing.assert_close(half, full, rtol=0.05, atol=0.05 * full.abs().max())
    with pytest.raises(ValueError, match="precision"):
        InformationBottleneckAttribution(model, model.bert.pooler, precision="fp16")


def test_default_chunks_bounded_by_tokens():
    def ids(length, device="cpu"):
        return torch.empty(1, length, device=device)

    assert instances_per_chunk(32, 10, ids(77)) == 10  # 10 x 10 x 77 <= 8192
    assert instances_per_chunk(32, 10, ids(512)) == 1
    assert instances_per_chunk(4, 10, ids(16)) == 4
    assert instances_per_chunk(256, 10, ids(512, "meta")) == 51  # other devices


def _deletion(model, ids, mask, **kw):
    iba = InformationBottleneckAttribution(
        model, model.base_model.embeddings, special_token_ids=[]
    )
    return iba.attribute(ids, target=[0, 1, 1], additional_forward_args=(mask,),
                         config="deletion", steps=4, **kw)  # fmt: skip


def _rows_per_pass(model):
    """Records the rows of every forward pass that builds a graph."""
    seen = []

    def hook(module, args, kwargs):
        if torch.is_grad_enabled():
            seen.append(int((args[0] if args else kwargs["hidden_states"]).shape[0]))

    layer = model.base_model.encoder.layer[0]
    return seen, layer.register_forward_pre_hook(hook, with_kwargs=True)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_deletion_terms_share_one_pass_per_step(kind, monkeypatch):
    """config="deletion": the kept and the inverted mask's rows run side by
    side, one pass per step (the first, from alpha = 0 where the two masks
    are equal, and the last, without the complement term, on one set of
    rows); the same scores as a pass per term (up to rounding), with the
    same ranking."""
    from captum_iba.attr import _loop

    model = tiny_hf_model(kind)
    ids, mask = _batch()
    seen, handle = _rows_per_pass(model)
    paired = _deletion(model, ids, mask)
    assert seen == [3, 6, 6, 3]
    seen.clear()
    optimise = _loop.optimise
    monkeypatch.setattr(
        _loop, "optimise", lambda *a, **k: optimise(*a, **dict(k, pair_terms=False))
    )
    apart = _deletion(model, ids, mask)
    handle.remove()
    assert seen == [3] * 7  # without the cut, the first step's inverted rows too
    torch.testing.assert_close(paired, apart, rtol=1e-5, atol=1e-5)
    real = mask.bool()
    for i in range(3):
        assert torch.equal(paired[i][real[i]].argsort(), apart[i][real[i]].argsort()), (
            f"instance {i}"
        )
    assert not model.base_model.encoder.layer[0]._forward_pre_hooks


def test_deletion_terms_apart_when_two_would_not_fit_a_pass(monkeypatch):
    """With internal_batch_size below twice the rows, each term keeps its own
    pass (memory bounded by internal_batch_size), but for the first step's,
    from alpha = 0, where one set of rows serves both: the same scores as
    the inverted rows' own pass (up to rounding)."""
    from captum_iba.attr import _loop

    model = tiny_hf_model("bert")
    ids, mask = _batch()
    seen, handle = _rows_per_pass(model)
    shared = _deletion(model, ids, mask, internal_batch_size=3)
    assert seen == [3] * 6
    seen.clear()
    monkeypatch.setattr(_loop, "symmetric_start", lambda alpha, options: False)
    inverted = _deletion(model, ids, mask, internal_batch_size=3)
    handle.remove()
    assert seen == [3] * 7
    torch.testing.assert_close(shared, inverted, rtol=1e-5, atol=1e-5)


def test_deletion_last_steps_without_the_complement_run_one_set_of_rows():
    """complement_skip=k: the last k steps run the kept mask's rows alone
    (one set of rows instead of two); skipping every step is the run
    without the complement term."""
    model = tiny_hf_model("bert")
    ids, mask = _batch()
    seen, handle = _rows_per_pass(model)
    _deletion(model, ids, mask, complement_skip=2)
    assert seen == [3, 6, 3, 3]
    seen.clear()
    every = _deletion(model, ids, mask, complement_skip=4)
    handle.remove()
    assert seen == [3] * 4
    none = _deletion(model, ids, mask, complement=0.0)
    torch.testing.assert_close(every, none, rtol=0, atol=0)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_complement_skip_must_be_a_count(bad):
    from captum_iba.attr.options import IBAOptions

    with pytest.raises(ValueError, match="complement_skip"):
        IBAOptions(complement_skip=bad)


def _lean_calls(monkeypatch):
    """Counts the attention calls that take the explicit math."""
    from captum_iba.attr import _attention

    taken = []
    applies = _attention._lean_applies

    def counted(*args):
        taken.append(applies(*args))
        return taken[-1]

    monkeypatch.setattr(_attention, "_lean_applies", counted)
    return taken


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_lean_bias_attention_is_the_sdpa_computation(kind, monkeypatch):
    """Inside lean_bias_attention, a layer whose mask needs a gradient runs
    the explicit math: the same output and mask gradient as SDPA; a mask
    without a gradient keeps SDPA; the function table is restored after."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from captum_iba.attr._attention import lean_bias_attention

    model = tiny_hf_model(kind)
    assert model.config._attn_implementation == "sdpa"
    layer = model.base_model.encoder.layer[0]
    h = torch.randn(2, 7, 16)
    bias = torch.randn(2, 1, 1, 7)
    bias[1, ..., 5:] = torch.finfo(torch.float32).min

    def run():
        mask = bias.clone().requires_grad_(True)
        out = layer(h, mask)
        out = out[0] if isinstance(out, tuple) else out
        (grad,) = torch.autograd.grad(out.square().sum(), mask)
        return out.detach(), grad

    original = ALL_ATTENTION_FUNCTIONS["sdpa"]
    want, want_grad = run()
    taken = _lean_calls(monkeypatch)
    with lean_bias_attention([layer]):
        got, got_grad = run()
        with torch.no_grad():
            layer(h, bias)
    assert taken == [True, False]
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is original
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-5)


def test_deletion_runs_the_bias_in_lean_attention(monkeypatch):
    """config="deletion" runs every biased layer's attention in the explicit
    math (each step), with the scores of SDPA's math kernel."""
    from contextlib import nullcontext

    from captum_iba.attr import _seam

    model = tiny_hf_model("bert")
    ids, mask = _batch()
    taken = _lean_calls(monkeypatch)
    lean = _deletion(model, ids, mask)
    assert sum(taken) == 4 * len(model.base_model.encoder.layer)
    monkeypatch.setattr(_seam, "lean_bias_attention", lambda layers: nullcontext())
    sdpa = _deletion(model, ids, mask)
    torch.testing.assert_close(lean, sdpa, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_the_path_is_checked_on_the_first_call_only(kind):
    """The replay check (one forward pass) runs on an attribution's first
    call; later calls, on other inputs, take the path it chose and give what
    a fresh attribution (which checks) gives. Another layer is checked anew."""
    model = tiny_hf_model("bert") if kind == "bert" else None
    if model is None:
        from captum_iba.attr.llm import CausalLMLogLikelihood
        from tests.helpers import tiny_causal_lm

        inner = tiny_causal_lm("llama")
        model, layers = CausalLMLogLikelihood(inner), inner.model.layers
    else:
        layers = model.base_model.encoder.layer
    ids, mask = _batch(vocab=60 if kind == "bert" else 20)
    args = (mask,) if kind == "bert" else (mask, torch.where(mask.bool(), ids, -100))
    target = [0, 1, 1] if kind == "bert" else None
    checks = []
    real = Seam.replay_matches

    def counted(self, path):
        checks.append(path)
        return real(self, path)

    iba = InformationBottleneckAttribution(model, layers[0])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Seam, "replay_matches", counted)
        iba.attribute(ids, target=target, additional_forward_args=args, steps=2, seed=0)
        first = len(checks)
        again = iba.attribute(
            ids[:2], target=target and target[:2],
            additional_forward_args=tuple(a[:2] for a in args), steps=2, seed=0,
        )  # fmt: skip
        assert first >= 1 and len(checks) == first
        other = InformationBottleneckAttribution(model, layers[1])
        other.attribute(
            ids, target=target, additional_forward_args=args, steps=2, seed=0
        )
        assert len(checks) > first
    fresh = InformationBottleneckAttribution(model, layers[0]).attribute(
        ids[:2], target=target and target[:2],
        additional_forward_args=tuple(a[:2] for a in args), steps=2, seed=0,
    )  # fmt: skip
    torch.testing.assert_close(again, fresh)
    assert iba.last_run[0]["path"] == "stack"
