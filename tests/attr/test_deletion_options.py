"""The options of the second round (issue #19): deletion relaxed through
attention (``removal="attention"``, Eqs. R1-R2), the complement term
(``complement``, Eq. R3) and the ``"deletion"`` configuration, with closed-form
checks."""

import math
from types import SimpleNamespace
from typing import List, Optional, Tuple
from unittest.mock import patch

import pytest
import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from torch import Tensor, nn

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr import _loop
from captum_iba.attr import bottleneck as ib
from captum_iba.attr._attention import (
    attention_removal,
    fused_attention_modules,
    with_keep_bias,
)
from captum_iba.attr.objectives import resolve_objective
from captum_iba.attr.options import CONFIGS, IBAOptions
from captum_iba.attr.text import encoder_layers, resolve_layer
from tests.helpers import (
    MeanPoolModel,
    causal_lm_layers,
    no_hooks,
    tiny_causal_lm,
    tiny_hf_model,
)

FAST = dict(steps=2, seed=0)


def _ids() -> Tuple[Tensor, Tensor]:
    ids = torch.tensor([[2, 7, 9, 11, 3], [2, 8, 10, 3, 0]])
    return ids, (ids != 0).long()


class TestEquations(BaseTest):
    def test_token_lambda_is_the_mean_over_features(self) -> None:
        alpha = torch.randn(2, 3, 4)
        want = torch.sigmoid(alpha).mean(-1)
        assertTensorAlmostEqual(self, ib.token_lambda(alpha), want, delta=1e-7)

    def test_keep_bias_scales_attention_weights_by_lambda(self) -> None:
        # softmax(s + ln keep) = keep * exp(s) / sum(keep * exp(s))  (Eq. R2)
        scores = torch.randn(2, 1, 3, 4)
        keep = torch.tensor([[1.0, 0.5, 0.25, 0.0], [0.3, 1.0, 1.0, 0.7]])
        got = torch.softmax(scores + ib.attention_keep_bias(keep), dim=-1)
        raw = keep[:, None, None, :] * scores.exp()
        assertTensorAlmostEqual(self, got, raw / raw.sum(-1, keepdim=True), 1e-6)
        self.assertTrue(torch.isfinite(ib.attention_keep_bias(keep)).all())

    def test_complement_term_is_the_weighted_probability(self) -> None:
        logits = torch.randn(5, 3)
        target = torch.tensor([0, 1, 2, 1, 0])
        ce = torch.nn.functional.cross_entropy(logits, target, reduction="none")
        prob = logits.softmax(-1)[torch.arange(5), target]
        assertTensorAlmostEqual(self, ib.complement_term(ce, 2.0), 2 * prob, 1e-6)


