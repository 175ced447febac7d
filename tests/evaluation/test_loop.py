"""The one corpus loop: typed records between its steps, and the original
logits computed once per unit for the rows and every method's test."""

from types import SimpleNamespace

import pytest
import torch

from captum_iba.evaluation import make_scorers
from captum_iba.evaluation.loop import (
    CorpusJob,
    ScorerCall,
    UnitTensors,
    run_units,
    score_unit,
    scorer_degradation,
    unit_tensors,
    work_units,
)
from captum_iba.metrics._removal import Runner

TEXTS = ["the movie was great!", "playing it", "not bad , i liked it .", "bad", "a"]


class _Data(SimpleNamespace):
    def __len__(self) -> int:
        return len(self.texts)


@pytest.fixture
def job(model, tokenizer):
    data = _Data(texts=TEXTS, text_pairs=None, labels=[1, 0, 1, 0, 1])
    scorers = make_scorers(model, tokenizer, "fair", methods=["random", "IG", "LOO"])
    return CorpusJob(model, tokenizer, data, scorers, batch_size=3, degradation=True)


@pytest.fixture
def first_passes(monkeypatch):
    """Counts the degradation test's first passes (the original inputs)."""
    calls = []
    run = Runner.run_originals

    def counted(self):
        calls.append(self.batch.input_ids.shape[0])
        return run(self)

    monkeypatch.setattr(Runner, "run_originals", counted)
    return calls


@pytest.mark.parametrize("target", ["label", "predicted"])
def test_unit_tensors_are_one_typed_record(job, target):
    job.target = target
    indices = work_units(job.data, job.batch_size)[1]
    unit = unit_tensors(job, indices)
    assert isinstance(unit, UnitTensors) and isinstance(unit.call, ScorerCall)
    assert unit.indices == list(indices)
    assert unit.call.input_ids.shape == unit.call.attention_mask.shape
    assert unit.call.token_type_ids is None  # single sentences
    assert unit.original_logits.shape == (len(indices), 2)
    assert unit.original_logits.dtype == torch.float64
    expected = (
        torch.tensor([job.data.labels[i] for i in indices])
        if target == "label"
        else unit.original_logits.argmax(-1)
    )
    assert torch.equal(unit.call.target, expected)
    part = unit.call.part(slice(1, None))
    assert torch.equal(part.input_ids, unit.call.input_ids[1:])
    assert part.token_type_ids is None


def test_the_original_logits_are_computed_once_per_unit(job, first_passes):
    results = run_units(job)
    units = work_units(job.data, job.batch_size)
    assert first_passes == [len(u) for u in units]  # not once more per method
    assert set(results) == {"random", "IG", "LOO"}


def test_a_test_given_the_units_logits_gives_the_same_result(job, first_passes):
    unit = unit_tensors(job, work_units(job.data, job.batch_size)[0])
    for done in score_unit(job, unit, list(job.scorers)):
        own = scorer_degradation(
            job.model,
            done.method,
            job.scorers[done.method],
            done.scores,
            unit.call,
            tokenizer=job.tokenizer,
            setting=job.preset,
        )
        assert own.to_json() == done.result.to_json()
    assert len(first_passes) == 1 + len(job.scorers)  # the unit's, then each own
    given = scorer_degradation(
        job.model,
        done.method,
        job.scorers[done.method],
        done.scores,
        unit,  # its logits: no first pass of its own
        tokenizer=job.tokenizer,
        setting=job.preset,
    )
    assert given.to_json() == done.result.to_json()
    assert len(first_passes) == 1 + len(job.scorers)


def test_a_scorer_with_a_pad_id_of_its_own_runs_its_own_first_pass(job, first_passes):
    job.scorers["random"].pad_token_id = 7
    unit = unit_tensors(job, work_units(job.data, job.batch_size)[0])
    score_unit(job, unit, list(job.scorers))
    assert len(first_passes) == 2  # the unit's and random's


def test_scorer_degradation_takes_the_tuple_of_earlier_releases(job):
    unit = unit_tensors(job, work_units(job.data, job.batch_size)[0])
    scorer = job.scorers["random"]
    scores = unit.call.scores(scorer)
    call = unit.call
    as_tuple = (call.input_ids, call.target, call.attention_mask, None)
    old = scorer_degradation(job.model, "random", scorer, scores, as_tuple)
    new = scorer_degradation(job.model, "random", scorer, scores, call)
    assert old.to_json() == new.to_json()
