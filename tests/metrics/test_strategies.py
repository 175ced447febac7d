"""Removal strategies: what each one does to a tiny input, in closed form."""

from dataclasses import replace

import pytest
import torch

from captum_iba.metrics import (
    CustomRemoval,
    Deletion,
    Replacement,
    as_removal,
)
from tests.metrics.bow import (
    CLS,
    MASK,
    OPTIONS,
    PAD,
    SEP,
    SPECIALS,
    UNK,
    NoMaskBagOfWords,
    Tok,
    bow_prob,
    counts,
    expected_curve,
    run,
)

IDS = torch.tensor([[CLS, 5, 6, 7, SEP], [CLS, 8, 9, SEP, PAD]])
REMOVED = torch.tensor([[0, 1, 0, 1, 0], [0, 0, 1, 0, 0]], dtype=torch.bool)


def test_replacement_by_hand():
    out = Replacement(MASK, name="mask").apply(IDS, REMOVED)
    assert out.tolist() == [[CLS, MASK, 6, MASK, SEP], [CLS, 8, MASK, SEP, PAD]]
    assert IDS[0, 1] == 5  # the input is left as it was


def test_named_replacements_come_from_the_tokenizer():
    tok = Tok()
    assert Replacement.mask(tok) == Replacement(MASK, name="mask")
    assert Replacement.pad(tok) == Replacement(PAD, name="pad")
    assert Replacement.unk(tok) == Replacement(UNK, name="unk")
    assert Replacement.mask(tok).record() == {"removal": "mask", "replacement_id": MASK}

    class NoUnk:
        unk_token_id = None

    with pytest.raises(ValueError, match="no unk token"):
        Replacement.unk(NoUnk())
    with pytest.raises(ValueError, match="token must be one of"):
        Replacement.from_tokenizer(tok, "cls")


@pytest.mark.parametrize("bad", [-1, 2.5, True, None, "3"])
def test_replacement_id_is_checked(bad):
    with pytest.raises(ValueError, match="Replacement.token_id"):
        Replacement(bad)


def test_replacement_name_is_checked():
    with pytest.raises(ValueError, match="Replacement.name"):
        Replacement(3, name="delete")
    with pytest.raises(ValueError, match="Deletion.pad_token_id"):
        Deletion(pad_token_id=-2)


def test_replacement_outside_the_vocabulary_is_refused(tiny_bert, batch):
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        run(tiny_bert, batch, replace(OPTIONS, removal=Replacement(10**6)))


def test_custom_removal_by_hand(bow, batch):
    """A substitute per token: id 10 + id % 3 (closed form by hand)."""

    def substitute(ids, removed):
        return torch.where(removed, 10 + ids % 3, ids)

    res = run(bow, batch, counts(1, 2, 4, removal=CustomRemoval(substitute)))
    exp = expected_curve(
        bow, batch, [[1, 2, 4]] * 2, mode=lambda tok, pos: 10 + tok % 3
    )
    torch.testing.assert_close(res.probs, exp)
    assert res.settings["removal"] == "custom"
    assert res.settings["replacement_id"] is None
    assert res.settings["removal_func"].endswith("substitute")


def test_custom_removal_equal_to_replacement(bow, batch):
    """Only the removed positions of the function's output are used."""
    unk = run(bow, batch, replace(OPTIONS, removal=Replacement(UNK)))
    custom = run(
        bow, batch, replace(OPTIONS, removal=lambda ids, _: torch.full_like(ids, UNK))
    )
    for name in ("probs", "kept_probs", "preds", "log_odds", "n_removed"):
        assert torch.equal(getattr(unk, name), getattr(custom, name)), name
    out = CustomRemoval(lambda ids, _: torch.full_like(ids, UNK)).apply(IDS, REMOVED)
    assert out.tolist() == [[CLS, UNK, 6, UNK, SEP], [CLS, 8, UNK, SEP, PAD]]


