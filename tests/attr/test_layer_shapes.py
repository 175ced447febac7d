"""Any layer shape: (B, features), conv outputs, tuple outputs, the layer's
input, and internal_batch_size clamping (issue #10, point 4)."""

import inspect
import warnings

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from captum.testing.helpers.basic_models import (
    BasicModel_ConvNet_One_Conv,
    BasicModel_MultiLayer,
)

from captum_iba import InformationBottleneckAttribution, PaperPrior, encoder_layers
from tests.helpers import MeanPoolModel, no_hooks, tiny_hf_model

FAST = dict(steps=3, n_samples=3, seed=0)


class TestPaperPriorShapes(BaseTest):
    def test_features_only(self) -> None:
        x = torch.tensor([[1.0, 3.0], [2.0, 2.0]])
        mean, std = PaperPrior().statistics(x, None, torch.ones(2, dtype=torch.bool))
        assertTensorAlmostEqual(self, mean, torch.tensor([[2.0], [2.0]]))
        assertTensorAlmostEqual(self, std, torch.tensor([[1.0], [0.01]]))

    def test_conv_per_channel_over_space(self) -> None:
        x = torch.zeros(1, 2, 2, 2)
        x[0, 0] = torch.tensor([[0.0, 2.0], [0.0, 2.0]])
        x[0, 1] = 5.0
        mean, std = PaperPrior().statistics(x, None, torch.ones(1, 2).bool())
        self.assertEqual(tuple(mean.shape), (1, 2, 1, 1))
        assertTensorAlmostEqual(self, mean.flatten(), torch.tensor([1.0, 5.0]))
        assertTensorAlmostEqual(self, std.flatten(), torch.tensor([1.0, 0.01]))

    def test_token_axis_unchanged(self) -> None:
        x = torch.tensor([[[1.0], [3.0], [100.0]]])
        mask = torch.tensor([[True, True, False]])
        mean, std = PaperPrior().statistics(x, None, mask)
        assertTensorAlmostEqual(self, mean.flatten(), torch.tensor([2.0]))
        assertTensorAlmostEqual(self, std.flatten(), torch.tensor([1.0]))

    def test_scalar_output_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "'paper' prior"):
            PaperPrior().statistics(torch.ones(3), None, torch.ones(3).bool())


class TestLayerShapes(BaseTest):
    def test_every_layer_of_captum_multilayer_model(self) -> None:
        model = BasicModel_MultiLayer().eval()
        x = torch.randn(4, 3)
        layers = (model.linear0, model.linear1, model.relu, model.linear2)
        for layer, width in zip(layers, (3, 4, 4, 2)):
            attr = InformationBottleneckAttribution(model, layer).attribute(
                x, target=1, **FAST
            )
            self.assertEqual(tuple(attr.shape), (4, width))
            self.assertTrue(torch.isfinite(attr).all() and (attr >= 0).all())

    def test_conv_layer(self) -> None:
        model = BasicModel_ConvNet_One_Conv().eval()
        x = 20 * torch.randn(3, 1, 4, 4)
        iba = InformationBottleneckAttribution(model, model.conv1)
        attr = iba.attribute(x, target=1, **FAST)
        self.assertEqual(tuple(attr.shape), (3, 2, 2, 2))
        self.assertTrue((attr >= 0).all())

    def test_tuple_output_one_bottleneck_per_tensor(self) -> None:
        model = BasicModel_MultiLayer(multi_input_module=True).eval()
        x = torch.randn(3, 3)
        iba = InformationBottleneckAttribution(model, model.multi_relu)
        attr = iba.attribute(x, target=0, **FAST)
        self.assertIsInstance(attr, tuple)
        self.assertEqual([tuple(a.shape) for a in attr], [(3, 4), (3, 4)])
        self.assertEqual(len(iba.last_run[0]["per_output"]), 2)
        chunked = iba.attribute(x, target=0, internal_batch_size=3, **FAST)
        for a, b in zip(attr, chunked):
            assertTensorAlmostEqual(self, a, b, 1e-5, "max")
        self.assertTrue(no_hooks(model))

    def test_internal_batch_size_below_n_samples_splits_the_copies(self) -> None:
        # one instance's noise copies in passes of 1 or 2 rows: the gradients
        # add up to the same step, so the scores are those of one pass
        model = MeanPoolModel().eval()
        ids = torch.randint(1, 30, (3, 5))
        iba = InformationBottleneckAttribution(model, model.layers[0], pad_token_id=0)
        ref = iba.attribute(ids, target=1, internal_batch_size=3, **FAST)
        for rows in (1, 2):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                low = iba.attribute(ids, target=1, internal_batch_size=rows, **FAST)
            assertTensorAlmostEqual(self, low, ref, 1e-5, "max")
        kw = dict(target=1, config="faithful", steps=3, seed=0)
        one = iba.attribute(ids, internal_batch_size=9, **kw)
        split = iba.attribute(ids, internal_batch_size=2, **kw)
        assertTensorAlmostEqual(self, split, one, 1e-5, "max")
        # the complement term's passes too (3 copies of one row each, run one
        # per pass)
        bert = tiny_hf_model("bert")
        mask = torch.ones_like(ids)
        deletion = InformationBottleneckAttribution(bert, bert.bert.embeddings)
        kw = dict(
            target=1, additional_forward_args=(mask,), config="deletion", n_samples=3
        )
        one = deletion.attribute(ids, steps=3, **kw)
        split = deletion.attribute(ids, steps=3, internal_batch_size=1, **kw)
        assertTensorAlmostEqual(self, split, one, 1e-5, "max")


