"""Captum's generic layer-method checks, written for IBA (issue #10, point 5):
batch vs single instance for every ``TargetType`` form, hooks removed when the
forward raises, DataParallel, NoiseTunnel over IBA, on Captum's basic models
and on tiny Hugging Face models."""

import unittest

import torch
from captum.attr import NoiseTunnel
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from captum.testing.helpers.basic_models import (
    BasicModel_ConvNet_One_Conv,
    BasicModel_MultiLayer,
)

from captum_iba import InformationBottleneckAttribution, encoder_layers
from tests.helpers import no_hooks, tiny_hf_model

FAST = dict(steps=2, n_samples=2, seed=0)

#: How far a batch may be from its instances run alone. The scores are below
#: 10 nats in float32 (eps 1.2e-7: ~1e-6 at 10) and a batch and a single
#: instance sum in other orders (other kernels for other shapes, per CPU
#: kind). Adam's second step divides the mean of two gradients by their root
#: mean square, which multiplies their rounding where they nearly cancel: an
#: input (or weight) moved by one ulp moved the scores by up to 3.6e-5 here
#: (100 draws of every case; 4.4e-5 on the tiny BERT). A wrong row or target
#: moves them by 0.1 or more.
TOLERANCE = 1e-4


def _state(model: torch.nn.Module):
    return (
        [(n, m.training) for n, m in model.named_modules()],
        {k: v.clone() for k, v in model.state_dict().items()},
        [(p.requires_grad, p.grad) for p in model.parameters()],
    )


def _same_state(test: BaseTest, model: torch.nn.Module, before) -> None:
    after = _state(model)
    test.assertEqual(after[0], before[0])
    test.assertEqual(after[1].keys(), before[1].keys())
    for k in before[1]:
        test.assertTrue(torch.equal(after[1][k], before[1][k]), k)
    test.assertEqual(after[2], before[2])
    test.assertTrue(no_hooks(model))


def _multidim(model):
    return lambda x: model(x, None, True)  # (B, 2, 2, 2) output


def _multilayer():
    """Captum's ``BasicModel_MultiLayer`` with a head whose two logits differ
    by more than a constant.

    Its own head (all ones, biases -1 and 1) gives the logits ``(s - 1, s +
    1)``: the cross-entropy is constant, so its gradient is float32 rounding
    (1.8e-7 here) which Adam's per-element normalisation turns into steps of
    the learning rate; an input moved by one ulp then moved the scores by up
    to 1.2e-4, and the batch and the single instance (another matrix shape,
    so another order of the sums on AVX-512 kernels) differed by more than
    1e-5 (issue 53, item 9). With this head, by at most 3.6e-5 (:data:`TOLERANCE`)."""
    model = BasicModel_MultiLayer().eval()
    with torch.no_grad():
        model.linear2.weight[1] = torch.tensor([1.0, -1.0, 2.0, 0.5])
    return model


def _inputs(seed: int) -> torch.Tensor:
    """Three inputs of three features, from their own generator (not from the
    global state, which depends on what ran before)."""
    return torch.randn(3, 3, generator=torch.Generator().manual_seed(seed))


class TestBatchVersusSingle(BaseTest):
    """Every target form gives, per instance, what that instance gives alone."""

    CASES = [
        # (forward, layer, inputs, target)
        ("int", lambda m: m, "linear1", _inputs(0), 1),
        ("tensor scalar", lambda m: m, "linear1", _inputs(1), torch.tensor(0)),
        ("tensor per row", lambda m: m, "relu", _inputs(2), torch.tensor([0, 1, 1])),
        ("list per row", lambda m: m, "linear0", _inputs(3), [1, 0, 1]),
        ("None", lambda m: m, "linear1", _inputs(4), None),
        ("tuple", _multidim, "linear1", _inputs(5), (1, 0, 1)),
        (
            "list of tuples",
            _multidim,
            "linear1",
            _inputs(6),
            [(1, 0, 1), (0, 1, 0), (1, 1, 1)],
        ),
    ]

    def test_basic_multilayer_every_target_form(self) -> None:
        model = _multilayer()
        for name, fwd, layer_name, x, target in self.CASES:
            with self.subTest(name):
                iba = InformationBottleneckAttribution(
                    fwd(model), getattr(model, layer_name)
                )
                batch = iba.attribute(x, target=target, **FAST)
                for i in range(x.shape[0]):
                    t = target
                    if isinstance(target, list) or (
                        isinstance(target, torch.Tensor) and target.dim() == 1
                    ):
                        t = target[i]
                    alone = iba.attribute(x[i : i + 1], target=t, **FAST)
                    assertTensorAlmostEqual(
                        self, batch[i : i + 1], alone, TOLERANCE, "max"
                    )
        self.assertTrue(no_hooks(model))

    def test_conv_model(self) -> None:
        model = BasicModel_ConvNet_One_Conv().eval()
        x = 20 * torch.randn(3, 1, 4, 4)
        iba = InformationBottleneckAttribution(model, model.conv1)
        batch = iba.attribute(x, target=[1, 2, 3], **FAST)
        for i, t in enumerate([1, 2, 3]):
            alone = iba.attribute(x[i : i + 1], target=t, **FAST)
            assertTensorAlmostEqual(self, batch[i : i + 1], alone, TOLERANCE, "max")

    def test_tiny_hf_models(self) -> None:
        for kind in ("bert", "roberta", "distilbert"):
            with self.subTest(kind):
                model = tiny_hf_model(kind, num_labels=3)
                ids = torch.randint(5, 60, (3, 6))
                mask = torch.ones_like(ids)
                layer = encoder_layers(model)[1]
                iba = InformationBottleneckAttribution(model, layer)
                for target in (2, [0, 1, 2], None):
                    batch = iba.attribute(
                        ids, target=target, additional_forward_args=(mask,), **FAST
                    )
                    for i in range(3):
                        t = target[i] if isinstance(target, list) else target
                        alone = iba.attribute(
                            ids[i : i + 1],
                            target=t,
                            additional_forward_args=(mask[i : i + 1],),
                            **FAST,
                        )
                        assertTensorAlmostEqual(
                            self, batch[i : i + 1], alone, 3 * TOLERANCE, "max"
                        )


class RaisesAfterLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = BasicModel_MultiLayer()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = self.inner(x)
        if self.calls > 2:  # the clean pass and the replay check succeed
            raise RuntimeError("forward failed mid-optimisation")
        return out


class TestModelLeftAsFound(BaseTest):
    def test_hooks_removed_and_state_kept_when_forward_raises(self) -> None:
        for on_input in (False, True):
            for stack in (True, False):
                model = RaisesAfterLayer()
                model.train()
                before = _state(model)
                iba = InformationBottleneckAttribution(
                    model, model.inner.linear1, layer_stack=stack
                )
                with self.assertRaisesRegex(RuntimeError, "mid-optimisation"):
                    iba.attribute(
                        torch.randn(2, 3),
                        target=0,
                        attribute_to_layer_input=on_input,
                        **FAST,
                    )
                _same_state(self, model, before)

    def test_hooks_removed_on_invalid_target(self) -> None:
        model = BasicModel_MultiLayer()
        before = _state(model)
        for layer in (model.linear1, model.relu):
            iba = InformationBottleneckAttribution(model, layer)
            with self.assertRaisesRegex(ValueError, "out of range"):
                iba.attribute(torch.randn(2, 3), target=5)
            with self.assertRaisesRegex(ValueError, "objective"):
                iba.attribute(torch.randn(2, 3), target=0, objective="nope")
        _same_state(self, model, before)

    def test_state_kept_after_success_on_tuple_and_input_sites(self) -> None:
        model = BasicModel_MultiLayer(multi_input_module=True)
        model.train()
        before = _state(model)
        InformationBottleneckAttribution(model, model.multi_relu).attribute(
            torch.randn(2, 3), target=0, **FAST
        )
        InformationBottleneckAttribution(model, model.linear1).attribute(
            torch.randn(2, 3), target=0, attribute_to_layer_input=True, **FAST
        )
        _same_state(self, model, before)


class TestCaptumWrappers(BaseTest):
    def test_noise_tunnel_over_iba(self) -> None:
        model = BasicModel_MultiLayer().eval()
        x = torch.randn(3, 3)
        iba = InformationBottleneckAttribution(model, model.linear1)
        nt = NoiseTunnel(iba)
        attr = nt.attribute(
            x, nt_type="smoothgrad", nt_samples=3, stdevs=0.1, target=1, **FAST
        )
        self.assertEqual(tuple(attr.shape), (3, 4))
        self.assertTrue(torch.isfinite(attr).all() and (attr >= 0).all())
        # stdevs=0: the average of identical runs is one run
        plain = iba.attribute(x, target=1, **FAST)
        same = nt.attribute(
            x, nt_type="smoothgrad", nt_samples=2, stdevs=0.0, target=1, **FAST
        )
        # 6 rows against 3: other shapes, as a batch against one instance
        assertTensorAlmostEqual(self, same, plain, TOLERANCE, "max")
        self.assertTrue(no_hooks(model))

    @unittest.skipUnless(torch.cuda.device_count() > 1, "DataParallel needs 2+ GPUs")
    def test_data_parallel(self) -> None:  # pragma: no cover - GPU only
        ids = list(range(torch.cuda.device_count()))
        for model, layer_name, x in (
            (BasicModel_MultiLayer().cuda().eval(), "linear1", torch.randn(4, 3)),
            (tiny_hf_model("bert").cuda(), None, torch.randint(5, 60, (4, 6))),
        ):
            layer = (
                getattr(model, layer_name)
                if layer_name
                else model.bert.encoder.layer[1]
            )
            x = x.cuda()
            single = InformationBottleneckAttribution(model, layer).attribute(
                x, target=0, **FAST
            )
            dp = torch.nn.DataParallel(model)
            multi = InformationBottleneckAttribution(
                dp, layer, device_ids=ids
            ).attribute(x, target=0, **FAST)
            assertTensorAlmostEqual(self, single, multi, 1e-4, "max")
