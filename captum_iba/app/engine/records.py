"""The records of a corpus run on disk: per-rank shard files, crash-safe.

Layout of ``--out``::

    shards/settings.json        what defines the run (compared on a re-run)
    shards/rank-00000.jsonl     rank 0's records, one JSON object per line
    shards/rank-00001.jsonl     ...

A shard line is a ``"start"`` record (a process began: rank, world size, pid,
the settings' fingerprint) or a ``"row"`` record (one instance scored by one
method, with the work unit it belongs to). A rank appends the rows of a whole
unit with one write, flushed and fsync'ed. A process killed mid-write leaves
at most a torn last line: readers drop it, and the rank that owns the file cuts
it off before appending. A unit counts only when all of its rows are present,
so a unit cut short is redone whole (its numbers do not depend on which rank
or run computes it). Output files are written to a temporary name and renamed.
"""

import hashlib
import json
import os
from pathlib import Path
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from captum_iba._utils.digest import weights_digest
from captum_iba._utils.io import atomic_write_text, writing
from captum_iba.app.errors import CLIError

__all__ = [
    "ShardWriter",
    "check_settings",
    "complete_rows",
    "fingerprint",
    "read_lines",
    "record_type",
    "shard_path",
    "weights_digest",
]

#: (unit, method) -> that unit's rows for that method.
UnitRows = Dict[Tuple[int, str], List[Dict[str, Any]]]


def fingerprint(settings: Mapping[str, Any]) -> str:
    """A short hash of the settings' canonical JSON."""
    text = json.dumps(settings, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_path(out: Path, rank: int) -> Path:
    """The shard file of ``rank`` under ``out``."""
    return out / "shards" / f"rank-{rank:05d}.jsonl"


def read_lines(path: Path) -> Iterator[Dict[str, Any]]:
    """The records of one shard file; a torn last line is dropped.

    Raises:
        ~captum_iba.app.errors.CLIError:
            On a damaged line that is not the last one (the file was changed by
            something else than a run).
    """
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    for number, line in enumerate(lines[:-1], 1):  # the last piece is torn or b""
        try:
            yield json.loads(line)
        except ValueError:
            raise CLIError(
                f"{path}: line {number} is damaged; remove the file"
            ) from None


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[str]:
    """``"key: old there, new here"`` for every setting that differs."""
    keys = sorted(set(old) | set(new))
    return [
        f"{k}: {old.get(k)!r} there, {new.get(k)!r} here"
        for k in keys
        if json.dumps(old.get(k), sort_keys=True, default=repr)
        != json.dumps(new.get(k), sort_keys=True, default=repr)
    ]


def check_settings(out: Path, settings: Mapping[str, Any], write: bool = True) -> None:
    """Make ``out`` ready for a run with ``settings``, or refuse it.

    A new folder gets ``shards/settings.json``; a folder holding a run with
    other settings is refused, as is an ``out`` that is a file. With
    ``write=False`` (an early check, before the model's weights are known)
    only the keys of ``settings`` are compared and nothing is written.

    Raises:
        ~captum_iba.app.errors.CLIError: With the differing settings named.
    """
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file; give a folder")
    folder = out / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "settings.json"
    mine = json.loads(json.dumps(settings, sort_keys=True, default=repr))
    if path.exists():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        if not write:
            theirs = {k: v for k, v in theirs.items() if k in mine}
        diff = differences(theirs, mine)
        if diff:
            raise CLIError(
                f"--out {out} holds a different run ({'; '.join(diff[:3])}"
                f"{'; ...' if len(diff) > 3 else ''}): use another --out, or delete "
                "the folder to start afresh"
            )
        return
    if not write:
        return
    started = [
        rec
        for shard in sorted(folder.glob("rank-*.jsonl"))
        for rec in read_lines(shard)
        if record_type(rec) == "start" and rec.get("fingerprint") != fingerprint(mine)
    ]
    if started:
        raise CLIError(
            f"--out {out} holds shards of a different run and no settings.json: "
            "use another --out, or delete the folder"
        )
    atomic_write_text(path, json.dumps(mine, indent=1, sort_keys=True) + "\n")


def record_type(record: Dict[str, Any]) -> Optional[str]:
    """What a shard's record is: ``"start"`` (a process began, with its
    settings' fingerprint), ``"row"`` (one instance's scores by one
    method) or ``"failed"`` (an instance the method refused, its error); the
    field ``kind`` of the JSON line."""
    return record.get("kind")


def complete_rows(out: Path, unit_sizes: Sequence[int]) -> UnitRows:
    """The rows of every complete (unit, method) in ``out``'s shards.

    Args:
        out (Path): The run's folder.
        unit_sizes (Sequence[int]): Instances per unit.

    Returns:
        dict: ``(unit, method)`` -> its rows (one per instance, each instance
        once: its scores, or that the method refused it), for the units whose
        every instance is recorded.
    """
    found: Dict[Tuple[int, str], Dict[int, Dict[str, Any]]] = {}
    for shard in sorted((out / "shards").glob("rank-*.jsonl")):
        for rec in read_lines(shard):
            if record_type(rec) in ("row", "failed"):
                found.setdefault((rec["unit"], rec["method"]), {})[rec["index"]] = rec
    return {
        key: list(rows.values())
        for key, rows in found.items()
        if key[0] < len(unit_sizes) and len(rows) == unit_sizes[key[0]]
    }


class ShardWriter:
    """Appends records to this rank's shard file, one flushed write per call.

    Opening cuts a torn last line (left by a killed process) off the file. A
    lock (``filelock``) refuses a second process writing the same shard.

    Args:
        path (Path): The shard file.
    """

    def __init__(self, path: Path) -> None:
        from filelock import FileLock, Timeout

        self.path = path
        self._lock = FileLock(str(path) + ".lock")
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise CLIError(
                f"another process is writing {path}: one run per --out at a time"
            ) from None
        if path.exists():
            data = path.read_bytes()
            keep = data.rfind(b"\n") + 1
            if keep < len(data):
                with open(path, "r+b") as fh:
                    fh.truncate(keep)
        self._fh = open(path, "ab")

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Write ``records`` as JSON lines, flushed to disk."""
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        with writing(self.path):
            self._fh.write(data.encode("utf-8"))
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file and release the lock."""
        self._fh.close()
        self._lock.release()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