def test_custom_removal_gets_cpu_ids_and_positions(bow, batch):
    """The function sees (N, L) long ids and bool positions, never a padding or
    special position; rows are jobs (instance, level, keep-only)."""
    seen = []

    def spy(ids, removed):
        seen.append((ids.clone(), removed.clone()))
        return ids.masked_fill(removed, UNK)

    run(bow, batch, counts(1, 3, removal=CustomRemoval(spy, label="spy")))
    assert seen
    for ids, removed in seen:
        assert ids.dtype == torch.long and removed.dtype == torch.bool
        assert ids.device.type == "cpu" and ids.shape == removed.shape
        assert ids.shape[1] == batch.ids.shape[1]
        assert not removed[ids == PAD].any()
        assert not removed[torch.isin(ids, torch.tensor(SPECIALS))].any()
    # every job once: the 2 originals (nothing removed), then 2 instances x 2
    # levels x (removal, keep-only)
    assert not seen[0][1].any() and seen[0][0].shape[0] == 2
    assert sum(ids.shape[0] for ids, _ in seen) == 2 + 2 * 2 * 2


@pytest.mark.parametrize(
    "func, says",
    [
        (lambda ids, removed: ids[:, :-1], "shape"),
        (lambda ids, removed: ids.float(), "integer"),
        (lambda ids, removed: ids.tolist(), "tensor"),
    ],
)
def test_custom_removal_output_is_checked(bow, batch, func, says):
    with pytest.raises(ValueError, match=says):
        run(bow, batch, replace(OPTIONS, removal=CustomRemoval(func)))


def test_custom_removal_needs_a_function():
    with pytest.raises(ValueError, match="CustomRemoval.func"):
        CustomRemoval(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="CustomRemoval.func"):
        CustomRemoval(Replacement)  # type: ignore[arg-type]


def test_deletion_fill_by_hand(batch):
    """A model that sees padding sees deletion's fill in the freed tail."""
    model = NoMaskBagOfWords(seed=3).eval()
    options = counts(1, group_by_length=False, removal=Deletion(pad_token_id=7))
    res = run(model, batch, options, attention_mask=None, token_type_ids=None)
    # k = 1: instance 0 keeps 9 tokens (the batch's width), instance 1 keeps 6
    # and gets 3 fill tokens
    kept1 = [CLS, 12, 13, 14, 15, SEP]
    expected = bow_prob(model, kept1 + [7] * 3, [0] * 9, 2)
    assert res.probs[1, 0].item() == pytest.approx(expected, abs=1e-12)
    assert res.settings["fill_token_id"] == 7
    assert res.settings["removal"] == "delete"
    default = run(
        model,
        batch,
        replace(options, removal=Deletion()),
        attention_mask=None,
        token_type_ids=None,
    )
    assert default.probs[1, 0].item() == pytest.approx(
        bow_prob(model, kept1 + [PAD] * 3, [0] * 9, 2), abs=1e-12
    )
    assert "fill_token_id" not in default.settings


@pytest.mark.parametrize(
    "given, kwargs, expected",
    [
        ("delete", {}, Deletion()),
        (Deletion(5), {}, Deletion(5)),
        (17, {}, Replacement(17)),
        ("mask", dict(mask_token_id=MASK), Replacement(MASK, name="mask")),
        ("pad", dict(pad_token_id=PAD), Replacement(PAD, name="pad")),
        ("unk", dict(tokenizer=Tok()), Replacement(UNK, name="unk")),
        ("unk", dict(tokenizer=Tok(), unk_token_id=9), Replacement(9, name="unk")),
    ],
)
def test_as_removal_converts_the_old_names(given, kwargs, expected):
    assert as_removal(given, **kwargs) == expected


def test_as_removal_refuses():
    with pytest.raises(ValueError, match="unknown removal mode 'erase'"):
        as_removal("erase")
    with pytest.raises(ValueError, match="mask token id"):
        as_removal("mask")
    with pytest.raises(ValueError, match="unknown removal mode"):
        as_removal(None)  # type: ignore[arg-type]