class TestAttentionRemoval(BaseTest):
    def test_keep_zero_is_deletion_in_every_layer(self) -> None:
        # keep = 0 at a token in every layer = attention mask 0 there, i.e. the
        # token deleted (position ids kept); keep = 1 changes nothing.
        for kind in ("bert", "roberta", "distilbert"):
            model = tiny_hf_model(kind)
            ids, mask = _ids()
            ids = ids + 2 if kind == "roberta" else ids  # RoBERTa pads with 1
            layers = nn.ModuleList(encoder_layers(model))
            every = list(range(len(layers)))
            ones = torch.ones(ids.shape)
            keep = ones.clone()
            keep[0, 2] = 0.0
            deleted = mask.clone()
            deleted[0, 2] = 0
            with torch.no_grad():
                clean = model(ids, attention_mask=mask).logits
                with attention_removal(layers, every, lambda o=ones: o):
                    same = model(ids, attention_mask=mask).logits
                with attention_removal(layers, every, lambda k=keep: k):
                    removed = model(ids, attention_mask=mask).logits
                with attention_removal(layers, every, lambda: None):
                    untouched = model(ids, attention_mask=mask).logits
                want = model(ids, attention_mask=deleted).logits
            assertTensorAlmostEqual(self, same, clean, delta=1e-5)
            assertTensorAlmostEqual(self, untouched, clean, delta=0.0)
            assertTensorAlmostEqual(self, removed, want, delta=1e-5)
            self.assertTrue(no_hooks(model), kind)

    def test_decoders_stay_causal(self) -> None:
        """A decoder's layers get no mask (the kernel's causal flag) or a 4-D
        causal one with left padding; the bias keeps causality: keep = 1
        reproduces the logits exactly, removing token 4 moves no position
        before it, and left padding stays masked (the padded row equals the
        unpadded one)."""
        for kind in ("gpt2", "llama"):
            model = tiny_causal_lm(kind)
            layers = causal_lm_layers(model)
            every = list(range(len(layers)))
            ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
            ones = torch.ones(1, 6)
            keep = ones.clone()
            keep[0, 4] = 0.0
            left = torch.cat([torch.zeros(1, 2, dtype=torch.long), ids], 1)
            mask = (left != 0).long()
            positions = (mask.cumsum(-1) - 1).clamp_min(0)
            padded_keep = torch.cat([torch.ones(1, 2), keep], 1)
            with torch.no_grad():
                clean = model(ids).logits
                with attention_removal(layers, every, lambda o=ones: o):
                    same = model(ids).logits
                with attention_removal(layers, every, lambda k=keep: k):
                    removed = model(ids).logits
                with attention_removal(layers, every, lambda k=padded_keep: k):
                    padded = model(
                        left, attention_mask=mask, position_ids=positions
                    ).logits[:, 2:]
            assertTensorAlmostEqual(self, same, clean, delta=1e-5)
            assertTensorAlmostEqual(self, removed[:, :4], clean[:, :4], delta=1e-5)
            self.assertGreater(float((removed[:, 4:] - clean[:, 4:]).abs().max()), 1e-4)
            assertTensorAlmostEqual(self, padded, removed, delta=1e-5)
            self.assertTrue(no_hooks(model), kind)

    def test_fused_route_equals_the_mask_route(self) -> None:
        """Under SDPA a decoder's layers get Eq. (R2) inside the fused
        attention (no L x L mask); with eager attention, as a mask. Same
        logits and the same gradient in keep, with left padding; and with
        key heads shared by query heads (Llama's grouped attention)."""
        ids = torch.tensor([[3, 4, 5, 6, 7, 8], [0, 0, 5, 6, 7, 8]])
        mask = (ids != 0).long()
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        keep = torch.rand(2, 6)
        for kind, kv_heads in (("gpt2", 2), ("llama", 2), ("llama", 1)):
            found = []
            for implementation in ("sdpa", "eager"):
                model = tiny_causal_lm(kind, kv_heads=kv_heads)
                model.set_attn_implementation(implementation)
                layers = causal_lm_layers(model)
                fused = fused_attention_modules(layers[0])
                self.assertEqual(len(fused), int(implementation == "sdpa"))
                weights = keep.clone().requires_grad_(True)
                with attention_removal(layers, [0, 1, 2], lambda w=weights: w):
                    out = model(ids, attention_mask=mask, position_ids=positions)
                real = out.logits[mask.bool()]
                (grad,) = torch.autograd.grad(real.sum(), weights)
                found.append((real, grad))
                self.assertTrue(no_hooks(model))
            assertTensorAlmostEqual(self, found[0][0], found[1][0], 1e-5, "max")
            assertTensorAlmostEqual(self, found[0][1], found[1][1], 1e-5, "max")
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        self.assertNotIn("sdpa", ALL_ATTENTION_FUNCTIONS._local_mapping)

    def test_mask_forms(self) -> None:
        keep = torch.tensor([[1.0, 0.5]])
        bias = ib.attention_keep_bias(keep)
        assertTensorAlmostEqual(self, with_keep_bias(None, keep), bias)
        additive = torch.randn(1, 1, 2, 2)
        assertTensorAlmostEqual(self, with_keep_bias(additive, keep), additive + bias)
        boolean = torch.tensor([[[[True, False], [True, True]]]])
        got = with_keep_bias(boolean, keep)
        self.assertAlmostEqual(float(got[0, 0, 0, 0]), 0.0)
        self.assertAlmostEqual(float(got[0, 0, 0, 1]), torch.finfo().min)
        with self.assertRaisesRegex(ValueError, "4-D attention masks"):
            with_keep_bias(torch.ones(1, 2), keep)
        causal = with_keep_bias(None, keep, causal_length=2)
        self.assertEqual(tuple(causal.shape), (1, 1, 2, 2))
        self.assertAlmostEqual(float(causal[0, 0, 0, 1]), torch.finfo().min)
        assertTensorAlmostEqual(self, causal[0, 0, 1], bias[0, 0, 0])

    def test_layers_without_a_mask_parameter_are_named(self) -> None:
        stack = nn.ModuleList([nn.Linear(2, 2)])
        with self.assertRaisesRegex(ValueError, "Linear.forward takes none of"):
            with attention_removal(stack, [0], lambda: None):
                pass
        self.assertTrue(no_hooks(stack))


class _StubSeam:
    """Logits ``[0, sum_t w_t keep_t]`` of the keep weights of each pass
    (``flat_first``: the first pass of a step returns constant logits)."""

    def __init__(self, w: Tensor, flat_first: bool = False) -> None:
        self.w, self.flat_first = w, flat_first
        self.keeps: List[Tensor] = []

    def run(self, t: Tensor, keep: Optional[Tensor] = None) -> Tensor:
        self.keeps.append(keep.detach().clone())
        z = (keep * self.w).sum(-1)
        if self.flat_first and len(self.keeps) % 2 == 1:
            z = z.detach() * 0
        return torch.stack([torch.zeros_like(z), z], dim=-1)


