"""The objective follows the forward's output (issue #10, point 1)."""

import math

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from captum.testing.helpers.basic_models import BasicModel_ConvNet
from torch import nn

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr.objectives import (
    OBJECTIVE_NAMES,
    looks_like_probabilities,
    resolve_objective,
)
from tests.helpers import OneTokenModel

FAST = dict(steps=3, n_samples=3, seed=0)
# With lr ~ 0 alpha stays at 12 (lambda = 1 - 6e-6): T = X up to 1e-5 and the
# task loss is the objective at the clean input.
FROZEN = dict(steps=1, n_samples=2, seed=0, lr=1e-12, init_alpha=12.0)


class ScoreModel(nn.Module):
    """Per-token stack -> one score per instance, read from token 2 only."""

    def __init__(self, dim: int = 8, keep_dim: bool = False) -> None:
        super().__init__()
        self.inner = OneTokenModel(dim)
        self.keep_dim = keep_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        score = self.inner(x)[:, :1]
        return score if self.keep_dim else score.squeeze(1)


class TestObjectiveChoice(BaseTest):
    def _iba(self, model: nn.Module) -> InformationBottleneckAttribution:
        return InformationBottleneckAttribution(model, model.inner.layers[0])

    def test_names(self) -> None:
        self.assertEqual(
            set(OBJECTIVE_NAMES),
            {"auto", "cross_entropy", "probability", "log_probability", "score"},
        )
        with self.assertRaisesRegex(ValueError, "Unknown objective 'mse'"):
            resolve_objective("mse")
        with self.assertRaisesRegex(ValueError, "objective must be"):
            resolve_objective(3)

    def test_one_score_per_instance(self) -> None:
        model = ScoreModel().eval()
        x = torch.randn(3, 5, 8)
        iba = self._iba(model)
        attr = iba.attribute(x, **FAST)
        self.assertEqual(iba.last_run[0]["objective"], "score")
        self.assertEqual(attr.shape, x.shape)
        # only token 2 reaches the score: it must carry the information
        self.assertTrue((attr.sum(-1).argmax(1) == 2).all())
        with self.assertRaisesRegex(ValueError, "target must be None"):
            iba.attribute(x, target=0, **FAST)

    def test_score_loss_is_the_negated_score(self) -> None:
        for keep_dim in (False, True):
            model = ScoreModel(keep_dim=keep_dim).eval()
            x = torch.randn(2, 5, 8)
            iba = self._iba(model)
            iba.attribute(x, **FROZEN)
            expected = -model(x).reshape(-1).detach()
            assertTensorAlmostEqual(
                self, iba.last_run[0]["task_loss"], expected, 1e-4, "max"
            )

    def test_one_column_with_cross_entropy_is_an_error(self) -> None:
        iba = self._iba(ScoreModel(keep_dim=True).eval())
        x = torch.randn(2, 5, 8)
        with self.assertRaisesRegex(ValueError, "cross_entropy.*one column"):
            iba.attribute(x, objective="cross_entropy", **FAST)
        with self.assertRaisesRegex(ValueError, "cross_entropy"):
            self._iba(ScoreModel().eval()).attribute(x, objective="cross_entropy")

    def test_cross_entropy_is_the_default_for_logits(self) -> None:
        model = OneTokenModel().eval()
        x = torch.randn(2, 5, 8)
        iba = InformationBottleneckAttribution(model, model.layers[0])
        auto = iba.attribute(x, target=1, **FAST)
        self.assertEqual(iba.last_run[0]["objective"], "cross_entropy")
        ce = iba.attribute(x, target=1, objective="cross_entropy", **FAST)
        assertTensorAlmostEqual(self, auto, ce, 0.0, "max")
        iba.attribute(x, target=1, **FROZEN)
        expected = -torch.log_softmax(model(x), -1)[:, 1].detach()
        assertTensorAlmostEqual(self, iba.last_run[0]["task_loss"], expected, 1e-4)

    def test_probabilities_detected_and_handled(self) -> None:
        model = BasicModel_ConvNet().eval()  # ends in softmax
        x = torch.randn(2, 1, 10, 10)
        self.assertTrue(looks_like_probabilities(model(x)))
        iba = InformationBottleneckAttribution(model, model.conv2)
        iba.attribute(x, target=3, **FROZEN)
        self.assertEqual(iba.last_run[0]["objective"], "probability")
        expected = -torch.log(model(x)[:, 3]).detach()
        assertTensorAlmostEqual(self, iba.last_run[0]["task_loss"], expected, 1e-4)
        with self.assertRaisesRegex(ValueError, "returns probabilities"):
            iba.attribute(x, target=3, objective="cross_entropy", **FAST)
        logits = OneTokenModel().eval()
        with self.assertRaisesRegex(ValueError, "needs probabilities"):
            InformationBottleneckAttribution(logits, logits.layers[0]).attribute(
                torch.randn(2, 5, 8), target=0, objective="probability"
            )

    def test_log_probability(self) -> None:
        inner = OneTokenModel().eval()

        def log_probs(x: torch.Tensor) -> torch.Tensor:
            return torch.log_softmax(inner(x), dim=-1)

        x = torch.randn(2, 5, 8)
        iba = InformationBottleneckAttribution(log_probs, inner.layers[0])
        lp = iba.attribute(x, target=1, objective="log_probability", **FAST)
        # the same loss as the cross-entropy of the logits
        ce = InformationBottleneckAttribution(inner, inner.layers[0]).attribute(
            x, target=1, **FAST
        )
        assertTensorAlmostEqual(self, lp, ce, 1e-5, "max")
        iba = InformationBottleneckAttribution(inner, inner.layers[0])
        with self.assertRaisesRegex(ValueError, "log-probabilities"):
            iba.attribute(x, target=1, objective="log_probability")

    def test_callable(self) -> None:
        model = OneTokenModel().eval()
        x = torch.randn(2, 5, 8)
        iba = InformationBottleneckAttribution(model, model.layers[0])
        seen = {}

        def margin(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            seen["shapes"] = (tuple(output.shape), tuple(target.shape))
            return -(output[:, 1] - output[:, 0])

        iba.attribute(x, target=1, objective=margin, **FROZEN)
        self.assertEqual(seen["shapes"], ((4, 2), (4,)))
        self.assertEqual(iba.last_run[0]["objective"], "margin")
        out = model(x).detach()
        expected = -(out[:, 1] - out[:, 0])
        assertTensorAlmostEqual(self, iba.last_run[0]["task_loss"], expected, 1e-4)
        with self.assertRaisesRegex(ValueError, "one loss per row"):
            iba.attribute(x, target=1, objective=lambda o, t: o.sum(), **FAST)

    def test_beta_auto_with_a_negative_score(self) -> None:
        model = ScoreModel().eval()
        x = torch.randn(2, 5, 8)
        iba = self._iba(model)
        iba.attribute(x, beta="auto", steps=1, n_samples=2, seed=0)
        run = iba.last_run[0]
        total = run["mean_capacity"] * 5 * 8
        expected = 10 * run["task_loss"].abs() / total
        assertTensorAlmostEqual(self, run["beta"], expected, 1e-6, "max")
        self.assertTrue((run["beta"] > 0).all())

    def test_capacity_unit_is_nats(self) -> None:
        # sanity of the documented unit: at alpha = 0 and X = mean, the
        # capacity is 0.5 * (0.25 - 1 - ln 0.25) nats per element
        from captum_iba.attr.bottleneck import capacity

        c = capacity(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.ones(1))
        self.assertAlmostEqual(c.item(), 0.5 * (0.25 - 1 - math.log(0.25)), 6)
