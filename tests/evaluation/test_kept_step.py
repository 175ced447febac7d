"""Issue 78's study candidates ``studylib.kept_step``: passes after one
deletion step on shorter prompts, on a fake scorer whose mask is known (a
token's id / 100), so every combination is an analytical expectation."""

import pytest
import torch

from captum_iba.attr.batches import AnswerScores, PromptBatch
from tests.helpers import study_module


class _Fake:
    """A one-step scorer whose mask is the token's id / 100."""

    settings: dict = {}
    pad_token_id = 0

    def attribute(self, batch):
        return AnswerScores(
            answer=batch.input_ids.float() / 100 * batch.scored, tokens=None
        )


def _batch():
    ids = torch.tensor([[5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 7],
                        [0, 0, 0, 0, 0, 11, 21, 31, 41, 51, 7]])  # fmt: skip
    mask = torch.tensor([[1] * 11, [0] * 5 + [1] * 6])
    scored = torch.tensor(
        [[False] + [True] * 9 + [False], [False] * 5 + [True] * 5 + [False]]
    )
    return PromptBatch(
        input_ids=ids, attention_mask=mask, labels=torch.full_like(ids, -100),
        scored=scored, prompts=["a", "b"],
    )  # fmt: skip


@pytest.mark.parametrize(
    "spec, rest_from, first_row",
    [
        # the top 2 of 9 (round(2.25)) out, counted 1; the rest (m + m) / 2
        ("rest:0.25", 0, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9, 0.95]),
        # the bottom 3 trimmed too: (m + 0) / 2
        ("rest:0.25:0.3", 0, [0.05, 0.1, 0.15, 0.4, 0.5, 0.6, 0.7, 0.9, 0.95]),
        # the rest by the last pass alone, below the top (2 + its first mask)
        ("rest:0.25::last", 0, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 2.8, 2.9]),
        # the first prompt alone is long enough: the second keeps one step's
        ("rest:0.33::last", 6, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 2.7, 2.8, 2.9]),
    ],
)
def test_the_passes_combine_as_documented(spec, rest_from, first_row):
    kept = study_module("kept_step")
    step = kept.KeptStep(_Fake(), kept.parse_passes(spec), rest_from)
    got = step.attribute(_batch()).answer
    assert torch.allclose(got[0, 1:10], torch.tensor(first_row), atol=1e-6)
    if rest_from:
        assert torch.allclose(got[1], _Fake().attribute(_batch()).answer[1])


def test_the_passes_are_parsed_named_and_refused():
    kept = study_module("kept_step")
    passes = kept.parse_passes("rest:0.25:0.3+rest:0.5:0.3")
    assert [p.stem for p in passes] == ["rest0.25-trim0.3", "rest0.5-trim0.3"]
    assert kept.parse_passes("rest:0.33::last")[0].stem == "rest0.33-last"
    assert kept.parse_passes("kept:0.5")[0].stem == "kept0.5"
    for bad in ("kept:0.5:0.1", "rest:0.25::first", "drop:0.5", "rest:0.2:0:last:x"):
        with pytest.raises(ValueError, match="--second"):
            kept.parse_passes(bad)
