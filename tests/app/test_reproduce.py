"""Smoke tests of :mod:`captum_iba.app.reproduce` on a tiny random model.

They check that every part runs and writes what the docs say (numbers from a
random model mean nothing); the real runs are in ``docs/results.rst``.
"""

import argparse
import json

import pytest

from captum_iba import DegradationResult
from captum_iba.app import outputs
from captum_iba.app import reproduce as reproduce_module


@pytest.fixture
def reproduce(tiny_model_dir, monkeypatch):
    from captum_iba.app.data import default_data_dir

    try:
        default_data_dir()
    except FileNotFoundError as err:
        pytest.skip(f"needs the shared corpora: {err}")
    module = reproduce_module
    monkeypatch.setattr(
        module, "get_finetuned_model", lambda corpus, **settings: tiny_model_dir
    )
    monkeypatch.setitem(
        module.PROFILES,
        "tiny",
        {
            "n": {"sst2": 6, "rte": 4},
            "max_length": {"sst2": 32, "rte": 48},
            "lime_max_length": {"sst2": 32, "rte": 48},
            "sweep_n": 4,
            "batch_size": 4,
        },
    )
    return module


def test_table_writes_rows_figures_and_results(reproduce, tmp_path):
    out = tmp_path / "results"
    (out / "json").mkdir(parents=True)
    args = argparse.Namespace(
        datasets=["sst2", "rte"], settings=["paper", "fair"], fair_prior="paper"
    )
    reproduce.run_table(args, reproduce.PROFILES["tiny"], out)

    rows = json.loads((out / "table1.json").read_text())
    assert {(r["corpus"], r["setting"]) for r in rows} == {
        (c, s) for c in ("sst2", "rte") for s in ("paper", "fair")
    }
    for r in rows:
        assert r["method"] in ("random", "LIME", "IG", "IBA")
        assert r["n"] == reproduce.PROFILES["tiny"]["n"][r["corpus"]]
        assert r["seconds_per_instance"] is not None and r["seconds_per_instance"] >= 0
        assert -1.0 <= r["drop_11"] <= 1.0
    rte_iba = next(r for r in rows if r["corpus"] == "rte" and r["method"] == "IBA")
    assert rte_iba["paper"] == reproduce.PAPER_TABLE1["rte"]["IBA"]
    md = (out / "table1.md").read_text()
    assert "not measured" in md and md.count("\n| sst2 |") == 8
    for corpus in ("sst2", "rte"):
        for setting in ("paper", "fair"):
            assert (out / f"fig1_{corpus}_{setting}.png").stat().st_size > 0
    result = DegradationResult.from_json(out / "json" / "rte_paper_IBA.json")
    assert result.settings["attribution"]["beta"] == 1e-4  # Appendix A, RTE

    # re-running one corpus and setting keeps every other row as it was
    args.datasets, args.settings = ["rte"], ["fair"]
    reproduce.run_table(args, reproduce.PROFILES["tiny"], out)
    again = json.loads((out / "table1.json").read_text())
    key = lambda r: (r["corpus"], r["setting"], r["method"])  # noqa: E731
    assert [key(r) for r in again] == [key(r) for r in rows]
    kept = [r for r in rows if (r["corpus"], r["setting"]) != ("rte", "fair")]
    assert [r for r in again if (r["corpus"], r["setting"]) != ("rte", "fair")] == kept


def test_sweeps_and_examples_write_figures(reproduce, tmp_path):
    out = tmp_path / "results"
    (out / "json").mkdir(parents=True)
    args = argparse.Namespace(sweep_dataset="sst2", fair_prior="paper")
    reproduce.run_sweeps(args, reproduce.PROFILES["tiny"], out)
    reproduce.run_examples(args, out)
    summary = json.loads((out / "sweeps.json").read_text())
    assert list(summary["layers"]) == ["1", "2"]  # the tiny model's two layers
    assert summary["no_ranking_layers"] == [2]  # the last: [CLS] alone is read
    assert list(summary["betas"]) == [f"{b:g}" for b in reproduce.BETAS]
    for name in ("fig2_layers", "fig2_beta", "fig3_layers_tokens", "fig3_beta"):
        assert (out / f"{name}.png").stat().st_size > 0


