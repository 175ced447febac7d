"""One run per ``--out``: two runs started in the same instant on a new
``--out`` (issue 31, item 8). The loser fails at once with a message and
removes nothing; the winner finishes with all its work. Real processes,
started together behind a barrier, five times."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from captum_iba.app.outputs import LOCK_FILE, claim, run_lock
from tests.app.test_cli_faults import _tiny_sst2

ROOT = Path(__file__).resolve().parents[2]

#: Each child imports what the command needs, says it is ready, waits for
#: the go file, and only then runs the command: the two start together.
CHILD = """
import os, sys, time
import torch, transformers  # the slow imports, before the start line
import captum_iba.app.commands, captum_iba.app.corpus_command
from captum_iba.app.cli import main
ready, go = sys.argv[1:3]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.0005)
sys.exit(main(sys.argv[3:]))
"""


def _start_together(argv, folder: Path):
    """Two processes running ``captum-iba argv``, released at one instant."""
    go = folder / "go"
    procs = []
    for i in range(2):
        ready = folder / f"ready{i}"
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(ready), str(go), *argv],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    while not all((folder / f"ready{i}").exists() for i in range(2)):
        if any(p.poll() is not None for p in procs):
            break  # a child died before the start: its output says why
        time.sleep(0.01)
    go.touch()
    return [(p.wait(), *p.communicate()) for p in procs]


@pytest.mark.parametrize("round_", range(5))
def test_two_runs_started_together_on_a_new_out(round_, tiny_model_dir, tmp_path):
    data = _tiny_sst2(tmp_path / "data")
    out = tmp_path / "new" / "nested" / "out"  # both race to create it
    argv = ["evaluate", "--model", tiny_model_dir, "--data-dir", str(data),
            "--methods", "random", "--n", "8", "--batch-size", "2",
            "--out", str(out)]  # fmt: skip
    results = _start_together(argv, tmp_path)
    codes = sorted(code for code, _, _ in results)
    if codes == [0, 0]:  # one started after the other ended (a busy machine):
        # the later one found the work done and scored nothing
        said = sorted("8 were recorded before" in out_ for _, out_, _ in results)
        assert said == [False, True], results
    else:
        assert codes == [0, 2], results
        (_, _, loser_err), (_, winner_out, _) = sorted(results, key=lambda r: -r[0])
        assert "another captum-iba run is writing there" in loser_err, loser_err
        assert "Nothing was written or removed" in loser_err
        assert len(loser_err.strip().splitlines()) == 1
        assert "Traceback" not in loser_err
        assert "done: 8 instances" in winner_out
    marker = json.loads((out / "COMPLETE.json").read_text())
    assert marker["n"] == 8
    rows = (out / "attributions.jsonl").read_text().splitlines()
    assert len(rows) == 8
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_claim_says_what_this_process_created(tmp_path):
    assert claim(tmp_path / "a" / "b") == tmp_path / "a"
    assert claim(tmp_path / "a" / "b") is None  # there already
    assert claim(tmp_path / "a" / "b" / "c") == tmp_path / "a" / "b" / "c"
    (tmp_path / "file").write_text("x")
    assert claim(tmp_path / "file" / "out") is None  # the command names it


def test_claim_makes_every_level_when_another_run_makes_one_meanwhile(
    tmp_path, monkeypatch
):
    """The interleaving of two runs on ``new/nested/out`` where this one makes
    ``new`` and the other ``nested`` just after: ``out`` must still be made
    here (the lock is taken in it), and nothing is this run's to remove."""
    from pathlib import PosixPath

    out = tmp_path / "new" / "nested" / "out"
    real_mkdir = PosixPath.mkdir

    def mkdir_then_the_other_run(self, *args, **kwargs):
        real_mkdir(self, *args, **kwargs)
        if self == tmp_path / "new":
            real_mkdir(self / "nested")  # the other run, in between

    monkeypatch.setattr(PosixPath, "mkdir", mkdir_then_the_other_run)
    assert claim(out) is None
    assert out.is_dir()


def test_the_lock_is_held_once_and_its_file_goes(tmp_path):
    from captum_iba.app.errors import CLIError

    with run_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).exists()
        with pytest.raises(CLIError, match="another captum-iba run is writing"):
            with run_lock(tmp_path):
                pass
    assert not (tmp_path / LOCK_FILE).exists()
    with run_lock(tmp_path):  # free again
        pass


def test_a_second_run_on_a_busy_out_is_refused_and_removes_nothing(
    tiny_model_dir, tmp_path, capsys
):
    """A run finds --out locked (as by a run still working): one line, exit
    2, the folder and the other run's files as they were."""
    from captum_iba.app.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "theirs.txt").write_text("work")
    data = _tiny_sst2(tmp_path / "data")
    argv = ["evaluate", "--model", tiny_model_dir, "--data-dir", str(data),
            "--methods", "random", "--n", "8", "--out", str(out)]  # fmt: skip
    with run_lock(out):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert sorted(os.listdir(out)) == [LOCK_FILE, "theirs.txt"]
    assert exc.value.code == 2
    assert "another captum-iba run is writing there" in capsys.readouterr().err
