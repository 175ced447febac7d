"""The study's records filled by one process or several
(``experiments/study_parts.py``): batches claimed once, parts merged in
order, a crashed process's batch claimed again, nothing left behind."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from captum_iba.app.outputs import TryLock

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def parts():
    spec = importlib.util.spec_from_file_location(
        "study_parts", EXPERIMENTS / "study_parts.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INDICES = [10 * i + 3 for i in range(10)]  # the study's prompts, in order


def _meta(done):
    return {"accuracy": done / 100.0, "cpu": "test", "model": "tiny"}


def _rows(rows):
    """A part whose values say which prompt they belong to."""
    part = {key: [float(i) for i in rows] for key in ("drop11", "aopc")}
    part.update(
        comprehensiveness=[2.0 * i for i in rows],
        sufficiency=[3.0 * i for i in rows],
        cpu_seconds=[0.5] * len(rows),
        answers=[i % 2 for i in rows],
        indices=[INDICES[i] for i in rows],
    )
    return part


def _run(record, n, batch_size=4):
    claimed = []
    for rows in record.batches(n, batch_size):
        claimed.append(list(rows))
        record.write(rows, _rows(rows))
    return claimed


def _check_complete(record, n):
    saved = json.loads(record.path.read_text())
    assert saved["indices"] == INDICES[:n]
    assert saved["aopc"] == [float(i) for i in range(n)]
    assert saved["sufficiency"] == [3.0 * i for i in range(n)]
    assert saved["answers"] == [i % 2 for i in range(n)]
    assert saved["accuracy"] == n / 100.0 and saved["model"] == "tiny"
    # nothing left behind: no parts folder, no lock file
    assert sorted(p.name for p in record.path.parent.iterdir()) == [record.path.name]


def test_one_process_fills_the_record_in_order(parts, tmp_path):
    record = parts.Record(tmp_path / "m.json", INDICES, _meta)
    assert _run(record, 6) == [[0, 1, 2, 3], [4, 5]]
    _check_complete(record, 6)
    # extended later: only the new prompts run
    assert _run(record, 10) == [[6, 7, 8, 9]]
    _check_complete(record, 10)
    assert _run(record, 10) == []


def test_a_held_batch_is_skipped_and_later_parts_wait_for_it(parts, tmp_path):
    record = parts.Record(tmp_path / "m.json", INDICES, _meta)
    record.parts.mkdir()
    other = TryLock(record.parts / "4.lock")  # another process scores 4 .. 7
    assert other.acquire()
    try:
        assert _run(record, 10) == [[0, 1, 2, 3], [8, 9]]
        assert record.done() == 4  # 8 .. 9 wait in their part for 4 .. 7
        assert (record.parts / "8.json").exists()
    finally:
        other.release()
    assert _run(record, 10) == [[4, 5, 6, 7]]  # its process died: claimed again
    _check_complete(record, 10)


def test_a_lock_file_left_by_a_killed_process_is_claimed(parts, tmp_path):
    record = parts.Record(tmp_path / "m.json", INDICES, _meta)
    record.parts.mkdir()
    (record.parts / "0.lock").write_text("")  # kill -9: the file stays, unheld
    assert _run(record, 4) == [[0, 1, 2, 3]]
    _check_complete(record, 4)


def test_a_left_over_part_is_dropped_not_merged_twice(parts, tmp_path):
    record = parts.Record(tmp_path / "m.json", INDICES, _meta)
    _run(record, 8)
    record.parts.mkdir()
    # a crash between saving the record and removing its part
    (record.parts / "4.json").write_text(json.dumps(_rows(range(4, 8))))
    record.merge()
    _check_complete(record, 8)


def test_other_prompts_are_refused(parts, tmp_path):
    record = parts.Record(tmp_path / "m.json", INDICES, _meta)
    _run(record, 4)
    with pytest.raises(SystemExit, match="m.json holds other prompts"):
        parts.Record(tmp_path / "m.json", INDICES[::-1], _meta).load()
    record.parts.mkdir()
    wrong = _rows(range(4, 8))
    wrong["indices"] = INDICES[:4]
    (record.parts / "4.json").write_text(json.dumps(wrong))
    with pytest.raises(SystemExit, match="4.json holds other prompts"):
        record.merge()


def test_a_part_of_the_wrong_length_is_refused(parts, tmp_path):
    record = parts.Record(tmp_path / "m.json", INDICES, _meta)
    part = _rows(range(0, 4))
    part["aopc"] = part["aopc"][:3]
    with pytest.raises(ValueError, match="a part of 4 prompts"):
        record.write(range(0, 4), part)


_WORKER = """
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("study_parts", sys.argv[1])
parts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parts)
indices = json.loads(sys.argv[3])
meta = lambda done: {"accuracy": done / 100.0, "cpu": "test", "model": "tiny"}
record = parts.Record(parts.Path(sys.argv[2]), indices, meta)
claimed = []
for rows in record.batches(len(indices), 2):
    time.sleep(0.05)  # the work: both processes take batches meanwhile
    part = {k: [float(i) for i in rows] for k in ("drop11", "aopc")}
    part.update(comprehensiveness=[2.0 * i for i in rows],
                sufficiency=[3.0 * i for i in rows], cpu_seconds=[0.5] * len(rows),
                answers=[i % 2 for i in rows], indices=[indices[i] for i in rows])
    record.write(rows, part)
    claimed += list(rows)
print(json.dumps(claimed))
"""


def test_processes_running_the_same_command_share_its_batches(tmp_path):
    path = tmp_path / "m.json"
    args = [sys.executable, "-c", _WORKER, str(EXPERIMENTS / "study_parts.py")]
    args += [str(path), json.dumps(INDICES)]
    workers = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True)]
    workers.append(subprocess.Popen(args, stdout=subprocess.PIPE, text=True))
    claimed = []
    for worker in workers:
        out, _ = worker.communicate()
        assert worker.returncode == 0
        claimed += json.loads(out)
    assert sorted(claimed) == list(range(10))  # each prompt scored once
    saved = json.loads(path.read_text())
    assert saved["indices"] == INDICES
    assert saved["aopc"] == [float(i) for i in range(10)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]
