"""Issue 52's table in ``experiments/llm_faithfulness.py``: every
``iba-amortized`` record of a task against ``iba-deletion`` and AttnLRP, with
the fit's cost and the target (AOPC at least ``iba-deletion`` 's minus .005,
at no more of AttnLRP's CPU-s a prompt); and the record names of a transfer
and of another number of fit prompts."""

import argparse
import json

import pytest

from tests.helpers import experiment, study_module


@pytest.fixture(scope="module")
def study():
    return experiment("llm_faithfulness")


def _record(folder, stem, aopc, cpu, fit=None, kind="AVX2"):
    record = dict(
        aopc=aopc,
        drop11=aopc,
        comprehensiveness=aopc,
        sufficiency=aopc,
        cpu_seconds=[cpu] * len(aopc),
        accuracy=0.5,
        cpu=kind,
    )
    if fit is not None:
        record["fit"] = fit
    (folder / f"{stem}.json").write_text(json.dumps(record))


def _rows(study, tmp_path, capsys):
    args = argparse.Namespace(
        tasks="sst2", split="report", out=str(tmp_path), docs=str(tmp_path / "docs")
    )
    study.amortized(args)
    lines = capsys.readouterr().out.splitlines()[2:]
    rst = (tmp_path / "docs" / "_generated" / "llm_amortized_report.rst").read_text()
    return [[c.strip() for c in line.strip("| ").split("|")] for line in lines], rst


def test_amortized_table_judges_the_target(study, tmp_path, capsys):
    """Level with iba-deletion within .005 at AttnLRP's cost: met; .01 below,
    or dearer than AttnLRP: not met. Fit cost and prompts come from the
    record's ``fit``; the paired n is the prompts both have."""
    folder = tmp_path / "sst2" / "report"
    folder.mkdir(parents=True)
    _record(folder, "llm-iba-deletion", [0.2, 0.4, 0.3], 5.0)
    _record(folder, "llm-attnlrp", [0.1, 0.1, 0.1], 0.5)
    _record(folder, "llm-random", [0.1, 0.2, 0.1], 0.0)
    fit = dict(task="sst2", instances=256, epochs=2, prompts=128, cpu_seconds=1500.0)
    _record(folder, "iba-amortized", [0.196, 0.396, 0.296], 0.1, fit)
    old = dict(task="sst2", instances=64, cpu_seconds=9.0)  # no prompts: 2 epochs
    _record(folder, "iba-amortized-p32", [0.19, 0.39], 0.1, old)
    _record(folder, "iba-amortized-from-rte", [0.2, 0.4, 0.3], 0.9, fit)
    refined = dict(fit, refine_steps=2)
    _record(folder, "iba-amortized-r2", [0.2, 0.4, 0.3], 0.3, refined)
    rows, rst = _rows(study, tmp_path, capsys)
    # the task's own fits first (numbers by value), then the transfer
    assert [r[5] for r in rows] == ["0.100", "0.100", "0.300", "0.900"]
    assert rows[2][1].endswith("2 deletion steps a prompt)")
    by_name = {r[1].split(" (")[0]: r for r in rows[:2]}
    level = rows[0]
    assert level[1] == "sst2, 128 prompts (deletion, 2 epochs)" and level[2] == "1500"
    assert level[4] == "0.296" and level[-1] == "met"
    assert level[6].startswith("-0.004") and level[6].endswith("(3)")
    assert level[8].startswith("+0.163")  # against random: (.096 + .196 + .196) / 3
    assert by_name["sst2, 32 prompts"][-1] == "not met"  # .01 below
    assert by_name["sst2, 32 prompts"][6].endswith("(2)")  # the prompts both have
    assert rows[3][-1] == "not met"  # dearer than AttnLRP
    assert "list-table" in rst and "not met" in rst