@pytest.mark.parametrize("corpus", ["sst2", "rte"])
def test_finetune_steps_variable_reaches_every_reproduce_recipe(monkeypatch, corpus):
    """Issue 20, item 11: CAPTUM_IBA_FINETUNE_STEPS replaces the reproduce
    recipes' steps too (SST-2's override of 1,708 steps ignored it)."""
    from captum_iba.app import finetune as ft

    seen = []
    monkeypatch.setattr(
        reproduce_module,
        "get_finetuned_model",
        lambda c, options: seen.append(options.as_dict()),
    )
    monkeypatch.setattr(reproduce_module, "load_classifier", lambda folder: None)
    monkeypatch.setenv(ft.STEPS_ENV_VAR, "7")
    reproduce_module.corpus_model(corpus)
    monkeypatch.delenv(ft.STEPS_ENV_VAR)
    reproduce_module.corpus_model(corpus)
    assert seen[0]["steps"] == 7
    assert seen[1]["steps"] == {"sst2": 1708, "rte": 391}[corpus]
    if corpus == "sst2":
        assert seen[0]["lr"] == seen[1]["lr"] == 6e-5  # the other overrides stay


def test_a_rerun_resumes_what_an_interrupted_run_recorded(
    reproduce, tmp_path, monkeypatch, capsys
):
    """Issue 31, item 8: reproduce after kill -9 redid everything (8.7 min).
    The same command skips every piece recorded with the same settings and
    model, says so, and measures the rest; other settings are measured."""
    out = tmp_path / "results"
    (out / "json").mkdir(parents=True)
    tiny = reproduce.PROFILES["tiny"]
    args = argparse.Namespace(datasets=["sst2"], settings=["paper", "fair"],
                              fair_prior="paper", sweep_dataset="sst2")  # fmt: skip
    reproduce.run_table(args, tiny, out)  # as a run killed after sst2
    first = json.loads((out / "table1.json").read_text())
    real, measured = reproduce.evaluate_corpus, []

    def counted(model, tok, data, **kwargs):
        measured.append((len(data), kwargs["setting"], kwargs.get("layer")))
        return real(model, tok, data, **kwargs)

    monkeypatch.setattr(reproduce, "evaluate_corpus", counted)
    capsys.readouterr()
    args.datasets = ["sst2", "rte"]
    reproduce.run_table(args, tiny, out)
    said = capsys.readouterr().out
    assert "table/sst2/paper: measured by an earlier run" in said
    assert "table/sst2/fair: measured by an earlier run" in said
    assert [m[:2] for m in measured] == [(4, "paper"), (4, "fair")]  # rte only
    rows = json.loads((out / "table1.json").read_text())
    assert [r for r in rows if r["corpus"] == "sst2"] == first
    assert {r["corpus"] for r in rows} == {"sst2", "rte"}
    measured.clear()
    args.fair_prior = "reference"  # another setting: measured again
    args.datasets, args.settings = ["sst2"], ["fair"]
    reproduce.run_table(args, tiny, out)
    assert [m[:2] for m in measured] == [(6, "fair")]
    # the sweeps resume point by point
    args.fair_prior = "paper"
    reproduce.run_sweeps(args, tiny, out)
    measured.clear()
    (out / "json" / "sweep_layer2.json").unlink()  # as if killed while writing it
    reproduce.run_sweeps(args, tiny, out)
    assert measured == [(4, "fair", 1)]
    damaged = out / outputs.RESUME_FILE
    damaged.write_text("{")
    with pytest.raises(ValueError, match="resume.json is damaged"):
        reproduce.run(profile="tiny", out=str(out), parts=["table"])
