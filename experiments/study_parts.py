"""One method's record of a study, filled by one process or several at once.

A record (``<method>.json``) holds the per-prompt rows of the *first* prompts
of the study's list, in order, so a later run extends it and tables pair
methods on the prompts both have. To share a method's work, each process
running the same command claims the next batch no process holds (a
:class:`~captum_iba.app.outputs.TryLock` on ``<method>.parts/<start>.lock``,
held while the batch runs: a process that dies releases it, and a re-run
claims the batch again), writes the batch's rows as a part
(``<method>.parts/<start>.json``), and merges the parts that continue the
record into it, under a lock, removing them once merged::

    llm-ig.json              the record: rows 0 .. 59
    llm-ig.parts/64.json     rows 64 .. 67, written while 60 .. 63 still run
    llm-ig.parts/60.lock     held by the process scoring rows 60 .. 63

Processes must use the same batch size for batches not to overlap; a part
that overlaps the record (a left-over of a crash between saving the record
and removing the part) is dropped when merging. Torch-free.
"""

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from captum_iba._utils.io import atomic_write_text
from captum_iba.app.outputs import TryLock

#: The per-prompt lists of a record, extended by each part in order.
ROWS = ("drop11", "aopc", "comprehensiveness", "sufficiency", "cpu_seconds")
#: The per-prompt lists a part carries besides :data:`ROWS`.
LABELS = ("answers", "indices")


class Record:
    """A method's record at ``path`` and its parts.

    Args:
        path (Path): The record, ``<method>.json``.
        indices (list of int): The study's prompts (their corpus indices), in
            order: a record holds the first of them.
        meta (callable): Given how many prompts the record holds, the fields
            that describe them as a whole (accuracy, CPU, model), set on
            every merge.
    """

    def __init__(
        self,
        path: Path,
        indices: List[int],
        meta: Callable[[int], Dict[str, Any]],
    ) -> None:
        self.path = path
        self.parts = path.with_suffix(".parts")
        self.indices = indices
        self.meta = meta

    def load(self) -> Dict[str, Any]:
        """The record (checked to hold the first of ``indices``), or an empty
        one."""
        if not self.path.exists():
            return {key: [] for key in ROWS + LABELS}
        record = json.loads(self.path.read_text())
        held = record["indices"]
        if held != self.indices[: len(held)]:
            raise SystemExit(
                f"{self.path} holds other prompts than this run's: remove it"
            )
        return record

    def done(self) -> int:
        """How many prompts the record holds."""
        return len(self.load()["aopc"])

    def batches(self, n: int, batch_size: int) -> Iterator[range]:
        """The batches of the first ``n`` prompts this process claims, each
        held while the caller runs it (until the next is asked for); batches
        the record holds, another process holds, or a part holds are
        skipped.

        Args:
            n (int): How many prompts the record is to hold.
            batch_size (int): Prompts a batch.

        Yields:
            range: The prompts of a claimed batch.
        """
        start = self.done()
        while start < n:
            lock = self._claim(start)
            if lock is not None:
                try:
                    if not self._part(start).exists() and start >= self.done():
                        yield range(start, min(start + batch_size, n))
                finally:
                    lock.release()
            start += batch_size
        self.merge()

    def _claim(self, start: int) -> Optional[TryLock]:
        """The batch at ``start`` 's lock, taken; None when another process
        holds it."""
        for _ in range(3):  # another process's merge may remove the folder
            self.parts.mkdir(parents=True, exist_ok=True)
            lock = TryLock(self.parts / f"{start}.lock")
            try:
                return lock if lock.acquire() else None
            except FileNotFoundError:
                continue
        return None

    def write(self, rows: range, part: Dict[str, List[Any]]) -> None:
        """Writes the rows of a claimed batch (every list of :data:`ROWS` and
        :data:`LABELS`, one value a prompt) as a part, then merges."""
        if any(len(part[key]) != len(rows) for key in ROWS + LABELS):
            raise ValueError(f"a part of {len(rows)} prompts needs {ROWS + LABELS}")
        atomic_write_text(self._part(rows.start), json.dumps(part))
        self.merge()

    def merge(self) -> Dict[str, Any]:
        """Appends the parts that continue the record, in order, saves it,
        removes them (and the parts folder once empty); returns the record."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = TryLock(self.path.with_suffix(".json.lock"))
        while not lock.acquire():
            time.sleep(0.05)
        try:
            record = self.load()
            merged = []
            for part in sorted(self.parts.glob("*.json"), key=_start):
                start, done = _start(part), len(record["aopc"])
                if start < done:  # a left-over: its rows are in the record
                    merged.append(part)
                    continue
                if start > done:
                    break  # a batch before it still runs (or its process died)
                rows = json.loads(part.read_text())
                if rows["indices"] != self.indices[start : start + len(rows["aopc"])]:
                    raise SystemExit(
                        f"{part} holds other prompts than this run's: remove it"
                    )
                for key in ROWS + LABELS:
                    record[key] = record.get(key, []) + rows[key]
                merged.append(part)
            if merged:
                record.update(self.meta(len(record["aopc"])))
                atomic_write_text(self.path, json.dumps(record))
            for part in merged:
                part.unlink()
            _remove_if_empty(self.parts)
            return record
        finally:
            lock.release()

    def _part(self, start: int) -> Path:
        return self.parts / f"{start}.json"


def _start(part: Path) -> int:
    return int(part.stem)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (a part, a held batch) or not there
        pass