def test_record_stems_name_transfer_and_fit_size(study):
    """The command line's fit (the task's own 128 prompts) keeps the method's
    name; another task's prompts or another number are in the stem."""
    k = study.LLM_TRAIN_PROMPTS

    def stem(name, fit_on=None, prompts=k, objective=None, epochs=None, refine=0):
        args = argparse.Namespace(
            task="sst2", fit_on=fit_on, fit_prompts=prompts,
            fit_objective=objective, fit_epochs=epochs, refine_steps=refine,
        )  # fmt: skip
        return study._stem(name, args)

    assert stem("iba-amortized") == "iba-amortized"
    assert stem("iba-amortized", "sst2") == "iba-amortized"
    assert stem("iba-amortized", "rte") == "iba-amortized-from-rte"
    assert stem("iba-amortized", None, 32) == "iba-amortized-p32"
    assert stem("iba-amortized", "rte", 32) == "iba-amortized-from-rte-p32"
    assert stem("iba-deletion", "rte", 32) == "llm-iba-deletion"
    assert stem("iba-amortized", objective="deletion") == "iba-amortized"
    assert stem("iba-amortized", objective="distil", epochs=20) == (
        "iba-amortized-distil-e20"
    )
    assert stem("iba-amortized", "rte", 64, "distil") == (
        "iba-amortized-from-rte-p64-distil"
    )
    # refinement: the same explainer (its folder's variant), another record
    assert stem("iba-amortized", objective="distil", epochs=200, refine=2) == (
        "iba-amortized-distil-e200-r2"
    )
    assert stem("iba-deletion", refine=2) == "llm-iba-deletion"
    args = argparse.Namespace(task="sst2", fit_on=None, iba_steps=1)
    assert study._stem("iba-deletion", args) == "llm-iba-deletion-steps1"
    assert study._stem("iba-faithful", args) == "llm-iba-faithful"
    # AT2 trained on n of the task's prompts, or of another task's
    args = argparse.Namespace(task="sst2", at2_task="sst2")
    assert study._stem("at2-128", args) == "at2-128"
    args.at2_task = "ag_news"
    assert study._stem("at2-128", args) == "at2-128-from-ag_news"


def test_at2_without_weights_is_refused_before_the_model_loads(
    study, tmp_path, monkeypatch
):
    """``--methods at2-<n>`` names the training command for the task's
    prompts when no weights are in ``--at2-dir``, before any model loads."""
    monkeypatch.setattr(study, "study_lm", lambda *a: pytest.fail("loaded"))
    args = argparse.Namespace(
        task="sst2", at2_task=None, at2_dir=str(tmp_path), methods="random,at2-8",
        model="tiny",
    )  # fmt: skip
    with pytest.raises(SystemExit, match="train_at2.py --model tiny --task sst2 --n 8"):
        study.run(args)


def test_costs_of_two_kinds_of_cpu_are_labelled_not_judged(study, tmp_path, capsys):
    """Records timed on two kinds of CPU: the tables label each method with
    its own and say so in the title; the target judges the AOPC but not the
    cost; the plot leaves out the amortized fit's variants and the
    transfers (``-from-``); a ``-steps`` record
    is the method's (``iba-deletion-steps1``, drawn as IBA's)."""
    folder = tmp_path / "sst2" / "report"
    folder.mkdir(parents=True)
    _record(folder, "llm-iba-deletion", [0.2, 0.4, 0.3], 5.0, kind="AVX512")
    _record(folder, "llm-attnlrp", [0.1, 0.1, 0.1], 0.5, kind="AVX512")
    _record(folder, "llm-iba-deletion-steps1", [0.2, 0.4, 0.3], 0.9)
    fit = dict(task="sst2", instances=256, epochs=2, prompts=128, cpu_seconds=1.0)
    _record(folder, "iba-amortized", [0.2, 0.4, 0.3], 0.1, fit)
    distil = dict(fit, objective="distil", epochs=20)
    _record(folder, "iba-amortized-distil-e20", [0.1, 0.1, 0.1], 0.1, distil)
    _record(folder, "at2-8-from-rte", [0.1, 0.1, 0.1], 0.1, kind="AVX512")
    rows, _ = _rows(study, tmp_path, capsys)
    verdicts = {r[1].split(" (")[1].split(",")[0]: r[-1] for r in rows[:2]}
    assert rows[2][1] == "rte, 8 prompts (AT2)"
    assert verdicts["deletion"] == "AOPC met; cost on other CPUs (AVX2, AVX512)"
    assert verdicts["distil"] == "not met"  # the AOPC alone decides that
    assert rows[0][-2] == "0.50 (AVX512)"
    tables = experiment("llm_study_tables")
    records = tables._records(str(tmp_path), "sst2", "report")
    assert "iba-deletion-steps1" in records
    labels = tables._labelled(tables._plotted(records))
    assert sorted(labels) == [
        "AttnLRP (AVX512)", "iba-amortized (AVX2)", "iba-deletion (AVX512)",
        "iba-deletion-steps1 (AVX2)",
    ]  # fmt: skip
    args = argparse.Namespace(
        task="sst2", split="report", out=str(tmp_path), docs=str(tmp_path / "docs")
    )
    study.tables(args)
    out = capsys.readouterr().out
    assert "CPU-s on two kinds of CPU, per method" in out
    assert "| AttnLRP (AVX512) |" in out
    assert (tmp_path / "docs" / "_static" / "llm_tradeoff_sst2_report.png").exists()


