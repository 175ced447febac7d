"""Masks never go missing silently (issue #10, point 3): the attention mask is
found through the usual wrappers, and padding without a mask warns once."""

import functools
import warnings

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr._inputs import forward_signature
from captum_iba.attr._tokens import infer_token_mask, model_pad_token_id
from tests.helpers import no_hooks, tiny_hf_model

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


# ------------------------------------------------ masks of the wrong shape or values
def _attribute(fn, ids, extra=(), **kwargs):
    model = tiny_hf_model("bert")
    iba = InformationBottleneckAttribution(fn(model), model.bert.encoder.layer[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = iba.attribute(ids, target=0, additional_forward_args=extra, **FAST,
                            **kwargs)  # fmt: skip
    return out, [str(w.message) for w in caught], model


MODEL = lambda m: m  # noqa: E731
LAMBDA_MASK = lambda m: lambda i, mask: m(i, attention_mask=mask).logits  # noqa: E731


class TestWrongMasks(BaseTest):
    """Issue 20, items 3 and 9: a mask that cannot be the inputs' is refused
    (naming its shape), as is one whose values are not 0/1 (issue 31); the
    model is left as it was."""

    def test_wrong_shape_is_refused_naming_both_shapes(self) -> None:
        ids, mask = _padded()
        ones = torch.ones(3, 1, dtype=mask.dtype)
        for fn in (MODEL, LAMBDA_MASK):
            for bad in (torch.cat([mask, ones], 1), mask[:, :-1], mask[:, :1]):
                with self.subTest(shape=tuple(bad.shape)):
                    model = tiny_hf_model("bert")
                    with self.assertRaisesRegex(
                        ValueError,
                        rf"additional_forward_args\[0\] fills forward_func's "
                        rf"parameter (attention_)?mask with shape "
                        rf"\({bad.shape[0]}, {bad.shape[1]}\), but the token ids "
                        r"are \(3, 7\)",
                    ):
                        InformationBottleneckAttribution(
                            fn(model), model.bert.encoder.layer[1]
                        ).attribute(ids, target=0, additional_forward_args=(bad,))
                    self.assertTrue(no_hooks(model))

    def test_values_other_than_0_and_1_are_refused(self) -> None:
        """Issue 31, item 5: refused, as the degradation test refuses them (a
        warning said so, and the attribution went on without a mask)."""
        ids, mask = _padded()
        for bad, value in ((mask * 2, "2.0"), (mask * 0.5, "0.5")):
            for fn in (MODEL, LAMBDA_MASK):
                with self.subTest(value=value):
                    with self.assertRaisesRegex(
                        ValueError,
                        r"additional_forward_args\[0\] fills forward_func's "
                        rf"parameter (attention_)?mask but holds values other than "
                        rf"0 and 1 \(e.g. \[.*{value}\]\)",
                    ):
                        _attribute(fn, ids, (bad,))
        with self.assertRaisesRegex(ValueError, "token_mask must hold 1 .* 2.0"):
            _attribute(MODEL, ids, (mask,), token_mask=mask * 2)

    def test_a_mask_of_one_row_is_refused(self) -> None:
        """Issue 31, item 5: a (L,) mask for a batch of 3 warned 'no attention
        mask was found' and scored the other rows' padding as tokens."""
        ids, mask = _padded()
        for fn in (MODEL, LAMBDA_MASK):
            with self.subTest(fn=fn):
                with self.assertRaisesRegex(
                    ValueError,
                    r"mask with shape \(7,\), but the token ids are \(3, 7\).*"
                    r"mask.expand\(3, -1\)",
                ):
                    _attribute(fn, ids, (mask[0],))

    def test_no_token_is_named(self) -> None:
        """Issue 31, item 5: '0-length sequences, no mask' gave torch's
        reshape error."""
        ids, _ = _padded()
        with self.assertRaisesRegex(
            ValueError, r"inputs hold no token \(shape \(3, 0\)"
        ):
            _attribute(MODEL, ids[:, :0])

    def test_what_fills_a_mask_or_the_token_ids_is_checked(self) -> None:
        ids, mask = _padded()
        with self.assertRaisesRegex(
            TypeError, "parameter attention_mask: expected a Tensor .* str 'mask'"
        ):
            _attribute(MODEL, ids, "mask")
        with self.assertRaisesRegex(
            TypeError, r"inputs\[0\] fills forward_func's parameter input_ids: token"
        ):
            _attribute(MODEL, ids.float(), (mask,))

        def segments(m):
            return lambda i, token_type_ids: m(i, token_type_ids=token_type_ids)

        with self.assertRaisesRegex(TypeError, "parameter token_type_ids"):
            _attribute(segments, ids, ([0, 1],))


# ------------------------------------------------------- forwards that hide the mask
def _global_forward(ids):
    return _MODULE_MODEL(ids).logits


_MODULE_MODEL = None


class Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, ids):
        return self.inner(ids).logits


class TestHiddenMasks(BaseTest):
    """Issue 20, item 4: a forward that takes no mask on a padded batch warns,
    the pad id being found in the model it calls; one that holds a mask of its
    own is refused or its error says why."""

    def test_no_mask_on_padding_warns_for_every_kind_of_forward(self) -> None:
        ids, _ = _padded()

        def module_global(m):
            global _MODULE_MODEL
            _MODULE_MODEL = m
            return _global_forward

        forwards = {
            "lambda": lambda m: lambda i: m(i).logits,
            "nested function": lambda m: (lambda f: f)(lambda i: m(i).logits),
            "module-level function": module_global,
            "wrapping Module": Wrapper,
            "lambda *args": lambda m: lambda *a: m(a[0]).logits,
        }
        for name, fn in forwards.items():
            with self.subTest(name):
                out, said, _ = _attribute(fn, ids)
                self.assertEqual(len(said), 1, said)
                self.assertIn("pad token id (0)", said[0])
                self.assertIn("no attention mask was found", said[0])

    def test_a_bound_mask_is_refused(self) -> None:
        ids, mask = _padded()
        with self.assertRaisesRegex(ValueError, r"binds attention_mask= .*partial"):
            _attribute(lambda m: functools.partial(m, attention_mask=mask), ids)

    def test_a_mask_in_a_closure_gets_a_note(self) -> None:
        ids, mask = _padded()
        closure = lambda m: lambda i: m(i, attention_mask=mask).logits  # noqa: E731
        with self.assertRaises(Exception) as caught:
            _attribute(closure, ids)
        if hasattr(caught.exception, "add_note"):  # Python >= 3.11
            notes = " ".join(getattr(caught.exception, "__notes__", []))
            self.assertIn("3 x 2 rows of IBA's noise copies", notes)
            self.assertIn("additional_forward_args", notes)
