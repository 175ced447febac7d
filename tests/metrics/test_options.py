"""DegradationOptions: checked once (each bad value names its field),
normalised, frozen, built from a tokenizer once; the presets hold one."""

import dataclasses
from dataclasses import replace

import numpy as np
import pytest
import torch

from captum_iba.evaluation import presets
from captum_iba.metrics import (
    PAPER_LEVELS,
    DegradationOptions,
    Deletion,
    Replacement,
)
from tests.metrics.bow import CLS, MASK, PAD, SEP, UNK, Tok, run


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("levels", [0.5, 1.5], ValueError),
        ("levels", [-0.1], ValueError),
        ("levels", [float("nan")], ValueError),
        ("levels", [], ValueError),
        ("levels", ["a"], TypeError),
        ("level_unit", "percent", ValueError),
        ("length_convention", "x", ValueError),
        ("order", "random", ValueError),
        ("removal", "erase", ValueError),
        ("removal", True, ValueError),
        ("removal", "mask", ValueError),  # needs the tokenizer's id
        ("keep_special_tokens", "yes", ValueError),
        ("special_token_ids", [1, -2], ValueError),
        ("special_token_ids", "abc", ValueError),
        ("special_token_ids", [1.5], ValueError),
        ("pad_token_id", -1, ValueError),
        ("pad_token_id", 1.5, ValueError),
        ("compute_sufficiency", None, ValueError),
        ("max_examples_per_batch", 0, ValueError),
        ("max_examples_per_batch", 2.5, ValueError),
        ("max_tokens_per_batch", 0, ValueError),
        ("max_tokens_per_batch", None, ValueError),
        ("group_by_length", "no", ValueError),
        ("show_progress", None, ValueError),
    ],
)
def test_each_bad_field_is_named(field, value, error):
    with pytest.raises(error, match=field):
        DegradationOptions(**{field: value})


@pytest.mark.parametrize(
    "fields, says",
    [
        (dict(levels=[-1], level_unit="count"), "non-negative"),
        (dict(levels=[1.5], level_unit="count"), "non-negative"),
        (dict(level_unit="count"), "needs explicit levels"),
        (dict(levels=[0.5, 1.5]), "outside"),
        (dict(removal="unk"), "for_tokenizer"),
    ],
)
def test_messages_say_what_is_wrong(fields, says):
    with pytest.raises(ValueError, match=says):
        DegradationOptions(**fields)


def test_values_are_normalised():
    options = DegradationOptions(
        levels=torch.tensor([3, 1]),
        level_unit="count",
        special_token_ids=np.array([SEP, CLS, SEP]),
        pad_token_id=np.int64(PAD),
        keep_special_tokens=np.bool_(False),
    )
    assert options.levels == (3, 1) and all(type(v) is int for v in options.levels)
    assert options.special_token_ids == (CLS, SEP)
    assert type(options.pad_token_id) is int
    assert options.keep_special_tokens is False
    assert DegradationOptions(levels=0.5).levels == (0.5,)
    assert DegradationOptions(levels=None).levels == PAPER_LEVELS


def test_removal_names_become_strategies():
    assert DegradationOptions().removal == Deletion()
    assert DegradationOptions(removal="delete").removal == Deletion()
    assert DegradationOptions(removal=17).removal == Replacement(17)
    pad = DegradationOptions(removal="pad", pad_token_id=PAD).removal
    assert pad == Replacement(PAD, name="pad")


def test_frozen_hashable_and_replace_checks_again():
    options = DegradationOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.order = "lerf"  # type: ignore[misc]
    assert hash(options) == hash(DegradationOptions())
    assert replace(options, order="lerf").order == "lerf"
    with pytest.raises(ValueError, match="order"):
        replace(options, order="up")


def test_for_tokenizer_takes_the_ids_once():
    options = DegradationOptions.for_tokenizer(Tok(), removal="mask")
    assert options.special_token_ids == (CLS, SEP, MASK)  # UNK and PAD are no specials
    assert options.pad_token_id == PAD
    assert options.removal == Replacement(MASK, name="mask")
    unk = DegradationOptions.for_tokenizer(Tok(), removal="unk")
    assert unk.removal == Replacement(UNK, name="unk")
    # explicit values win
    mine = DegradationOptions.for_tokenizer(
        Tok(), special_token_ids=[7], pad_token_id=9
    )
    assert mine.special_token_ids == (7,) and mine.pad_token_id == 9
    assert DegradationOptions.for_tokenizer(None).special_token_ids is None

    class NoMask:
        pad_token_id, mask_token_id, unk_token_id = 0, None, 1
        all_special_ids = [0, 1]

    with pytest.raises(ValueError, match="mask token id"):
        DegradationOptions.for_tokenizer(NoMask(), removal="mask")


def test_with_tokenizer_fills_only_what_is_unset():
    options = DegradationOptions(length_convention="paper", special_token_ids=[5])
    filled = options.with_tokenizer(Tok(), order="lerf")
    assert filled.special_token_ids == (5,)
    assert filled.pad_token_id == PAD
    assert (filled.length_convention, filled.order) == ("paper", "lerf")
    with pytest.raises(ValueError, match="tokenizer_name"):
        options.with_tokenizer(Tok(), tokenizer_name="x")


def test_presets_hold_options():
    paper, fair = presets.PAPER.test, presets.FAIR.test
    assert isinstance(paper, DegradationOptions) and isinstance(
        fair, DegradationOptions
    )
    assert paper.removal == Deletion() and paper.levels == PAPER_LEVELS
    assert (paper.length_convention, fair.length_convention) == ("paper", "tokens")
    assert replace(fair, length_convention="paper") == paper
    # the old names, as the keyword arguments they were
    assert presets.PAPER_TEST_SETTINGS == dict(
        removal="delete",
        levels=list(PAPER_LEVELS),
        length_convention="paper",
        order="morf",
    )
    assert presets.FAIR_TEST_SETTINGS["length_convention"] == "tokens"


def test_old_preset_keywords_give_the_same_result(bow, batch):
    new = run(bow, batch, presets.PAPER.test.with_tokenizer(Tok()))
    with pytest.warns(DeprecationWarning):
        old = run(
            bow, batch, options=None, tokenizer=Tok(), **presets.PAPER_TEST_SETTINGS
        )
    assert old.to_dict() == new.to_dict()
