import unittest
import warnings

import torch
from captum.attr import LayerIntegratedGradients
from captum.metrics import infidelity, sensitivity_max
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba import (
    InformationBottleneckAttribution,
    layer_token_map,
    token_attributions,
)
from tests.helpers import (
    MeanPoolModel,
    OneTokenModel,
    RaisingModel,
    ReusedLayerModel,
    TupleStackModel,
    no_hooks,
)

FAST = dict(steps=3, n_samples=3, seed=0)


class TestAttributionResults(BaseTest):
    def test_signal_token_ranked_first(self) -> None:
        model = OneTokenModel(signal_pos=2).eval()
        x = torch.randn(4, 6, 8)
        target = model(x).argmax(1)
        for stack in (True, False):
            iba = InformationBottleneckAttribution(
                model, model.layers[0], layer_stack=stack
            )
            attr = iba.attribute(x, target=target, beta=1e-3, seed=0)
            self.assertEqual(attr.shape, x.shape)
            scores = token_attributions(attr)
            self.assertTrue((scores.argmax(1) == 2).all(), scores)
            self.assertEqual(iba.last_run[0]["path"], "stack" if stack else "hooks")

    def test_stack_and_hook_paths_agree(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (3, 5))
        results = [
            InformationBottleneckAttribution(
                model, model.layers[0], layer_stack=stack
            ).attribute(ids, target=1, **FAST)
            for stack in (True, False)
        ]
        assertTensorAlmostEqual(self, results[0], results[1], 1e-4, "max")

    def test_stack_replay_falls_back_when_it_does_not_reproduce(self) -> None:
        # MeanPoolModel adds a residual outside its layers: replaying layers[0..1]
        # as stubs cannot reproduce the output, so hooks must be used instead.
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        iba = InformationBottleneckAttribution(model, model.layers[1])
        with self.assertWarnsRegex(UserWarning, "did not reproduce"):
            fallback = iba.attribute(ids, target=1, **FAST)
        self.assertEqual(iba.last_run[0]["path"], "hooks")
        hooks = InformationBottleneckAttribution(
            model, model.layers[1], layer_stack=False
        ).attribute(ids, target=1, **FAST)
        assertTensorAlmostEqual(self, fallback, hooks, 0.0, "max")
        self.assertEqual(list(model.layers), list(model.layers))
        self.assertTrue(no_hooks(model))

    def test_batch_invariance(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (4, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        together = iba.attribute(ids, target=[0, 1, 2, 0], **FAST)
        alone = torch.cat(
            [
                iba.attribute(ids[i : i + 1], target=t, **FAST)
                for i, t in enumerate([0, 1, 2, 0])
            ]
        )
        assertTensorAlmostEqual(self, together, alone, 1e-4, "max")
        chunked = iba.attribute(ids, target=[0, 1, 2, 0], internal_batch_size=6, **FAST)
        assertTensorAlmostEqual(self, together, chunked, 1e-4, "max")

    def test_padding_invariance(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (1, 4))
        padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
        mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0]])
        iba = InformationBottleneckAttribution(model, model.layers[0])
        plain = iba.attribute(
            ids, target=1, additional_forward_args=(torch.ones_like(ids),), **FAST
        )
        pad = iba.attribute(padded, target=1, additional_forward_args=(mask,), **FAST)
        assertTensorAlmostEqual(self, pad[:, :4], plain, 1e-4, "max")
        self.assertEqual(pad[:, 4:].abs().sum().item(), 0.0)

    def test_explicit_token_mask(self) -> None:
        model = OneTokenModel().eval()
        x = torch.randn(2, 5, 8)
        mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
        attr = InformationBottleneckAttribution(model, model.layers[0]).attribute(
            x, target=0, token_mask=mask, **FAST
        )
        self.assertEqual(attr[0, 3:].abs().sum().item(), 0.0)
        self.assertTrue((attr[1] > 0).all())

    def test_seed_determinism(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        a = iba.attribute(ids, target=0, **FAST)
        b = iba.attribute(ids, target=0, **FAST)
        c = iba.attribute(ids, target=0, steps=3, n_samples=3, seed=1)
        assertTensorAlmostEqual(self, a, b, 0.0, "max")
        self.assertGreater((a - c).abs().max().item(), 1e-6)
        torch.manual_seed(7)
        d = iba.attribute(ids, target=0, steps=2, n_samples=2)
        torch.manual_seed(7)
        e = iba.attribute(ids, target=0, steps=2, n_samples=2)
        assertTensorAlmostEqual(self, d, e, 0.0, "max")

    def test_target_forms_agree(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (3, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        ref = iba.attribute(ids, target=[2, 2, 2], **FAST)
        for target in (
            2,
            torch.tensor(2),
            torch.tensor([2, 2, 2]),
            (2,),
            [(2,), (2,), (2,)],
        ):
            assertTensorAlmostEqual(
                self, iba.attribute(ids, target=target, **FAST), ref, 1e-6, "max"
            )
        pred = model(ids).argmax(1)
        assertTensorAlmostEqual(
            self,
            iba.attribute(ids, target=None, **FAST),
            iba.attribute(ids, target=pred, **FAST),
            1e-6,
            "max",
        )

    def test_target_changes_result(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        a = iba.attribute(ids, target=0, **FAST)
        b = iba.attribute(ids, target=1, **FAST)
        self.assertGreater((a - b).abs().max().item(), 1e-6)

    def test_layer_list_sweep(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        layers = [model.layers[0], model.layers[1]]
        sweep = InformationBottleneckAttribution(
            model, layers, layer_stack=False
        ).attribute(ids, target=1, **FAST)
        self.assertIsInstance(sweep, list)
        single = InformationBottleneckAttribution(
            model, model.layers[1], layer_stack=False
        ).attribute(ids, target=1, **FAST)
        assertTensorAlmostEqual(self, sweep[1], single, 1e-6, "max")
        heat = layer_token_map(sweep)
        self.assertEqual(tuple(heat.shape), (2, 2, 5))

    def test_beta_auto_and_larger_beta_less_capacity(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        iba.attribute(ids, target=0, beta="auto", **FAST)
        beta = iba.last_run[0]["beta"]
        self.assertEqual(tuple(beta.shape), (2,))
        self.assertTrue((beta > 0).all())
        low = iba.attribute(ids, target=0, beta=0.0, **FAST).sum()
        high = iba.attribute(ids, target=0, beta=10.0, **FAST).sum()
        self.assertLess(high.item(), low.item())

    def test_beta_auto_is_ten_times_ce_over_total_capacity(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        iba.attribute(ids, target=0, beta="auto", steps=1, n_samples=3, seed=0)
        run = iba.last_run[0]  # with one step: the losses at the start
        total = run["mean_capacity"] * 5 * 8  # 5 tokens x 8 features
        expected = 10 * run["task_loss"] / total
        assertTensorAlmostEqual(self, run["beta"], expected, 1e-6, "max")

    def test_tuple_returning_layer(self) -> None:
        model = TupleStackModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        for stack in (True, False):
            attr = InformationBottleneckAttribution(
                model, model.layers[1], layer_stack=stack
            ).attribute(ids, target=0, **FAST)
            self.assertEqual(tuple(attr.shape), (2, 5, 8))

    def test_bits_unit(self) -> None:
        attr = torch.rand(2, 3, 4)
        nats = token_attributions(attr)
        bits = token_attributions(attr, unit="bits")
        assertTensorAlmostEqual(self, bits * 0.6931471805599453, nats, 1e-5, "max")


class TestModelLeftAsFound(BaseTest):
    def test_state_restored(self) -> None:
        model = MeanPoolModel()
        model.train()
        model.layers[1].eval()
        model.head.weight.requires_grad_(False)
        flags = [(m, m.training) for m in model.modules()]
        grads = [p.requires_grad for p in model.parameters()]
        modules = list(model.modules())
        ids = torch.randint(1, 30, (2, 5))
        InformationBottleneckAttribution(model, model.layers[0]).attribute(
            ids, target=0, **FAST
        )
        self.assertEqual([(m, m.training) for m in model.modules()], flags)
        self.assertEqual([p.requires_grad for p in model.parameters()], grads)
        self.assertTrue(all(p.grad is None for p in model.parameters()))
        self.assertEqual(list(model.modules()), modules)
        self.assertTrue(no_hooks(model))

    def test_under_no_grad(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0])
        with torch.no_grad():
            a = iba.attribute(ids, target=0, **FAST)
        assertTensorAlmostEqual(
            self, a, iba.attribute(ids, target=0, **FAST), 0.0, "max"
        )

    def test_hooks_removed_after_errors(self) -> None:
        model = RaisingModel()
        iba = InformationBottleneckAttribution(model, model.layer)
        with self.assertRaisesRegex(RuntimeError, "boom"):
            iba.attribute(torch.randn(2, 3, 8), target=0)
        self.assertTrue(no_hooks(model))
        model = MeanPoolModel().eval()
        modules = list(model.modules())
        iba = InformationBottleneckAttribution(model, model.layers[0])
        with self.assertRaisesRegex(ValueError, "out of range"):
            iba.attribute(torch.randint(1, 30, (2, 5)), target=7)
        self.assertTrue(no_hooks(model))
        self.assertEqual(list(model.modules()), modules)

    def test_stack_restored_when_forward_raises_mid_optimisation(self) -> None:
        model = MeanPoolModel().eval()
        modules = list(model.modules())
        calls = {"n": 0}

        def hook(module, args, out):
            calls["n"] += 1
            if calls["n"] > 3:
                raise RuntimeError("late failure")

        handle = model.head.register_forward_hook(hook)
        try:
            with self.assertRaisesRegex(RuntimeError, "late failure"):
                InformationBottleneckAttribution(model, model.layers[0]).attribute(
                    torch.randint(1, 30, (2, 5)), target=0, **FAST
                )
        finally:
            handle.remove()
        self.assertEqual(list(model.modules()), modules)
        self.assertTrue(no_hooks(model))


class TestBadInput(BaseTest):
    def setUp(self) -> None:
        super().setUp()
        self.model = MeanPoolModel().eval()
        self.ids = torch.randint(1, 30, (2, 5))
        self.iba = InformationBottleneckAttribution(self.model, self.model.layers[0])

    def _raises(self, regex: str, **kwargs) -> None:
        args = dict(inputs=self.ids, target=0)
        args.update(kwargs)
        with self.assertRaisesRegex((ValueError, RuntimeError, TypeError), regex):
            self.iba.attribute(**args)
        self.assertTrue(no_hooks(self.model))

    def test_scalar_arguments(self) -> None:
        self._raises("steps", steps=0)
        self._raises("n_samples", n_samples=0)
        self._raises("beta", beta=-1.0)
        self._raises("beta", beta="big")
        self._raises("lr", lr=0.0)
        self._raises("internal_batch_size", internal_batch_size=0)

    def test_targets(self) -> None:
        self._raises("out of range", target=3)
        self._raises("out of range", target=-1)
        self._raises("2 instances", target=[0, 1, 2])
        self._raises("out of range", target=[0, 5])

    def test_batch_size_mismatch(self) -> None:
        self._raises("batch size", additional_forward_args=(torch.ones(3, 5),))
        self._raises("batch size", inputs=(self.ids, torch.ones(3, 5)))

    def test_non_batch_additional_args_pass_untouched(self) -> None:
        seen = []

        def forward(ids, table):
            seen.append(tuple(table.shape))
            return self.model(ids) + table.sum()

        iba = InformationBottleneckAttribution(forward, self.model.layers[0])
        iba.attribute(self.ids, target=0, additional_forward_args=(torch.ones(7),))
        self.assertEqual(set(seen), {(7,)})
        self.assertTrue(no_hooks(self.model))

    def test_all_padding_row(self) -> None:
        mask = torch.ones(2, 5, dtype=torch.long)
        mask[1] = 0
        self._raises("no real token", additional_forward_args=(mask,))
        self._raises("token_mask", token_mask=torch.ones(2, 4))

    def test_layer_not_run(self) -> None:
        unused = torch.nn.Linear(8, 8)
        iba = InformationBottleneckAttribution(self.model, unused)
        with self.assertRaisesRegex(RuntimeError, "not run"):
            iba.attribute(self.ids, target=0)
        self.assertEqual(len(unused._forward_hooks), 0)

    def test_layer_run_twice(self) -> None:
        model = ReusedLayerModel()
        iba = InformationBottleneckAttribution(model, model.shared)
        with self.assertRaisesRegex(RuntimeError, "2 times"):
            iba.attribute(torch.randn(2, 3, 8), target=0)
        self.assertTrue(no_hooks(model))

    def test_non_finite(self) -> None:
        model = OneTokenModel().eval()
        x = torch.randn(2, 5, 8)
        x[0, 0, 0] = float("nan")
        iba = InformationBottleneckAttribution(model, model.layers[0])
        with self.assertRaisesRegex(FloatingPointError, "non-finite"):
            iba.attribute(x, target=0)
        x = torch.randn(2, 5, 8)
        # an infinite beta is refused by name before the loop (issue #11, P9)
        with self.assertRaisesRegex(ValueError, "beta must be a finite"):
            iba.attribute(x, target=0, beta=float("inf"), steps=1, n_samples=1)
        # a finite beta whose loss overflows still stops at the loop's guard
        with self.assertRaisesRegex(FloatingPointError, "Non-finite IBA loss"):
            iba.attribute(x, target=0, beta=1e308, steps=1, n_samples=1)
        self.assertTrue(no_hooks(model))

    def test_bad_layer_and_prior(self) -> None:
        with self.assertRaises(TypeError):
            InformationBottleneckAttribution(self.model, "layers.0")  # type: ignore
        self._raises("Unknown prior", prior="uniform")


class TestCaptumInterop(BaseTest):
    def test_drop_in_for_layer_integrated_gradients(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (2, 5))
        mask = torch.ones_like(ids)
        lig = LayerIntegratedGradients(model, model.layers[0]).attribute(
            ids, target=1, additional_forward_args=(mask,)
        )
        iba = InformationBottleneckAttribution(model, model.layers[0]).attribute(
            ids, target=1, additional_forward_args=(mask,)
        )
        self.assertEqual(lig.shape, iba.shape)

    def test_infidelity_and_sensitivity(self) -> None:
        model = OneTokenModel().eval()
        x = torch.randn(2, 5, 8)
        iba = InformationBottleneckAttribution(model, model.layers[0])

        def explain(inputs, **kwargs):
            attr = iba.attribute(inputs, target=kwargs.get("target", 0), **FAST)
            # sensitivity_max passes a tuple and iterates over what comes back.
            return (attr,) if isinstance(inputs, tuple) else attr

        def perturb(inputs):
            noise = 0.01 * torch.randn_like(inputs)
            return noise, inputs - noise

        attr = explain(x)
        infid = infidelity(model, perturb, x, attr, target=0)
        self.assertEqual(tuple(infid.shape), (2,))
        self.assertTrue(torch.isfinite(infid).all())
        sens = sensitivity_max(explain, x, target=0, n_perturb_samples=2)
        self.assertEqual(tuple(sens.shape), (2,))
        self.assertTrue(torch.isfinite(sens).all())

    def test_bfloat16_model(self) -> None:
        model = MeanPoolModel().eval().to(torch.bfloat16)
        ids = torch.randint(1, 30, (2, 5))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            attr = InformationBottleneckAttribution(model, model.layers[0]).attribute(
                ids, target=0, **FAST
            )
        self.assertEqual(attr.dtype, torch.float32)
        self.assertTrue(torch.isfinite(attr).all())

    @unittest.skipUnless(torch.cuda.device_count() > 1, "needs 2+ GPUs")
    def test_data_parallel(self) -> None:  # pragma: no cover - GPU only
        model = MeanPoolModel().cuda().eval()
        dp = torch.nn.DataParallel(model)
        ids = torch.randint(1, 30, (4, 5)).cuda()
        single = InformationBottleneckAttribution(model, model.layers[0]).attribute(
            ids, target=0, **FAST
        )
        multi = InformationBottleneckAttribution(
            dp, model.layers[0], device_ids=list(range(torch.cuda.device_count()))
        ).attribute(ids, target=0, **FAST)
        assertTensorAlmostEqual(self, single, multi, 1e-4, "max")
