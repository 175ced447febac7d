"""Tests of the shared conventions in ``captum_iba._utils.common``."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from captum_iba._utils.common import (
    check_target_range,
    format_target,
    hf_call,
    instance_seed,
    logits_of,
    model_device,
    pad_token_id,
    removable_mask,
    special_token_ids,
    tokenizer_ids,
)


@pytest.mark.parametrize(
    "target, expected",
    [
        (1, [1, 1, 1]),
        (torch.tensor(2), [2, 2, 2]),
        (torch.tensor([0]), [0, 0, 0]),
        ([0, 1, 2], [0, 1, 2]),
        (torch.tensor([2, 0, 1]), [2, 0, 1]),
        (torch.tensor([1.0, 0.0, 1.0]), [1, 0, 1]),
        ((1, 0), [[1, 0]] * 3),
        ([(0, 1), (1, 1), (2, 0)], [[0, 1], [1, 1], [2, 0]]),
    ],
)
def test_format_target_forms(target, expected):
    assert format_target(target, 3).tolist() == expected


def test_format_target_errors():
    assert format_target(None, 4) is None
    with pytest.raises(ValueError, match="2 entries but inputs have 3 instances"):
        format_target([0, 1], 3)
    with pytest.raises(TypeError, match="integer"):
        format_target(True, 3)
    with pytest.raises(TypeError, match="integer"):
        format_target(torch.tensor([0.5, 1.0, 0.0]), 3)
    with pytest.raises(TypeError, match="integer"):
        format_target("1", 3)
    with pytest.raises(ValueError, match="scalar or 1-D"):
        format_target(torch.zeros(3, 2, dtype=torch.long), 3)


def test_check_target_range_names_the_instance():
    check_target_range(torch.tensor([0, 1]), (2, 2))
    with pytest.raises(ValueError, match="target 5 for instance 1 is out of range"):
        check_target_range(torch.tensor([0, 5]), (2, 3))
    with pytest.raises(ValueError, match="expected 2 index"):
        check_target_range(torch.tensor([0, 1]), (2, 3, 4))
    check_target_range(torch.tensor([[0, 3], [1, 0]]), (2, 3, 4))


def test_logits_of_every_output_form():
    t = torch.ones(2, 3)
    assert logits_of(t) is t
    assert logits_of(SimpleNamespace(logits=t)) is t
    assert logits_of({"logits": t}) is t
    assert logits_of((t, None)) is t
    with pytest.raises(TypeError, match="logits"):
        logits_of("nope")


def test_tokenizer_ids_exclude_unk_and_pad():
    tok = SimpleNamespace(
        pad_token_id=0, mask_token_id=4, unk_token_id=1, all_special_ids=[0, 1, 2, 3, 4]
    )
    ids = tokenizer_ids(tok)
    assert ids["special_token_ids"] == [2, 3, 4]
    assert (ids["pad_token_id"], ids["mask_token_id"], ids["unk_token_id"]) == (0, 4, 1)
    assert special_token_ids(tok) == [2, 3, 4]
    assert special_token_ids(tok, [9, 8, 9]) == [8, 9]
    assert special_token_ids(None) == []
    assert pad_token_id(tok) == 0 and pad_token_id(tok, 7) == 7
    assert pad_token_id(None) == 0 and pad_token_id(None, default=None) is None


def test_hf_call_positional_order_and_device():
    seen = []

    def forward(*args):
        seen.append(args)
        return {"logits": torch.zeros(1, 2)}

    ids = torch.tensor([[5, 6]])
    hf_call(forward, ids)
    hf_call(forward, ids, token_type_ids=torch.zeros_like(ids), extra=("x",))
    assert len(seen[0]) == 1
    _, mask, tt, extra = seen[1]
    assert mask.tolist() == [[1, 1]] and tt.tolist() == [[0, 0]] and extra == "x"
    assert model_device(nn.Linear(2, 2)) == torch.device("cpu")
    assert model_device(lambda x: x, torch.device("meta")) == torch.device("meta")


def test_instance_seed_depends_on_seed_and_tokens_only():
    ids = torch.tensor([101, 7, 8, 102])
    assert instance_seed(0, ids) == instance_seed(0, ids.int().clone())
    assert instance_seed(0, ids) != instance_seed(1, ids)
    assert instance_seed(0, ids) != instance_seed(0, ids.flip(0))
    assert 0 <= instance_seed(-5, ids) < 2**63


def test_removable_mask_is_real_and_not_special():
    """The one definition of the tokens a removal may take, used by IBA, the
    scorers and the degradation test alike."""
    from captum_iba.attr._tokens import removable_mask as in_attr
    from captum_iba.metrics._inputs import token_batch
    from captum_iba.metrics.options import DegradationOptions

    ids = torch.tensor([[2, 7, 8, 3, 0], [2, 9, 3, 0, 0]])
    mask = (ids != 0).long()
    expected = [[False, True, True, False, False], [False, True, False, False, False]]
    assert removable_mask(ids, mask, [2, 3]).tolist() == expected
    assert removable_mask(ids, None, [])[0].all()
    assert removable_mask(ids, mask, ()).tolist() == mask.bool().tolist()
    assert in_attr is removable_mask
    for keep in (True, False):
        options = DegradationOptions(special_token_ids=[2, 3], keep_special_tokens=keep)
        batch = token_batch(ids, mask, None, None, options)
        special = [2, 3] if keep else []
        assert torch.equal(batch.removable, removable_mask(ids, mask, special))
