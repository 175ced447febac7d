"""The degradation test's first pass, computed once (``original_logits_of``)
and given to the test (``known=KnownInputs(original_logits=...)``): identical
results, one pass."""

from dataclasses import replace

import pytest
import torch

from captum_iba.metrics import (
    DegradationOptions,
    KnownInputs,
    degradation_test,
    original_logits_of,
)
from captum_iba.metrics.degradation import same_first_pass
from tests.metrics.bow import MASK, SPECIALS


class _Counted(torch.nn.Module):
    """A model that counts the sequences it is called on."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        self.rows = 0

    def forward(self, *args):
        self.rows += args[0].shape[0]
        return self.model(*args)


BATCHINGS = [
    dict(),
    dict(max_examples_per_batch=1),
    dict(max_tokens_per_batch=17),
    dict(removal=MASK),
]


@pytest.mark.parametrize("batching", BATCHINGS, ids=lambda b: str(b) or "default")
@pytest.mark.parametrize("with_mask", [True, False])
def test_given_logits_give_identical_results(tiny_bert, batch, batching, with_mask):
    options = DegradationOptions(special_token_ids=SPECIALS, pad_token_id=0)
    options = replace(options, **batching)
    mask = batch.mask if with_mask else None
    model = _Counted(tiny_bert).eval()
    logits = original_logits_of(model, batch.ids, mask, batch.tt, options=options)
    first_pass = model.rows
    assert logits.shape == (2, 3) and logits.dtype == torch.float64
    own = degradation_test(
        model, batch.ids, batch.scores, batch.target, None, mask, batch.tt, options
    )
    model.rows = 0
    given = degradation_test(
        model,
        batch.ids,
        batch.scores,
        batch.target,
        None,
        mask,
        batch.tt,
        options,
        known=KnownInputs(original_logits=logits),
    )
    assert own.to_json() == given.to_json()
    assert first_pass == 2 and model.rows == own.num_instances * own.num_levels * 2


def test_given_logits_are_checked(tiny_bert, batch):
    call = dict(attention_mask=batch.mask, options=DegradationOptions())
    good = original_logits_of(tiny_bert, batch.ids, batch.mask)
    for bad, match in [
        (good[:1], r"shape \(1, 3\); expected \(2, C\)"),
        (good[0], r"shape \(3,\); expected \(2, C\)"),
        (good.clone().fill_(float("nan")), "NaN or infinite"),
    ]:
        with pytest.raises(ValueError, match=match):
            degradation_test(
                tiny_bert,
                batch.ids,
                batch.scores,
                known=KnownInputs(original_logits=bad),
                **call,
            )
    with pytest.raises(TypeError, match="must be a Tensor"):
        given = KnownInputs(original_logits=good.tolist())
        degradation_test(tiny_bert, batch.ids, batch.scores, known=given, **call)
    with pytest.raises(TypeError, match="known must be a KnownInputs"):
        degradation_test(tiny_bert, batch.ids, batch.scores, known=good, **call)


def test_same_first_pass_reads_only_what_decides_it():
    base = DegradationOptions(pad_token_id=0)
    assert same_first_pass(base, replace(base, levels=(1, 2), level_unit="count"))
    assert same_first_pass(base, replace(base, special_token_ids=[101, 102]))
    assert same_first_pass(base, replace(base, order="lerf"))
    assert not same_first_pass(base, replace(base, max_examples_per_batch=2))
    assert not same_first_pass(base, replace(base, pad_token_id=1))
    assert not same_first_pass(base, replace(base, removal=MASK))
