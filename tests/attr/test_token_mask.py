"""``mask="token"``: one mask weight per token, shared by its features (the
faithful configuration on decoder LLMs, ``llm-iba-faithful``), with
analytical checks against the paper's per-feature mask."""

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from captum.testing.helpers.basic_models import BasicModel_MultiLayer

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr import _loop
from captum_iba.attr.options import IBAOptions
from tests.helpers import MeanPoolModel, no_hooks

#: One step of normalised gradient descent from alpha = 0, mask readout: the
#: scores are sigmoid(alpha after the step), so the step itself is readable.
ONE_STEP = dict(
    config="faithful", prior="paper", steps=1, n_samples=3, lr=1.0, seed=0
)  # fmt: skip


def _logit(p: torch.Tensor) -> torch.Tensor:
    return torch.log(p) - torch.log1p(-p)


class TestTokenMask(BaseTest):
    def setUp(self) -> None:
        torch.manual_seed(0)
        self.model = MeanPoolModel(dim=8).eval()
        self.ids = torch.randint(1, 30, (2, 6))
        self.iba = InformationBottleneckAttribution(self.model, self.model.layers[0])

    def test_one_weight_per_token(self) -> None:
        attr = self.iba.attribute(self.ids, target=1, mask="token", **ONE_STEP)
        self.assertEqual(tuple(attr.shape), (2, 6, 8))  # the layer's shape
        assertTensorAlmostEqual(self, attr, attr[..., :1].expand_as(attr), delta=0)
        self.assertTrue(no_hooks(self.model))

    def test_its_step_follows_the_features_summed_gradient(self) -> None:
        """Same noise, same start: the per-feature run's step gives each
        element's gradient g (up to its instance's scale); the token run's
        step is -lr * sum_h g / max_t |sum_h g|, per instance."""
        feature = self.iba.attribute(self.ids, target=1, mask="feature", **ONE_STEP)
        token = self.iba.attribute(self.ids, target=1, mask="token", **ONE_STEP)
        g = -_logit(feature)  # = lr * g / max|g| >= the direction of g
        summed = g.sum(-1)
        expected = -summed / summed.abs().amax(1, keepdim=True)
        assertTensorAlmostEqual(self, _logit(token[..., 0]), expected, delta=1e-4)

    def test_capacity_readout_broadcasts_the_weight(self) -> None:
        attr = self.iba.attribute(
            self.ids, target=1, mask="token", steps=2, n_samples=2, seed=0
        )
        self.assertEqual(tuple(attr.shape), (2, 6, 8))
        self.assertTrue(bool(torch.isfinite(attr).all() & (attr >= 0).all()))

    def test_initial_alpha_is_averaged_over_the_features(self) -> None:
        x = torch.zeros(2, 3, 4)
        init = torch.arange(24.0).reshape(2, 3, 4)
        options = IBAOptions.from_config("faithful", mask="token")
        alpha = _loop.initial_alpha(x, options, init)
        self.assertEqual(tuple(alpha.shape), (2, 3, 1))
        assertTensorAlmostEqual(self, alpha, init.mean(-1, keepdim=True), delta=0)
        self.assertTrue(alpha.requires_grad)
        start = _loop.initial_alpha(x, options, None)
        self.assertEqual(tuple(start.shape), (2, 3, 1))
        self.assertTrue(bool((start == options.init_alpha).all()))

    def test_a_layer_without_tokens_is_refused(self) -> None:
        mlp = BasicModel_MultiLayer().eval()
        iba = InformationBottleneckAttribution(mlp, mlp.linear1)
        with self.assertRaisesRegex(ValueError, r"\(B, L, features\).*\(2, 4\)"):
            iba.attribute(torch.randn(2, 3), target=0, mask="token")
        self.assertTrue(no_hooks(mlp))

    def test_an_unknown_value_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, r"mask must be one of.*'tokens'"):
            IBAOptions.from_config("faithful", mask="tokens")

    def test_recorded(self) -> None:
        record = IBAOptions.from_config("faithful", mask="token").record()
        self.assertEqual(record["mask"], "token")
        self.assertEqual(IBAOptions().record()["mask"], "feature")