def _attention_run(
    w: Tensor, complement: float, flat_first: bool = False, lr: float = 2.0
) -> Tuple[Tensor, _StubSeam]:
    x = torch.randn(1, w.shape[-1], 3)
    mask = torch.ones(1, w.shape[-1], dtype=torch.bool)
    removable = mask.clone()
    removable[0, 0] = False  # a special token: never removed
    layer = _loop.Layer(x, x, torch.ones(1), mask, removable)
    task = _loop.Task(resolve_objective("cross_entropy"), torch.tensor([1]))
    options = CONFIGS.load("deletion").replace(
        complement=complement, complement_skip=0, steps=1, lr=lr
    )
    stub = _StubSeam(w, flat_first)
    attr, _ = _loop.optimise(layer, stub, task, options, 0)
    return attr, stub


class TestLoop(BaseTest):
    def test_one_step_moves_alpha_along_the_weights(self) -> None:
        # CE of sigmoid(sum w keep): d/d keep_t = -(1 - p) w_t, the same factor
        # for every token, so one normalised step gives alpha = lr w / max|w|
        # at the removable tokens (max over them: |-2|; the special token,
        # w = 5, stays at alpha = 0).
        w = torch.tensor([5.0, 1.0, -2.0, 0.5])
        attr, stub = _attention_run(w, complement=0.0)
        want = torch.sigmoid(2.0 * w / 2.0)
        want[0] = 0.5
        assertTensorAlmostEqual(self, attr[0, :, 0], want, delta=1e-5)
        self.assertEqual(len(stub.keeps), 1)

    def test_complement_pass_inverts_the_mask(self) -> None:
        # First pass flat: only the complement term can move alpha. It lowers
        # the target's probability with keep_c = 1 - lambda: d/d lambda_t of
        # sigmoid(sum w (1 - lambda)) is -p_c (1 - p_c) w_t, so the tokens that
        # support the target are kept (alpha = lr w / max|w|, as the task term
        # alone gives); without the complement nothing moves.
        # The stub's passes differ (the first flat), so the first step's
        # shortcut (one set of rows for both terms at alpha = 0, exact for a
        # model) is turned off: the inverted rows run as at later steps.
        w = torch.tensor([5.0, 1.0, -2.0, 0.5])
        still, _ = _attention_run(w, complement=0.0, flat_first=True)
        assertTensorAlmostEqual(self, still[0, :, 0], torch.full((4,), 0.5))
        with patch.object(_loop, "symmetric_start", lambda alpha, options: False):
            attr, stub = _attention_run(w, complement=1.5, flat_first=True)
        want = torch.sigmoid(2.0 * w / 2.0)  # max |w| over removable tokens: 2
        want[0] = 0.5
        assertTensorAlmostEqual(self, attr[0, :, 0], want, delta=1e-5)
        first, second = stub.keeps
        assertTensorAlmostEqual(self, first[0, 1:] + second[0, 1:], torch.ones(3))
        self.assertEqual(float(first[0, 0]), 1.0)
        self.assertEqual(float(second[0, 0]), 1.0)

    def test_noise_complement_uses_the_inverted_bottleneck(self) -> None:
        # sigma -> 0: T = lam X + (1 - lam) mu and T_c = (1 - lam) X + lam mu,
        # so T + T_c = X + mu at every element.
        x, mu = torch.randn(1, 3, 2), torch.randn(1, 3, 2)
        mask = torch.ones(1, 3, dtype=torch.bool)
        layer = _loop.Layer(x, mu, torch.full((1,), 1e-12), mask)
        seen: List[Tensor] = []

        def run(t: Tensor, keep: Optional[Tensor] = None) -> Tensor:
            self.assertIsNone(keep)
            seen.append(t.detach().clone())
            return torch.stack([t.sum((1, 2)), -t.sum((1, 2))], -1)

        task = _loop.Task(resolve_objective("cross_entropy"), torch.tensor([0]))
        options = IBAOptions(
            complement=1.0, steps=1, n_samples=1, init_alpha=0.7, readout="mask_mean"
        )
        _loop.optimise(layer, SimpleNamespace(run=run), task, options, 0)
        assertTensorAlmostEqual(self, seen[0] + seen[1], x + mu, delta=1e-5)
        lam = 1 / (1 + math.exp(-0.7))
        assertTensorAlmostEqual(self, seen[0], lam * x + (1 - lam) * mu, 1e-5)


