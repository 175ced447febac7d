"""Reading and replacing one tensor of a layer's output, or its input."""

import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from torch import nn

from captum_iba._utils.hooks import (
    recorded,
    replace_at,
    replaced_by_hook,
    replaced_input_by_hook,
    tensor_at,
    tensor_positions,
)


class TwoOut(nn.Module):
    def forward(self, x: torch.Tensor, scale: float = 1.0):
        return (x * scale, None, x.sum(-1), torch.ones(1))


class KwLayer(nn.Module):
    def forward(self, hidden_states: torch.Tensor, mask=None) -> torch.Tensor:
        return hidden_states * 2


class TestPositions(BaseTest):
    def test_tensor_positions(self) -> None:
        x = torch.ones(3, 4)
        self.assertEqual(tensor_positions(x), [None])
        out = TwoOut()(x)
        self.assertEqual(tensor_positions(out, batch=3), [0, 2])
        self.assertEqual(tensor_positions(out), [0, 2, 3])
        self.assertEqual(tensor_positions((None,)), [None])
        assertTensorAlmostEqual(self, tensor_at(out, 2), x.sum(-1))
        assertTensorAlmostEqual(self, tensor_at(out, None), x)

    def test_replace_at_repeats_the_other_batch_tensors(self) -> None:
        x = torch.arange(6.0).reshape(3, 2)
        out = TwoOut()(x)
        new = replace_at(out, 2, torch.zeros(6))
        self.assertEqual(tuple(new[0].shape), (6, 2))  # repeated for 2 copies
        assertTensorAlmostEqual(self, new[0][1], x[0])
        self.assertIsNone(new[1])
        assertTensorAlmostEqual(self, new[2], torch.zeros(6))
        self.assertEqual(tuple(new[3].shape), (1,))  # not a batch tensor
        self.assertIs(type(new), tuple)
        t = replace_at(x, None, torch.ones(3, 2, dtype=torch.float64))
        self.assertEqual(t.dtype, x.dtype)


class TestInputHook(BaseTest):
    def test_positional_and_keyword_hidden_states(self) -> None:
        layer = KwLayer()
        x = torch.ones(2, 3)
        with replaced_input_by_hook(layer, lambda h: h + 1):
            assertTensorAlmostEqual(self, layer(x), 4 * torch.ones(2, 3))
            assertTensorAlmostEqual(self, layer(hidden_states=x), 4 * torch.ones(2, 3))
            with self.assertRaisesRegex(TypeError, "hidden-state"):
                layer(hidden_states=None)
        self.assertFalse(layer._forward_pre_hooks)
        assertTensorAlmostEqual(self, layer(x), 2 * torch.ones(2, 3))

    def test_output_hook_at_a_position(self) -> None:
        layer = TwoOut()
        x = torch.ones(2, 3)
        with replaced_by_hook(layer, lambda t: t * 0, position=2):
            out = layer(x)
        assertTensorAlmostEqual(self, out[2], torch.zeros(2))
        assertTensorAlmostEqual(self, out[0], x)
        self.assertFalse(layer._forward_hooks)

    def test_recorded_keeps_keyword_inputs(self) -> None:
        layer = KwLayer()
        with recorded([layer]) as records:
            layer(hidden_states=torch.ones(2, 3))
        out, inp = records[layer].gathered(None)
        assertTensorAlmostEqual(self, inp, torch.ones(2, 3))
        assertTensorAlmostEqual(self, out, 2 * torch.ones(2, 3))
        self.assertFalse(layer._forward_hooks)

    def test_recorded_stops_the_forward_once_every_layer_ran(self) -> None:
        first, second, above = KwLayer(), KwLayer(), KwLayer()
        ran = []
        above.register_forward_pre_hook(lambda module, args: ran.append(1))
        model = nn.Sequential(first, second, above)
        with recorded([second, first], stop=True) as records:
            model(torch.ones(2, 3))
            ran.append("after")  # the with block ends at the stop
        self.assertEqual(ran, [])
        self.assertEqual([records[m].calls for m in (first, second)], [1, 1])
        assertTensorAlmostEqual(
            self, records[second].gathered(None)[0], 4 * torch.ones(2, 3)
        )
        self.assertFalse(first._forward_hooks or second._forward_hooks)
        with recorded([first]) as records:  # stop=False: the whole forward
            model(torch.ones(2, 3))
        self.assertEqual(ran, [1])

    def test_a_model_catching_errors_does_not_catch_the_stop(self) -> None:
        class Careful(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = KwLayer()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                try:
                    return self.inner(x) + 1
                except Exception:  # noqa: BLE001 - what some models do
                    return x

        model, after = Careful(), []
        with recorded([model.inner], stop=True) as records:
            model(torch.ones(1, 2))
            after.append(1)
        self.assertEqual((after, records[model.inner].calls), ([], 1))