def test_amortized_table_holds_at2_rows(study, tmp_path, capsys):
    """AT2's records are the table's rows too: the task and prompts its
    weights were trained on, its ablations and training CPU-s from the
    record's ``fit``; a record written before ``fit`` was kept is read from
    its name (``at2-<n>[-from-<task>]``), its fit cost not known."""
    folder = tmp_path / "sst2" / "report"
    folder.mkdir(parents=True)
    _record(folder, "llm-iba-deletion", [0.2, 0.4, 0.3], 5.0)
    _record(folder, "llm-attnlrp", [0.1, 0.1, 0.1], 0.5)
    fit = dict(task="ag_news", prompts=32, objective="AT2", ablations=32)
    _record(
        folder,
        "at2-32-from-ag_news",
        [0.1, 0.3, 0.2],
        0.2,
        dict(fit, cpu_seconds=264.0),
    )
    _record(folder, "at2-128", [0.2, 0.4, 0.3], 0.3)
    rows, _ = _rows(study, tmp_path, capsys)
    assert [r[1] for r in rows] == [
        "sst2, 128 prompts (AT2)", "ag_news, 32 prompts (AT2, 32 ablations a prompt)"
    ]  # fmt: skip
    assert rows[0][2] == "nan" and rows[1][2] == "264"
    assert rows[0][-1] == "met" and rows[1][-1] == "not met"  # .1 below iba-deletion
    assert rows[1][6].startswith("-0.100")


def test_at2_fit_reads_the_statistics_beside_the_weights(study, tmp_path):
    """``at2-<n>`` 's record ``fit``: the weights' task, examples and
    ablations, and the training's CPU-s where train_at2.py wrote them beside
    the weights (``at2_fit_path``); without that file, no CPU-s."""
    at2_fit_path = study_module("at2_training").at2_fit_path

    weights = tmp_path / "m-sst2-n8-a32.pt"
    settings = dict(
        weights=str(weights), trained_on="sst2", trained_examples=8, ablations=32
    )
    scorer = argparse.Namespace(settings=settings)
    assert study._at2_fit(scorer) == dict(
        task="sst2", prompts=8, objective="AT2", ablations=32
    )
    assert at2_fit_path(weights) == tmp_path / "m-sst2-n8-a32.json"
    at2_fit_path(weights).write_text(json.dumps(dict(cpu_seconds=12.5, cpu="AVX2")))
    assert study._at2_fit(scorer)["cpu_seconds"] == 12.5
    assert study._at2_fit(scorer)["cpu"] == "AVX2"


def test_amortized_table_without_learned_records_names_the_folders(study, tmp_path):
    """No ``iba-amortized`` or ``at2-<n>`` record under ``--out`` (a wrong
    folder): refused, naming the folders read, not an empty table."""
    folder = tmp_path / "sst2" / "report"
    folder.mkdir(parents=True)
    _record(folder, "llm-iba-deletion", [0.2, 0.4, 0.3], 5.0)
    args = argparse.Namespace(
        tasks="sst2,rte", split="report", out=str(tmp_path), docs=None
    )
    with pytest.raises(
        SystemExit, match="no iba-amortized or at2-<n> records in"
    ) as err:
        study.amortized(args)
    assert str(folder) in str(err.value) and str(tmp_path / "rte" / "report") in str(
        err.value
    )
