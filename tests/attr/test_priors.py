import math

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba import (
    DatasetPrior,
    InformationBottleneckAttribution,
    PaperPrior,
    ReferencePrior,
)
from captum_iba.attr.priors import WelfordEstimator, resolve_prior
from tests.helpers import MeanPoolModel, tiny_hf_model


class TestPriors(BaseTest):
    def test_paper_prior_ignores_padding(self) -> None:
        x = torch.tensor([[[1.0], [3.0], [100.0]]])
        mask = torch.tensor([[True, True, False]])
        mean, std = PaperPrior().statistics(x, None, mask)
        assertTensorAlmostEqual(self, mean, torch.tensor([[[2.0]]]))
        assertTensorAlmostEqual(self, std, torch.tensor([[[1.0]]]))

    def test_paper_prior_floor(self) -> None:
        x = torch.ones(1, 4, 2)
        _, std = PaperPrior(std_floor=0.05).statistics(x, None, torch.ones(1, 4).bool())
        assertTensorAlmostEqual(self, std, torch.full((1, 1, 2), 0.05))

    def test_reference_prior_statistics(self) -> None:
        x = torch.randn(2, 3, 4)
        h_in = torch.randn(2, 3, 4)
        mean, std = ReferencePrior().statistics(x, h_in, torch.ones(2, 3).bool())
        assertTensorAlmostEqual(self, mean, h_in)
        self.assertAlmostEqual(std.item(), math.sqrt(1e-5), places=8)
        with self.assertRaisesRegex(ValueError, "layer's input"):
            ReferencePrior().statistics(x, None, torch.ones(2, 3).bool())

    def test_welford_matches_direct(self) -> None:
        data = torch.randn(1000, 5) * 3 + 2
        est = WelfordEstimator(5)
        for chunk in data.split(77):
            est.update(chunk)
        assertTensorAlmostEqual(self, est.mean.float(), data.mean(0), 1e-4, "max")
        assertTensorAlmostEqual(
            self, est.std().float(), data.std(0, unbiased=False), 1e-4, "max"
        )
        self.assertEqual(est.count, 1000)

    def test_dataset_prior_fit_is_mask_aware(self) -> None:
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (4, 6))
        mask = torch.ones(4, 6, dtype=torch.long)
        mask[:, 4:] = 0
        layer = model.layers[0]
        prior = DatasetPrior.fit(model, layer, [(ids, mask)], std_floor=1e-6)
        with torch.no_grad():
            out = layer(model.embed(ids))
        real = out[:, :4].reshape(-1, 8)
        assertTensorAlmostEqual(self, prior.mean, real.mean(0), 1e-4, "max")
        assertTensorAlmostEqual(
            self, prior.std, real.std(0, unbiased=False), 1e-4, "max"
        )
        self.assertEqual(prior.count, 16)
        self.assertEqual(len(layer._forward_hooks), 0)

    def test_dataset_prior_from_dict_batches_and_use(self) -> None:
        model = tiny_hf_model("bert")
        layer = model.bert.encoder.layer[1]
        ids = torch.randint(5, 60, (3, 7))
        batches = [{"input_ids": ids, "attention_mask": torch.ones_like(ids)}]
        prior = DatasetPrior.fit(model, layer, batches)
        self.assertEqual(tuple(prior.mean.shape), (16,))
        attr = InformationBottleneckAttribution(model, layer).attribute(
            ids, target=0, prior=prior, seed=0, steps=2, n_samples=2
        )
        self.assertTrue(torch.isfinite(attr).all())

    def test_resolve_prior_errors(self) -> None:
        self.assertIsInstance(resolve_prior("paper"), PaperPrior)
        self.assertIsInstance(resolve_prior("reference"), ReferencePrior)
        with self.assertRaisesRegex(ValueError, "DatasetPrior.fit"):
            resolve_prior("dataset")
        with self.assertRaisesRegex(ValueError, "Unknown prior"):
            resolve_prior("gaussian")
        with self.assertRaisesRegex(ValueError, "std > 0"):
            DatasetPrior(torch.zeros(3), torch.zeros(3))
