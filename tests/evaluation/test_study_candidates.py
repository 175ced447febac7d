"""Smoke test of the faithfulness study (issue #12): every anchor and every IBA
candidate of ``experiments/faithfulness_study.py`` runs on a tiny model, and
the ``iba-faithful`` scorer is built from the registry and the suite."""

import numpy as np
import pytest
import torch

from captum_iba.attr.options import FAITHFUL
from captum_iba.evaluation import (
    IBAScorer,
    Resources,
    attnlrp_available,
    build_scorers,
    make_scorers,
    scorer_class,
)
from tests.evaluation.conftest import check_scores
from tests.helpers import experiment


@pytest.fixture(scope="module")
def study():
    return experiment("faithfulness_study")


def _enc(batch):
    ids, mask, tt = batch
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": None,
        "labels": torch.tensor([1, 0, 1]),
        "rows": [0, 1, 2],
    }


def test_every_candidate_runs(study, model, tokenizer, batch):
    enc = _enc(batch)
    anchors = [a for a in study.ANCHORS if a != "AttnLRP" or attnlrp_available()[0]]
    few = {"LIME": 20, "kernel-shap": 20, "shapley": 2}  # samples: a smoke test
    candidates = {name: None for name in anchors}
    candidates.update(study.iba_grid(n_layers=2))
    assert any(c and c.get("faithful") for c in candidates.values())
    for name, config in candidates.items():
        options = {"n_samples": few[name]} if name in few else None
        scorer = study.build_scorer(name, model, tokenizer, config, options)
        scores, cpu = study.score(scorer, enc, batch_size=2)
        check_scores(scores, enc["input_ids"], enc["attention_mask"])
        assert len(cpu) == 3 and all(c >= 0 for c in cpu)
        rows = study.per_instance(study.fair_test(model, tokenizer, enc, scores, name))
        assert set(rows) == {"drop11", "aopc", "comprehensiveness", "sufficiency"}
        assert all(np.isfinite(v).all() and len(v) == 3 for v in rows.values())


def test_chosen_layer_is_the_best_on_the_search(study, tmp_path):
    import json

    folder = tmp_path / "sst2" / "search"
    folder.mkdir(parents=True)
    for layer, aopc in ((1, 0.2), (2, 0.4), (3, 0.3)):
        name = f"iba-faithful l{layer}"
        record = {"method": name, "aopc": [aopc, aopc]}
        (folder / f"{layer}.json").write_text(json.dumps(record))
    chosen = study.chosen_layers(tmp_path, "sst2")
    assert chosen["iba-faithful (l2, chosen)"] == {"layer": 2, "faithful": True}


def test_iba_faithful_in_the_registry_and_the_suite(model, tokenizer, batch):
    ids, mask, tt = batch
    assert scorer_class("IBA-Faithful") is IBAScorer  # one class, two entries
    layer = model.bert.encoder.layer[0]
    scorers = make_scorers(
        model, tokenizer, "fair", methods=["iba-faithful"], layer=layer
    )
    scorer = scorers["iba-faithful"]
    assert scorer.name == "iba-faithful"
    for key, value in FAITHFUL.record().items():
        expected = 0 if key == "seed" else value  # the harness seeds with 0
        assert scorer.settings[key] == expected, key
    target = torch.tensor([1, 0, 1])
    scores = scorer.attribute(ids, target, mask)
    check_scores(scores, ids, mask)
    # the readout is the mean mask: in (0, 1) at real tokens (its mean over
    # the features, issue 31 item 16)
    assert (scores[mask.bool()] > 0).all()
    assert (scores <= 1).all()
    # without a layer the resolver gives it the default one, with its index:
    # never the last (issue 31: a two-layer model's is 0)
    default = make_scorers(model, tokenizer, "fair", methods=["iba-faithful"])
    assert default["iba-faithful"].settings["layer_index"] == 0
    # priors given for all apply to every method that takes one ...
    res = Resources(model, tokenizer, layer=0, prior=["paper", "reference"])
    built = build_scorers(["iba-faithful", "IBA"], res)
    assert list(built) == [
        "iba-faithful (paper)",
        "iba-faithful (reference)",
        "IBA (paper)",
        "IBA (reference)",
    ]
    assert built["iba-faithful (reference)"].settings["prior"] == "reference"
    # ... and priors given for IBA alone leave iba-faithful's own
    res = Resources(model, tokenizer, layer=0)
    two = {"IBA": {"prior": ["paper", "reference"]}}
    built = build_scorers(["iba-faithful", "IBA"], res, method_options=two)
    assert list(built) == ["iba-faithful", "IBA (paper)", "IBA (reference)"]
    assert built["iba-faithful"].settings["layer_index"] == 0
    assert built["iba-faithful"].settings["prior"] == "baseline"


def test_amortized_candidate_is_fitted_cached_and_scored(
    study, model, tokenizer, batch, tmp_path, monkeypatch
):
    """An ``iba-amortized`` candidate: its explainer is fitted on the training
    batches, cached under ``--out/explainers`` (a second run loads it), scored
    and tested like every method; the record names the fit."""
    import json

    ids, mask, _ = batch
    train = [{"input_ids": ids, "attention_mask": mask, "labels": ids[:, 1] % 2}]
    monkeypatch.setattr(study, "train_batches", lambda *a, **k: train)
    enc = _enc(batch)
    config = {"layer": 0, "amortized": True, "n_train": 3, "settings": {"epochs": 1}}
    name = "iba-amortized (l0)"
    rec = study.run_method(
        "sst2", "search", name, tmp_path, model, tokenizer, enc, config
    )
    assert rec["settings"]["method"] == name and rec["settings"]["refine_steps"] == 0
    assert rec["settings"]["fit"]["instances"] == 3
    assert rec["iba"] == config and len(rec["aopc"]) == 3
    (folder,) = (tmp_path / "explainers").iterdir()
    assert (folder / "explainer.json").is_file()
    refined = dict(config, refine_steps=1)
    rec2 = study.run_method(
        "sst2", "search", name + " r1", tmp_path, model, tokenizer, enc, refined
    )
    assert rec2["settings"]["refine_steps"] == 1
    assert len(list((tmp_path / "explainers").iterdir())) == 1  # loaded, not refit
    assert json.loads(
        (tmp_path / "sst2" / "search" / f"{study._slug(name)}.json").read_text()
    )
