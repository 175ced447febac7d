"""degradation_test refuses bad input, and a model with NaN weights, with a
message naming the problem (P8, P10)."""

import pytest
import torch

from captum_iba import degradation_test
from captum_iba.metrics import DegradationOptions
from tests.helpers import tiny_hf_model

IDS = torch.randint(5, 50, (2, 6), generator=torch.Generator().manual_seed(0))
SCORES = torch.rand(2, 6, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_hf_model("bert")


@pytest.mark.parametrize(
    "call, fields, error, says",
    [
        (
            dict(inputs=IDS[:, :0], attributions=SCORES[:, :0]),
            {},
            ValueError,
            "no token",
        ),
        ({}, dict(levels=[float("inf")], level_unit="count"), ValueError, "integers"),
        ({}, dict(levels=[float("nan")], level_unit="count"), ValueError, "integers"),
        ({}, dict(removal=1000), ValueError, "vocabulary"),
        ({}, dict(removal=-3), ValueError, "vocabulary"),
        (dict(attributions=SCORES.to(torch.complex64)), {}, TypeError, "complex"),
        ({}, dict(max_examples_per_batch=2.5), ValueError, "max_examples_per_batch"),
        (dict(attention_mask=torch.zeros_like(IDS)), {}, ValueError, "all padding"),
    ],
)
def test_bad_input_is_refused(model, call, fields, error, says):
    """Data faults are refused by the test, option faults by DegradationOptions
    (built inside the ``raises`` block)."""
    call = dict(dict(inputs=IDS, attributions=SCORES, target=0), **call)
    with pytest.raises(error, match=says):
        degradation_test(model, options=DegradationOptions(**fields), **call)


def test_nan_weights_are_not_all_nan_results():
    model = tiny_hf_model("bert")
    with torch.no_grad():
        model.bert.encoder.layer[0].output.dense.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="NaN or infinite logits"):
        degradation_test(model, IDS, SCORES, target=0)


@pytest.mark.parametrize("length", [513, 600, 10_000])
def test_lengths_past_the_positions_are_named(model, length):
    """Issue 20, item 7: the length is checked as in IBA, not left to the
    model ("expanded size ... (512)")."""
    ids = torch.randint(5, 50, (1, length), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=f"{length} tokens, more than the model's 512"):
        degradation_test(model, ids, torch.rand(1, length), target=0)


def test_roberta_counts_its_positions_from_the_pad_id():
    roberta = tiny_hf_model("roberta")  # 40 position entries, pad id 1: 38 tokens
    ids = torch.randint(5, 50, (1, 39), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="39 tokens, more than the model's 38"):
        degradation_test(roberta, ids, torch.rand(1, 39), target=0)
    degradation_test(roberta, ids[:, :38], torch.rand(1, 38), target=0, levels=[0.5])


@pytest.mark.parametrize("value", [2, 0.5, -1])
def test_mask_values_other_than_0_and_1_are_refused(model, value):
    """Issue 20, item 11: a mask holding 2 or 0.5 is named, not used."""
    mask = torch.ones_like(IDS, dtype=torch.float)
    mask[0, -1] = value
    with pytest.raises(ValueError, match=f"attention_mask must hold 1 .* {value:g}"):
        degradation_test(model, IDS, SCORES, target=0, attention_mask=mask)
