import math

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from torch.distributions import Normal, kl_divergence

from captum_iba.attr import bottleneck as ib


class TestBottleneckEquations(BaseTest):
    def test_capacity_matches_gaussian_kl(self) -> None:
        dt = torch.float64
        x = torch.randn(4, 5, 3, dtype=dt)
        alpha = torch.randn(4, 5, 3, dtype=dt) * 3
        mean = torch.randn(1, 1, 3, dtype=dt)
        std = torch.rand(1, 1, 3, dtype=dt) + 0.1
        lam = torch.sigmoid(alpha)
        # P(T|X) = N(lam x + (1 - lam) mu, (1 - lam)^2 sigma^2), Q = N(mu, sigma^2)
        p = Normal(lam * x + (1 - lam) * mean, (1 - lam) * std)
        q = Normal(mean.expand_as(x), std.expand_as(x))
        assertTensorAlmostEqual(
            self, ib.capacity(x, alpha, mean, std), kl_divergence(p, q), 1e-9, "max"
        )

    def test_capacity_hand_value(self) -> None:
        # lam = 1/2, x - mu = 2 sigma: mu_z = 1, var_z = 1/4
        c = ib.capacity(torch.tensor([3.0]), torch.tensor([0.0]), 1.0, 1.0)
        expected = 0.5 * (0.25 + 1.0 - 1.0 - math.log(0.25))
        self.assertAlmostEqual(c.item(), expected, places=6)

    def test_capacity_finite_for_large_alpha(self) -> None:
        c = ib.capacity(torch.ones(3), torch.full((3,), 40.0), 0.0, 1.0)
        self.assertTrue(torch.isfinite(c).all())
        self.assertGreater(c.min().item(), 10.0)

    def test_capacity_zero_when_all_noise_at_mean(self) -> None:
        c = ib.capacity(torch.zeros(3), torch.full((3,), -40.0), 0.0, 1.0)
        assertTensorAlmostEqual(self, c, torch.zeros(3), 1e-6, "max")

    def test_inject_noise_moments(self) -> None:
        n = 200_000
        x = torch.full((n,), 2.0)
        alpha = torch.zeros(n)  # lam = 0.5
        t = ib.inject_noise(
            x, alpha, torch.tensor(1.0), torch.tensor(3.0), torch.randn(n)
        )
        self.assertAlmostEqual(t.mean().item(), 0.5 * 2 + 0.5 * 1, delta=0.02)
        self.assertAlmostEqual(t.std().item(), 0.5 * 3, delta=0.02)

    def test_inject_noise_gradient_reaches_alpha(self) -> None:
        alpha = torch.zeros(3, requires_grad=True)
        t = ib.inject_noise(torch.ones(3), alpha, 0.0, 1.0, torch.zeros(3))
        (g,) = torch.autograd.grad(t.sum(), alpha)
        assertTensorAlmostEqual(self, g, torch.full((3,), 0.25), 1e-6, "max")

    def test_loss_and_empirical_beta(self) -> None:
        ce = torch.tensor([0.5, 2.0])
        cap = torch.tensor([100.0, 10.0])
        beta = ib.empirical_beta(ce, cap)
        assertTensorAlmostEqual(self, beta, torch.tensor([0.05, 2.0]), 1e-6, "max")
        loss = ib.information_bottleneck_loss(ce, cap, beta)
        assertTensorAlmostEqual(self, loss, ce * 11, 1e-5, "max")

    def test_nats_per_bit(self) -> None:
        self.assertAlmostEqual(ib.NATS_PER_BIT, math.log(2))