class TestOptions(BaseTest):
    def test_bad_values_are_named(self) -> None:
        with self.assertRaisesRegex(ValueError, "removal must be one of"):
            IBAOptions(removal="delete")
        for bad in (-1.0, float("nan"), float("inf"), True, "1"):
            with self.assertRaisesRegex(ValueError, "complement must be a float"):
                IBAOptions(complement=bad)
        with self.assertRaisesRegex(ValueError, "no capacity to read"):
            IBAOptions(removal="attention")

    def test_old_configurations_are_unchanged(self) -> None:
        for name in ("paper", "faithful"):
            options = CONFIGS.load(name)
            self.assertEqual(options.removal, "noise")
            self.assertEqual(options.complement, 0.0)
        deletion = CONFIGS.load("deletion")
        self.assertEqual((deletion.removal, deletion.n_samples), ("attention", 1))
        self.assertEqual(deletion.complement, 1.0)


class TestAttribute(BaseTest):
    def test_deletion_config_after_the_embeddings_and_a_layer(self) -> None:
        model = tiny_hf_model("bert")
        ids, mask = _ids()
        kw = dict(target=1, additional_forward_args=(mask,), config="deletion")
        for layer in (model.bert.embeddings, model.bert.encoder.layer[0]):
            iba = InformationBottleneckAttribution(
                model, layer, special_token_ids=[2, 3]
            )
            attr = iba.attribute(ids, **kw, **FAST)
            self.assertEqual(tuple(attr.shape), (2, 5, 16))
            tokens = attr.sum(-1) / 16
            # [CLS] (2) and [SEP] (3) are never removed: alpha stays at 0
            special = (ids == 2) | (ids == 3)
            assertTensorAlmostEqual(
                self, tokens[special], torch.full((4,), 0.5), delta=1e-6
            )
            self.assertEqual(float(tokens[1, 4]), 0.0)  # padding
            self.assertTrue(no_hooks(model))
        self.assertEqual(iba.last_run[0]["path"], "stack")

    def test_unknown_special_tokens_are_named_not_silently_removed(self) -> None:
        model = tiny_hf_model("bert")  # BERT's config names no special ids
        ids, mask = _ids()
        kw = dict(target=1, additional_forward_args=(mask,), config="deletion")
        iba = InformationBottleneckAttribution(model, model.bert.embeddings)
        with self.assertWarnsRegex(UserWarning, "special_token_ids=tokenizer"):
            attr = iba.attribute(ids, **kw, **FAST)
        tokens = attr.sum(-1) / 16
        special = (ids == 2) | (ids == 3)
        # without the ids, [CLS] and [SEP] are optimised like any token
        self.assertTrue(bool((tokens[special] != 0.5).any()))

    def test_where_attention_removal_cannot_go(self) -> None:
        model = tiny_hf_model("bert")
        ids, mask = _ids()
        kw = dict(target=1, additional_forward_args=(mask,), config="deletion")
        pooler = InformationBottleneckAttribution(model, model.bert.pooler.dense)
        with self.assertRaisesRegex(ValueError, "needs the layers above"):
            pooler.attribute(ids, **kw, **FAST)
        on_input = InformationBottleneckAttribution(model, model.bert.encoder.layer[1])
        with self.assertRaisesRegex(ValueError, "attribute_to_layer_input"):
            on_input.attribute(ids, attribute_to_layer_input=True, **kw, **FAST)
        self.assertTrue(no_hooks(model))
        plain = MeanPoolModel().eval()
        iba = InformationBottleneckAttribution(plain, plain.layers[0])
        with self.assertRaisesRegex(ValueError, "Linear.forward takes none of"):
            iba.attribute(ids, target=0, config="deletion", **FAST)
        self.assertTrue(no_hooks(plain))

    def test_embeddings_resolve_by_name(self) -> None:
        model = tiny_hf_model("bert")
        ref = resolve_layer(model, "embeddings")
        self.assertIs(ref.module, model.bert.embeddings)
        self.assertIsNone(ref.index)
        with pytest.raises(ValueError, match="neither base_model.embeddings"):
            resolve_layer(SimpleNamespace(), "embeddings")  # type: ignore[arg-type]


def test_noise_options_are_refused_with_the_attention_removal():
    """beta and prior do nothing without noise: setting them is an error, not
    a silent no-op."""
    with pytest.raises(ValueError, match=r"\['beta'\] have no effect"):
        IBAOptions.from_config("deletion", beta=1e-3)
    with pytest.raises(ValueError, match=r"\['prior'\] have no effect"):
        IBAOptions.from_config("deletion", prior="paper")
    assert IBAOptions.from_config("deletion", steps=5).steps == 5
    assert IBAOptions.from_config("faithful", beta=1e-3).beta == 1e-3