class TestLayerInput(BaseTest):
    def test_input_of_linear_equals_output_of_previous_layer(self) -> None:
        model = BasicModel_MultiLayer().eval()
        x = torch.randn(4, 3)
        on_input = InformationBottleneckAttribution(model, model.linear1).attribute(
            x, target=0, attribute_to_layer_input=True, **FAST
        )
        on_output = InformationBottleneckAttribution(model, model.linear0).attribute(
            x, target=0, **FAST
        )
        assertTensorAlmostEqual(self, on_input, on_output, 1e-6, "max")
        self.assertTrue(no_hooks(model))

    def test_hugging_face_layers_positional_and_keyword(self) -> None:
        # transformers 5.x passes the hidden states positionally; a pre-hook
        # registered first moves them to hidden_states= for the keyword case
        def to_keyword(module, args, kwargs):
            bound = inspect.signature(module.forward).bind(*args, **kwargs)
            return (), dict(bound.arguments)

        for kind, keyword in (("bert", False), ("distilbert", False), ("bert", True)):
            model = tiny_hf_model(kind)
            ids = torch.randint(5, 60, (2, 6))
            mask = torch.ones_like(ids)
            mask[1, 4:] = 0
            layers = encoder_layers(model)
            handle = (
                layers[2].register_forward_pre_hook(to_keyword, with_kwargs=True)
                if keyword
                else None
            )
            try:
                args = dict(target=1, additional_forward_args=(mask,), **FAST)
                on_input = InformationBottleneckAttribution(
                    model, layers[2], layer_stack=False
                ).attribute(ids, attribute_to_layer_input=True, **args)
                on_output = InformationBottleneckAttribution(
                    model, layers[1], layer_stack=False
                ).attribute(ids, **args)
            finally:
                if handle is not None:
                    handle.remove()
            assertTensorAlmostEqual(self, on_input, on_output, 1e-5, "max")
            self.assertEqual(on_input[1, 4:].abs().sum().item(), 0.0)
            self.assertTrue(no_hooks(model))

    def test_reference_prior_on_the_input_is_refused(self) -> None:
        model = BasicModel_MultiLayer().eval()
        iba = InformationBottleneckAttribution(model, model.linear1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaisesRegex(ValueError, "attribute_to_layer_input"):
                iba.attribute(
                    torch.randn(2, 3),
                    target=0,
                    prior="reference",
                    attribute_to_layer_input=True,
                )


def test_embeddings_mean_one_module_for_every_method():
    """ "embeddings" is the embedding block of an encoder and the input
    embeddings of a decoder, for IBA and for the Captum methods alike."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from captum_iba.attr.text import resolve_layer
    from captum_iba.evaluation.ig import embedding_layer
    from tests.helpers import tiny_hf_model

    bert = tiny_hf_model("bert")
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2))
    for model, expected in ((bert, bert.bert.embeddings), (gpt2, gpt2.transformer.wte)):
        assert resolve_layer(model, "embeddings").module is expected
        assert embedding_layer(model, "embeddings") is expected
    assert resolve_layer(bert, bert.bert.encoder.layer[1]).index == 1
    assert resolve_layer(bert, bert.bert.embeddings).index is None
    assert resolve_layer(bert, 2 - 1) == resolve_layer(bert, bert.bert.encoder.layer[1])
