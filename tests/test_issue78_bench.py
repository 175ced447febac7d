"""The pieces of issue 78's GPU script that run in seconds: the prompt tasks'
table by batch size (``benchmarks/bench_llm_tasks.py --table``), the headline's
measured / projected wording (``benchmarks/bench_imdb_scale.py``) and the
shell script's syntax and its one default variable. The whole script's check
on the CPU (about 3 minutes):
``PATH=/work/venv/bin:$PATH bash benchmarks/issue78_device.sh --cpu-dry-run``
after ``python benchmarks/issue78_prepare.py`` (benchmarks/RESULTS.md)."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))


def test_the_table_pairs_rows_within_a_task_and_batch_size(tmp_path, capsys):
    from bench_llm_tasks import table

    rows = []
    for size, scale in ((1, 1.0), (4, 0.5)):
        for batch in range(2):
            for method, seconds in (("attnlrp", 0.1), ("iba-deletion:steps=7", 0.8)):
                rows.append(dict(
                    task="sst2", method=method, batch=batch, prompts=size,
                    size=size, cpu="cuda", seconds=seconds * scale, unit=0.1 * scale,
                ))  # fmt: skip
    old = dict(rows[-1], batch=0)  # a row written before sizes were recorded
    del old["size"]
    rows.append(dict(old, task="rte"))
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    table(str(path), "attnlrp")
    out = capsys.readouterr().out.splitlines()
    seven = [line.split() for line in out if "steps=7" in line]
    assert [(cells[0], cells[1], cells[-1]) for cells in seven] == [
        ("sst2", "1", "8.00"),
        ("sst2", "4", "8.00"),
        ("rte", "4", "-"),  # no attnlrp row to pair with
    ]


def test_the_headline_says_measured_only_for_all_25000_reviews():
    from bench_imdb_scale import PAPER_REVIEWS, how

    row = dict(reviews=8, split=8, measured=False)
    assert how(row) == "PROJECTED from 8 of 8 reviews"
    assert how(dict(row, reviews=PAPER_REVIEWS, measured=True)).startswith("measured")


def test_the_device_script_parses_and_names_the_default_once():
    script = (BENCH / "issue78_device.sh").read_text()
    assert len(re.findall(r"^DEFAULT_SPEC=", script, re.M)) == 1
    if shutil.which("bash") is None:  # pragma: no cover
        pytest.skip("no bash")
    done = subprocess.run(["bash", "-n", str(BENCH / "issue78_device.sh")])
    assert done.returncode == 0
