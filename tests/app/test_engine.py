"""The corpus engine: processes, units, shard records, resuming, merging.

The multi-process tests run ``python -m torch.distributed.run`` (gloo, CPU)
on a tiny BERT and a dozen sentences.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from captum_iba.app.cli import main
from captum_iba.app.engine import World, launch_env, rank_units, read_lines, work_units
from captum_iba.app.engine.records import (
    ShardWriter,
    check_settings,
    complete_rows,
    shard_path,
)
from captum_iba.app.engine.run import _check
from captum_iba.app.errors import CLIError

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SENTENCES = [
    "a gripping , beautifully acted film",
    "dull",
    "it never drags and the cast is superb throughout",
    "far too long",
    "a charming and often affecting journey",
    "bleak and desperate",
    "the best film of the year , by far",
    "an utter waste of two hours and a fine cast",
    "fun",
    "not funny at all",
    "a masterpiece of quiet , patient storytelling that rewards attention",
    "sloppy",
]


@pytest.fixture
def corpus(tmp_path):
    """A local data folder with an SST-2 dev split of 12 sentences."""
    folder = tmp_path / "data" / "sst2"
    folder.mkdir(parents=True)
    lines = ["sentence\tlabel"] + [f"{s}\t{i % 2}" for i, s in enumerate(SENTENCES)]
    (folder / "dev.tsv").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "data")


def _argv(model, data, out, methods="iba,random", extra=()):
    return [
        "attribute",
        "--dataset",
        "sst2",
        "--model",
        model,
        "--data-dir",
        data,
        "--method",
        methods,
        "--batch-size",
        "2",
        # IBA's options only with an IBA method (else they are refused)
        *(["--steps", "2", "--n-samples", "2"] if "iba" in methods.lower() else []),
        "--out",
        str(out),
        *extra,
    ]


def _rows(out):
    with open(Path(out) / "attributions.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _env():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("RANK", None), env.pop("WORLD_SIZE", None)
    return env


def _torchrun_cmd(argv, nproc=2, script=None):
    entry = [str(script)] if script else ["-m", "captum_iba"]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(nproc), *entry, *argv]  # fmt: skip


def _torchrun(argv, nproc=2, script=None, timeout=600):
    """Run torchrun in its own process group; on a timeout the whole group
    (the workers too) is killed."""
    proc = subprocess.Popen(
        _torchrun_cmd(argv, nproc, script),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _without_timing(result_json):
    data = json.loads(Path(result_json).read_text())
    data["settings"]["attribution"].pop("seconds_per_instance")
    return data


# ----------------------------------------------------------------- launch variables
def test_launch_env_reads_torchrun_and_slurm():
    assert launch_env({}) == (0, 1, 0, "single")
    tr = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}
    assert launch_env(tr) == (3, 4, 1, "torchrun")
    slurm = {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "0"}
    assert launch_env(slurm) == (2, 8, 0, "slurm")
    assert launch_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"})[1] == 1  # no srun


@pytest.mark.parametrize(
    "env",
    [
        {"RANK": "2", "WORLD_SIZE": "2"},
        {"WORLD_SIZE": "2"},
        {"RANK": "0", "WORLD_SIZE": "two"},
        {"RANK": "0", "WORLD_SIZE": "0"},
    ],
)
def test_inconsistent_launch_variables_are_refused(env):
    with pytest.raises(CLIError, match="inconsistent ranks"):
        launch_env(env)


# ----------------------------------------------------------------------------- units
class _Data:
    def __init__(self, texts):
        self.texts, self.text_pairs, self.labels = texts, None, [0] * len(texts)

    def __len__(self):
        return len(self.texts)


def test_units_are_fixed_and_dealt_in_a_snake():
    data = _Data([s * (i % 5 + 1) for i, s in enumerate("abcdefghijk")])
    units = work_units(data, 3)
    assert [len(u) for u in units] == [3, 3, 3, 2]
    assert sorted(i for u in units for i in u) == list(range(11))
    lengths = [len(data.texts[i]) for u in units for i in u]
    assert lengths == sorted(lengths)  # the fixed order: shortest first
    for world in (1, 2, 3, 4):
        dealt = [u for r in range(world) for u in rank_units(len(units), r, world)]
        assert sorted(dealt) == list(range(len(units)))
    # 0 1 | 2 1 ... : each rank gets one of every pair of neighbours
    assert [list(rank_units(8, r, 2)) for r in (0, 1)] == [[0, 3, 4, 7], [1, 2, 5, 6]]
    assert [list(rank_units(7, r, 3)) for r in (0, 1, 2)] == [[0, 5, 6], [1, 4], [2, 3]]
    with pytest.raises(ValueError, match="batch_size"):
        work_units(data, 0)


# --------------------------------------------------------------------------- records
def _row(unit, index, method="m"):
    return {"kind": "row", "unit": unit, "index": index, "method": method}


def test_torn_last_line_is_dropped_and_cut(tmp_path):
    path = shard_path(tmp_path, 0)
    path.parent.mkdir()
    with ShardWriter(path) as w:
        w.append([_row(0, 0), _row(0, 1)])
    with open(path, "ab") as fh:
        fh.write(b'{"kind": "row", "unit": 1, "ind')  # killed mid-write
    assert [r["index"] for r in read_lines(path)] == [0, 1]
    with ShardWriter(path) as w:  # the owner cuts the torn line, then appends
        w.append([_row(1, 2), _row(1, 3)])
    assert [r["index"] for r in read_lines(path)] == [0, 1, 2, 3]
    assert path.read_bytes().endswith(b"}\n")


def test_damaged_middle_line_and_second_writer_are_refused(tmp_path):
    path = shard_path(tmp_path, 0)
    path.parent.mkdir()
    path.write_text('{"kind": "row"}\nnot json\n{"kind": "row"}\n')
    with pytest.raises(CLIError, match="line 2 is damaged"):
        list(read_lines(path))
    with ShardWriter(shard_path(tmp_path, 1)):
        with pytest.raises(CLIError, match="another process"):
            ShardWriter(shard_path(tmp_path, 1))


def test_only_complete_units_count(tmp_path):
    path = shard_path(tmp_path, 0)
    path.parent.mkdir()
    with ShardWriter(path) as w:
        w.append([_row(0, 0), _row(0, 1), _row(1, 2), _row(0, 1, "other")])
    done = complete_rows(tmp_path, [2, 2])
    assert set(done) == {(0, "m")}  # unit 1 lacks an instance, "other" too


def test_settings_are_recorded_and_compared(tmp_path):
    check_settings(tmp_path / "run", {"seed": 0, "n": 5})
    check_settings(tmp_path / "run", {"n": 5, "seed": 0})  # same run: fine
    with pytest.raises(CLIError, match="different run.*seed: 0 there, 1 here"):
        check_settings(tmp_path / "run", {"seed": 1, "n": 5})
    (tmp_path / "file").write_text("x")
    with pytest.raises(CLIError, match="is a file"):
        check_settings(tmp_path / "file", {})


class _FakeWorld(World):
    """Ranks that disagree, as seen from rank 0."""

    def __init__(self, size, others):
        super().__init__(rank=0, size=size)
        self.others = others

    def gather(self, value):
        other = (self.others[0], value[1], dict(value[2], **self.others[1]))
        return [value] + [other] * (self.size - 1)

    def decide(self, decision):
        return decision


def test_world_larger_than_corpus_and_inconsistent_ranks(tmp_path):
    from captum_iba.app.engine.run import CorpusJob

    job = CorpusJob(None, None, _Data(["a", "b"]), {}, {"x": 1})
    with pytest.raises(CLIError, match="3 processes for a corpus of 2"):
        _check(job, tmp_path, _FakeWorld(3, (2, {})))
    with pytest.raises(CLIError, match="inconsistent ranks: rank 1 has 7"):
        _check(job, tmp_path, _FakeWorld(2, (7, {})))
    with pytest.raises(CLIError, match="weights: 'a' there, 'b' here.*at random"):
        job.settings["weights"] = "a"
        _check(job, tmp_path, _FakeWorld(2, (2, {"weights": "b"})))


# ------------------------------------------------------------------- one process
def test_attribute_writes_rows_resumes_and_refuses_another_run(
    tiny_model_dir, corpus, tmp_path, capsys
):
    out = tmp_path / "out"
    assert main(_argv(tiny_model_dir, corpus, out, extra=["--degradation"])) == 0
    rows = _rows(out)
    assert [(r["index"], r["method"]) for r in rows] == [
        (i, m) for i in range(len(SENTENCES)) for m in ("IBA", "random")
    ]  # each instance's rows in the order the methods were asked for
    for r in rows:
        assert len(r["tokens"]) == len(r["scores"]) == len(r["input_ids"])
        assert r["tokens"][0] == "[CLS]" and r["text"] == SENTENCES[r["index"]]
        assert len(r["degradation"]["probs"]) == 9
    settings = json.loads((out / "settings.json").read_text())
    assert settings["methods"]["IBA"]["steps"] == 2 and settings["instances"] == 12
    assert len(settings["weights"]) == 24  # the model's weights, hashed
    before = (out / "attributions.jsonl").read_bytes()
    capsys.readouterr()
    assert main(_argv(tiny_model_dir, corpus, out, extra=["--degradation"])) == 0
    assert "0 scored now" in capsys.readouterr().out  # nothing redone
    assert (out / "attributions.jsonl").read_bytes() == before
    with pytest.raises(SystemExit) as exc:
        main(_argv(tiny_model_dir, corpus, out, extra=["--degradation", "--seed", "1"]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "different run (seed: 'default' there, 1 here)" in err
    assert "Loading" not in err  # refused before any work


def _refuse(monkeypatch, refused):
    """The random scorer refuses (a ValueError) any batch holding a text's
    ids in ``refused`` (``"*"``: every batch)."""
    from captum_iba.evaluation.random_scorer import RandomScorer

    original = RandomScorer._scores

    def refusing(self, rows):
        texts = [
            " ".join(self.tokenizer.convert_ids_to_tokens(row))
            for row in rows.input_ids
        ]
        if refused == "*" or any(f" {refused} " in t for t in texts):
            raise ValueError(f"cannot explain {refused!r}")
        return original(self, rows)

    monkeypatch.setattr(RandomScorer, "_scores", refusing)


def test_an_instance_a_method_refuses_is_left_out_and_the_rest_scored(
    tiny_model_dir, corpus, tmp_path, capsys, monkeypatch
):
    """A scorer's ValueError on one instance: its unit's other instance is
    scored alone, the refused one is recorded, left out of every method's
    rows and results, said in a note, and a re-run does not try it again."""
    _refuse(monkeypatch, "dull")
    out = tmp_path / "out"
    argv = _argv(tiny_model_dir, corpus, out, extra=["--degradation"])
    assert main(argv) == 0
    printed = " ".join(capsys.readouterr().out.split())  # lines wrapped
    note = "instance 1 is left out of every method's results: random refused it"
    assert note in printed and "cannot explain 'dull'" in printed
    rows = _rows(out)
    kept = [i for i in range(len(SENTENCES)) if i != 1]
    assert [(r["index"], r["method"]) for r in rows] == [
        (i, m) for i in kept for m in ("IBA", "random")
    ]
    settings = json.loads((out / "settings.json").read_text())
    assert settings["left_out"] == [
        {"index": 1, "method": "random", "error": "cannot explain 'dull'"}
    ]
    assert (
        "(n=11)" in (out / "degradation.md").read_text()
        or note in (out / "degradation.md").read_text()
    )
    assert main(argv) == 0
    again = capsys.readouterr().out
    assert "0 scored now" in again and note in again  # recorded, not retried


def test_every_instance_refused_is_an_error(
    tiny_model_dir, corpus, tmp_path, capsys, monkeypatch
):
    _refuse(monkeypatch, "*")
    with pytest.raises(SystemExit) as exc:
        main(_argv(tiny_model_dir, corpus, tmp_path / "out", methods="random"))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "every instance was refused by a method" in err and "random" in err


def test_pandas_reads_the_rows(tiny_model_dir, corpus, tmp_path):
    pd = pytest.importorskip("pandas")
    out = tmp_path / "out"
    assert main(_argv(tiny_model_dir, corpus, out, methods="random")) == 0
    df = pd.read_json(out / "attributions.jsonl", lines=True)
    assert len(df) == len(SENTENCES) and set(df.method) == {"random"}
    assert all(len(t) == len(s) for t, s in zip(df.tokens, df.scores))


def test_out_that_is_a_file_is_refused(tiny_model_dir, corpus, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(_argv(tiny_model_dir, corpus, tmp_path / "f"))
    assert exc.value.code == 2 and "is a file" in capsys.readouterr().err


# ---------------------------------------------------------------- many processes
def test_two_processes_equal_one_exactly(tiny_model_dir, corpus, tmp_path):
    argv = lambda out: _argv(  # noqa: E731
        tiny_model_dir, corpus, out, extra=["--degradation"]
    )
    assert main(argv(tmp_path / "one")) == 0
    proc = _torchrun(argv(tmp_path / "two"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 processes)" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "two" / "shards").glob("*.jsonl")) == [
        "rank-00000.jsonl",
        "rank-00001.jsonl",
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    assert (one / "attributions.jsonl").read_bytes() == (
        two / "attributions.jsonl"
    ).read_bytes()
    for name in ("degradation_iba.json", "degradation_random.json"):
        assert _without_timing(one / name) == _without_timing(two / name)


def test_more_processes_than_instances_is_refused(tiny_model_dir, corpus, tmp_path):
    proc = _torchrun(
        _argv(tiny_model_dir, corpus, tmp_path / "o", extra=["--num-instances", "2"]),
        nproc=3,
        timeout=600,
    )
    assert proc.returncode != 0
    assert "captum-iba: error: 3 processes for a corpus of 2 instance(s)" in proc.stderr
    assert "captum_iba/" not in proc.stderr  # one-line errors (torchrun's own
    # traceback reports the failed workers)


def _wait_for_rows(shard, rows, deadline):
    while time.time() < deadline:
        if shard.exists():
            recs = list(read_lines(shard))
            start = [r for r in recs if r["kind"] == "start"]
            if start and sum(r["kind"] == "row" for r in recs) >= rows:
                return start[-1]["pid"]
        time.sleep(0.1)
    raise AssertionError(f"{shard} got no {rows} rows in time")


def test_killed_rank_loses_nothing_and_rerun_completes(
    tiny_model_dir, corpus, tmp_path
):
    """kill -9 one rank midway; the re-run records every instance exactly once
    and equals a run that was never interrupted."""
    script = HERE / "_slow_cli.py"
    argv = lambda out: _argv(  # noqa: E731
        tiny_model_dir, corpus, out, methods="slow-random,iba"
    )
    ref = subprocess.run(
        [sys.executable, str(script), *argv(tmp_path / "ref")],
        env=dict(_env(), SLOW_SCORER_SECONDS="0"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    out = tmp_path / "out"
    proc = subprocess.Popen(
        _torchrun_cmd(argv(out), script=script),
        env=dict(_env(), SLOW_SCORER_SECONDS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        pid = _wait_for_rows(shard_path(out, 1), 2, time.time() + 300)
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=300) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not (out / "attributions.jsonl").exists()
    rerun = _torchrun(argv(out), script=script, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = _rows(out)
    keys = [(r["index"], r["method"]) for r in rows]
    assert sorted(keys) == sorted(
        (i, m) for i in range(len(SENTENCES)) for m in ("slow-random", "IBA")
    )  # every instance exactly once
    assert rows == _rows(tmp_path / "ref")
    recorded_before = int(rerun.stdout.split("were recorded before")[0].split()[-1])
    assert recorded_before > 0  # the rows written before the kill were kept
