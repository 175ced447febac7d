"""Masks never go missing silently (issue #10, point 3): the attention mask is
found through the usual wrappers, and padding without a mask warns once."""

import functools
import warnings

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr._inputs import (
    forward_signature,
    infer_token_mask,
    model_pad_token_id,
)
from tests.helpers import tiny_hf_model

FAST = dict(steps=2, n_samples=2, seed=0)


def _padded(pad_id: int = 0):
    torch.manual_seed(3)
    ids = torch.randint(5, 60, (3, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    ids[mask == 0] = pad_id
    return ids, mask


def _wrappers(model):
    return {
        "model": model,
        "torch.compile": torch.compile(model, backend="eager"),
        "DataParallel": torch.nn.DataParallel(model),
        "DataParallel.forward": torch.nn.DataParallel(model).forward,
        "bound method": model.forward,
        "functools.partial": functools.partial(model, return_dict=True),
        "lambda ids, mask": lambda ids, mask: model(ids, attention_mask=mask).logits,
        "lambda *args": lambda *a: model(a[0], attention_mask=a[1]).logits,
        "lambda i, m": lambda i, m: model(i, attention_mask=m).logits,
    }


class TestMaskFound(BaseTest):
    def setUp(self) -> None:
        super().setUp()
        self.model = tiny_hf_model("bert")
        self.ids, self.mask = _padded()

    def test_found_through_every_wrapper(self) -> None:
        for name, fn in _wrappers(self.model).items():
            with self.subTest(name):
                found = infer_token_mask(fn, (self.ids, self.mask), pad_id=0)
                self.assertIs(found, self.mask)

    def test_not_taken_from_other_arguments(self) -> None:
        segments = torch.zeros_like(self.ids)
        segments[:, 4:] = 1

        def by_segment(ids, token_type_ids):
            return self.model(ids, token_type_ids=token_type_ids).logits

        self.assertIsNone(infer_token_mask(by_segment, (self.ids, segments), 0))
        # named token_type_ids: never a mask, even when it looks like one
        self.assertIsNone(infer_token_mask(by_segment, (self.ids, self.mask), 0))
        # *args: a second 0/1 tensor whose zeros are not all pad tokens
        anon = lambda *a: self.model(a[0], token_type_ids=a[1]).logits  # noqa: E731
        self.assertIsNone(infer_token_mask(anon, (self.ids, segments), 0))
        self.assertIs(infer_token_mask(anon, (self.ids, self.mask), None), self.mask)
        self.assertIsNone(infer_token_mask(anon, (self.ids, self.mask), 7))

    def test_signature_of_partial_skips_bound_arguments(self) -> None:
        def f(a, b, attention_mask=None):
            return a

        self.assertEqual(
            forward_signature(functools.partial(f, 1)), ["b", "attention_mask"]
        )
        self.assertEqual(
            forward_signature(functools.partial(f, b=1)), ["a", "attention_mask"]
        )
        self.assertEqual(model_pad_token_id(torch.nn.DataParallel(self.model)), 0)
        self.assertIsNone(model_pad_token_id(lambda x: x))

    def test_batch_invariance_for_every_wrapper(self) -> None:
        layer = self.model.bert.encoder.layer[1]
        alone_ids, alone_mask = self.ids[2:, :3], self.mask[2:, :3]
        ref = InformationBottleneckAttribution(self.model, layer).attribute(
            alone_ids, target=1, additional_forward_args=(alone_mask,), **FAST
        )
        for name, fn in _wrappers(self.model).items():
            with self.subTest(name), warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                batch = InformationBottleneckAttribution(fn, layer).attribute(
                    self.ids, target=1, additional_forward_args=(self.mask,), **FAST
                )
                # no pad warning: the mask was found
                self.assertFalse([x for x in w if "token_mask=" in str(x.message)])
                self.assertEqual(batch[self.mask == 0].abs().sum().item(), 0.0)
                assertTensorAlmostEqual(self, batch[2:, :3], ref, 1e-4, "max")


class TestPaddingWithoutMaskWarns(BaseTest):
    def test_warns_once_naming_token_mask(self) -> None:
        model = tiny_hf_model("bert")
        ids, mask = _padded()
        layers = [model.bert.encoder.layer[0], model.bert.encoder.layer[1]]
        iba = InformationBottleneckAttribution(model, layers)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            iba.attribute(ids, target=0, internal_batch_size=2, **FAST)
        messages = [str(w.message) for w in caught if "token_mask=" in str(w.message)]
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("pad token id (0)", messages[0])
        self.assertTrue(caught[0].filename.endswith("test_masks.py"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            iba.attribute(ids, target=0, token_mask=mask, **FAST)
            iba.attribute(ids[:, :3], target=0, **FAST)  # no pad id: no warning
