"""The options behind ``iba-faithful``: the baseline prior, normalised
gradient descent and the mask readout (issue #12), with analytical checks."""

import math
from typing import Optional, Tuple

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from torch import Tensor

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr import _loop
from captum_iba.attr.priors import BaselinePrior, NoisePrior, PaperPrior
from tests.helpers import MeanPoolModel, no_hooks, tiny_hf_model

FAST = dict(steps=3, n_samples=2, seed=0)


class _OwnOutputPrior(NoisePrior):
    """mean = X itself, std = the paper's: what ``BaselinePrior`` gives when
    the baselines are the inputs."""

    name = "own"

    def statistics(
        self, x: Tensor, layer_input: Optional[Tensor], token_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        return x, PaperPrior().statistics(x, None, token_mask)[1]


class TestNormalizedStep(BaseTest):
    def test_largest_element_moves_by_lr_per_instance(self) -> None:
        alpha = torch.zeros(2, 3, 4)
        grad = torch.randn(2, 3, 4)
        grad[1] *= 1000.0  # the scale of an instance's loss does not matter
        _loop.normalized_step(alpha, grad, 0.5)
        for b in range(2):
            expected = -0.5 * grad[b] / grad[b].abs().max()
            assertTensorAlmostEqual(self, alpha[b], expected, delta=1e-6)
            self.assertAlmostEqual(float(alpha[b].abs().max()), 0.5, places=6)

    def test_zero_gradient_leaves_alpha(self) -> None:
        alpha = torch.full((1, 2, 3), 1.5)
        _loop.normalized_step(alpha, torch.zeros(1, 2, 3), 3.0)
        assertTensorAlmostEqual(self, alpha, torch.full((1, 2, 3), 1.5))


class TestMaskReadout(BaseTest):
    def test_mask_mean_is_sigmoid_of_alpha_when_nothing_moves_it(self) -> None:
        # beta = 0 and a head that ignores the bottlenecked tokens' noise
        # (a zero head): the gradient is zero, alpha stays at init_alpha.
        model = MeanPoolModel().eval()
        with torch.no_grad():
            model.head.weight.zero_()
        ids = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
        mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
        iba = InformationBottleneckAttribution(model, model.layers[0])
        for optimizer in ("adam", "normalized_gd"):
            attr = iba.attribute(
                ids, target=0, additional_forward_args=(mask,), beta=0.0,
                init_alpha=0.7, optimizer=optimizer, readout="mask_mean", **FAST,
            )  # fmt: skip
            lam = 1 / (1 + math.exp(-0.7))
            expected = lam * mask[..., None].float().expand_as(attr)
            assertTensorAlmostEqual(self, attr, expected, delta=1e-6)

    def test_bad_names_are_refused(self) -> None:
        model = MeanPoolModel().eval()
        iba = InformationBottleneckAttribution(model, model.layers[0])
        ids = torch.tensor([[3, 4, 5]])
        with self.assertRaisesRegex(ValueError, "optimizer must be one of"):
            iba.attribute(ids, target=0, optimizer="sgd", **FAST)
        with self.assertRaisesRegex(ValueError, "readout must be one of"):
            iba.attribute(ids, target=0, readout="lambda", **FAST)
        self.assertTrue(no_hooks(model))


class TestBaselinePrior(BaseTest):
    def test_statistics_are_the_baseline_and_the_paper_std(self) -> None:
        x, base = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
        mask = torch.ones(2, 5, dtype=torch.bool)
        mean, std = BaselinePrior().statistics(x, None, mask, baseline=base)
        assertTensorAlmostEqual(self, mean, base)
        assertTensorAlmostEqual(self, std, PaperPrior().statistics(x, None, mask)[1])

    def test_uses_the_layer_output_on_the_baselines(self) -> None:
        # baselines = inputs: the mean is X itself, as _OwnOutputPrior says.
        model = tiny_hf_model("bert")
        layer = model.bert.encoder.layer[1]
        ids = torch.tensor([[2, 7, 9, 11, 3], [2, 8, 10, 3, 0]])
        mask = (ids != 0).long()
        iba = InformationBottleneckAttribution(model, layer)
        kw = dict(target=1, additional_forward_args=(mask,), token_mask=mask, **FAST)
        got = iba.attribute(ids, prior="baseline", baselines=ids, **kw)
        want = iba.attribute(ids, prior=_OwnOutputPrior(), **kw)
        assertTensorAlmostEqual(self, got, want, delta=1e-5)
        # other baselines change the result
        pads = ids.masked_fill(mask.bool() & (ids > 3), 0)
        other = iba.attribute(ids, prior="baseline", baselines=pads, **kw)
        self.assertGreater(float((other - got).abs().max()), 1e-3)
        self.assertTrue(no_hooks(model))

    def test_missing_or_misshapen_baselines_are_named(self) -> None:
        model = MeanPoolModel().eval()
        iba = InformationBottleneckAttribution(model, model.layers[0])
        ids = torch.tensor([[3, 4, 5]])
        with self.assertRaisesRegex(ValueError, "pad token id is unknown"):
            iba.attribute(ids, target=0, prior="baseline", **FAST)
        with self.assertRaisesRegex(ValueError, "baselines must have the shapes"):
            iba.attribute(ids, target=0, prior="baseline", baselines=ids[:, :2], **FAST)
        self.assertTrue(no_hooks(model))


class TestFaithfulInOneWord(BaseTest):
    """``config="faithful"`` builds the deletion baseline itself."""

    def setUp(self) -> None:
        self.model = tiny_hf_model("bert")
        self.layer = self.model.bert.encoder.layer[1]
        self.ids = torch.tensor([[2, 7, 9, 11, 3], [2, 8, 10, 3, 0]])
        self.mask = (self.ids != 0).long()
        self.kw = dict(target=1, additional_forward_args=(self.mask,), seed=0)

    def test_equals_the_explicit_deletion_baseline(self) -> None:
        special = [2, 3]  # [CLS]- and [SEP]-like ids, kept
        pads = self.ids.masked_fill(
            self.mask.bool() & ~torch.isin(self.ids, torch.tensor(special)), 0
        )
        explicit = InformationBottleneckAttribution(self.model, self.layer).attribute(
            self.ids, prior="baseline", baselines=pads, **self.kw, **_FAITHFUL
        )
        iba = InformationBottleneckAttribution(
            self.model, self.layer, special_token_ids=special
        )
        one_word = iba.attribute(self.ids, config="faithful", **self.kw)
        assertTensorAlmostEqual(self, one_word, explicit, delta=0)
        # the model's pad id (config.pad_token_id = 0) is the default fill;
        # without special ids every real token is replaced
        bare = InformationBottleneckAttribution(self.model, self.layer).attribute(
            self.ids, config="faithful", **self.kw
        )
        all_pads = self.ids.masked_fill(self.mask.bool(), 0)
        want = InformationBottleneckAttribution(self.model, self.layer).attribute(
            self.ids, prior="baseline", baselines=all_pads, **self.kw, **_FAITHFUL
        )
        assertTensorAlmostEqual(self, bare, want, delta=0)
        self.assertTrue(no_hooks(self.model))

    def test_config_and_overrides(self) -> None:
        iba = InformationBottleneckAttribution(self.model, self.layer)
        faithful = iba.attribute(self.ids, config="faithful", steps=2, **self.kw)
        # the readout is the mean mask: in (0, 1) per element at real tokens
        real = self.mask.bool()
        self.assertTrue(bool((faithful[real] > 0).all() & (faithful[real] < 1).all()))
        self.assertTrue(bool((faithful[~real] == 0).all()))
        with self.assertRaisesRegex(TypeError, "unknown IBA option.*steps"):
            iba.attribute(self.ids, config="faithful", stepz=2, **self.kw)
        with self.assertRaisesRegex(ValueError, "Unknown IBA configuration"):
            iba.attribute(self.ids, config="fastest", **self.kw)


_FAITHFUL = dict(
    n_samples=5, lr=3.0, init_alpha=0.0, optimizer="normalized_gd", readout="mask_mean"
)
