"""The keyword arguments of earlier versions: one conversion, a
DeprecationWarning naming the new form, and the same result."""

import inspect
from dataclasses import replace

import pytest

from captum_iba.metrics import DegradationOptions, Replacement, degradation_test
from captum_iba.metrics._compat import (
    OPTIONS_POSITION,
    _fold_progress,
    legacy_options,
)
from tests.metrics.bow import OPTIONS, PAD, SPECIALS, UNK, Tok, run


@pytest.mark.parametrize(
    "old, new",
    [
        (
            dict(tokenizer=Tok(), removal="mask", levels=[1, 2], level_unit="count"),
            DegradationOptions.for_tokenizer(
                Tok(), removal="mask", levels=[1, 2], level_unit="count"
            ),
        ),
        (
            dict(
                special_token_ids=SPECIALS,
                pad_token_id=PAD,
                unk_token_id=UNK,
                removal="unk",
                order="lerf",
                compute_sufficiency=False,
            ),
            DegradationOptions(
                special_token_ids=SPECIALS,
                pad_token_id=PAD,
                removal=Replacement(UNK, name="unk"),
                order="lerf",
                compute_sufficiency=False,
            ),
        ),
        (
            dict(
                tokenizer=Tok(),
                mask_token_id=7,
                removal="mask",
                length_convention="paper",
                max_examples_per_batch=1,
            ),
            DegradationOptions.for_tokenizer(
                Tok(),
                removal=Replacement(7, name="mask"),
                length_convention="paper",
                max_examples_per_batch=1,
            ),
        ),
        (dict(levels=0.5, removal=9), DegradationOptions(levels=[0.5], removal=9)),
    ],
)
def test_old_keywords_warn_and_give_the_same_result(bow, batch, old, new):
    meta = dict(method="IG", seed=3, settings={"steps": 5})
    with pytest.warns(DeprecationWarning, match="options=DegradationOptions") as w:
        before = run(bow, batch, options=None, **old, **meta)
    assert w[0].filename == run.__code__.co_filename  # at the caller of the test
    assert "metadata=" in str(w[0].message)
    after = run(
        bow,
        batch,
        new,
        metadata={"method": "IG", "seed": 3, "attribution": {"steps": 5}},
    )
    assert before.to_dict() == after.to_dict()
    assert legacy_options(old) == new


def test_old_metadata_keywords_alone(bow, batch):
    with pytest.warns(DeprecationWarning, match="metadata="):
        old = run(bow, batch, method="LIME")
    assert old.to_dict() == run(bow, batch, metadata={"method": "LIME"}).to_dict()


def test_old_and_new_forms_together_are_refused(bow, batch):
    with pytest.raises(TypeError, match="options= and the old keyword"):
        run(bow, batch, removal="delete")
    with pytest.raises(TypeError, match="metadata= and the old keyword"):
        run(bow, batch, metadata={"method": "a"}, method="b")


def test_old_option_errors_still_name_the_problem(bow, batch):
    with pytest.raises(ValueError, match="mask_token_id"):
        run(bow, batch, options=None, removal="mask")
    with pytest.raises(ValueError, match="needs explicit levels"):
        run(bow, batch, options=None, level_unit="count")


def test_the_signature_is_the_new_one():
    params = list(inspect.signature(degradation_test).parameters)
    assert params == [
        "forward_func",
        "inputs",
        "attributions",
        "target",
        "additional_forward_args",
        "attention_mask",
        "token_type_ids",
        "options",
        "metadata",
        "known",
    ]


def test_legacy_options_takes_one_mapping_of_old_keywords():
    assert legacy_options({}) == DegradationOptions()
    with pytest.raises(TypeError, match="'metadata'"):
        legacy_options({"metadata": {}})


@pytest.mark.parametrize("positional", [False, True])
def test_old_show_progress_keyword_folds_into_the_options(
    bow, batch, positional, capsys
):
    """``show_progress=`` (0.2) warns at the caller, names the new form and
    still shows the bar, with the options given by keyword or by position."""
    args = (bow, batch.ids, batch.scores, batch.target, None, batch.mask, batch.tt)
    kwargs = {} if positional else {"options": OPTIONS}
    args = args + (OPTIONS,) if positional else args
    capsys.readouterr()
    with pytest.warns(DeprecationWarning, match=r"show_progress=True\)") as w:
        old = degradation_test(*args, **kwargs, show_progress=True)
    assert w[0].filename == __file__
    assert "%|" in capsys.readouterr().err  # the bar
    assert old.to_dict() == run(bow, batch, OPTIONS).to_dict()
    kwargs["show_progress"] = True
    with pytest.warns(DeprecationWarning):
        args = _fold_progress(args, kwargs)
    options = args[OPTIONS_POSITION] if positional else kwargs["options"]
    assert options == replace(OPTIONS, show_progress=True)
    assert "show_progress" not in kwargs
