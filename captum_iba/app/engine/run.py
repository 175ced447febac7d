"""The corpus engine: score a corpus with registered methods on one or many
processes, record every instance as it is done, and merge on rank 0.

:func:`run_corpus_job` is the one loop behind ``captum-iba attribute`` and
``captum-iba evaluate``. Each rank takes its units
(:mod:`~captum_iba.app.engine.units`), skips those already recorded in
``--out`` (:mod:`~captum_iba.app.engine.records`), scores the others unit by
unit with every method (and, when asked, runs the degradation test on the
unit), and appends the unit's rows to its shard. When every rank is done,
rank 0 merges the shards (:mod:`~captum_iba.app.engine.merge`).
"""

import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from captum_iba.app.engine.dist import World
from captum_iba.app.engine.merge import Merged, merge_shards
from captum_iba.app.engine.progress import Progress
from captum_iba.app.engine.records import (
    ShardWriter,
    check_settings,
    complete_rows,
    differences,
    fingerprint,
    shard_path,
)
from captum_iba.app.engine.units import rank_units, work_units
from captum_iba.app.errors import CLIError
from captum_iba.evaluation.loop import TARGETS, CorpusJob

__all__ = ["prepare_out", "run_corpus_job"]


def prepare_out(out: os.PathLike, settings: Dict[str, Any], world: World) -> None:
    """Check ``out`` for a run with ``settings`` before any work (rank 0
    checks, every rank gets the verdict): see :func:`check_settings`
    (``write=False``: the run's full settings, with the model's weights, are
    checked and recorded when the job starts).

    Raises:
        ~captum_iba.app.errors.CLIError: On every rank alike.
    """
    error = None
    if world.is_main:
        try:
            check_settings(Path(out), settings, write=False)
        except CLIError as err:
            error = str(err)
    error = world.decide(error)
    if error:
        raise CLIError(error)


def _check(job: CorpusJob, out: Path, world: World) -> None:
    """The same verdict on every rank: world size, consistency, ``--out``."""
    n = len(job.data)
    if job.target not in TARGETS:  # a job changed after it was built
        raise ValueError(f"target must be one of {TARGETS}; got {job.target!r}")
    seen = world.gather((n, world.size, job.settings))
    error = None
    if any(
        s[:2] != seen[0][:2] or fingerprint(s[2]) != fingerprint(seen[0][2])
        for s in seen
    ):
        bad = next(r for r, s in enumerate(seen) if s != seen[0])
        diff = differences(seen[0][2], seen[bad][2])
        error = (
            f"inconsistent ranks: rank {bad} has {seen[bad][0]} instances, rank 0 "
            f"{seen[0][0]}; {'; '.join(diff[:2]) or 'same settings'} (rank 0 first)"
            + (
                " - a model head initialised at random?"
                if any(d.startswith("weights") for d in diff)
                else ""
            )
            + ": start every rank with the same command and model"
        )
    elif world.size > n:
        error = (
            f"{world.size} processes for a corpus of {n} instance(s): start at most {n}"
        )
    elif world.is_main:
        try:
            check_settings(out, job.settings)
        except CLIError as err:
            error = str(err)
    error = world.decide(error)
    if error:
        raise CLIError(error)


def _method_rows(
    job: CorpusJob, unit_number: int, unit: Any, method: str
) -> List[Dict[str, Any]]:
    """One method's rows of one unit (the loop's :func:`score_unit`)."""
    (done,) = job.score_unit(unit, [method])
    tests: List[Optional[Dict[str, Any]]] = [None] * len(unit.indices)
    if done.result is not None:
        tests, settings = job.test_records(done.result)
    rows = []
    for j in range(len(unit.indices)):
        row = dict(
            kind="row", unit=unit_number, method=done.method, seconds=done.seconds
        )
        row.update(job.instance_row(unit, j, done.scores))
        if tests[j] is not None:
            row[job.test_field] = tests[j]
        if j == 0 and done.result is not None:
            row["test_settings"] = settings
        rows.append(row)
    return rows


def _left_out(
    unit_number: int, index: int, method: str, err: ValueError
) -> Dict[str, Any]:
    """The record of an instance a method refused (``kind`` ``"failed"``):
    the unit counts as done, the merge leaves the instance out."""
    return dict(
        kind="failed", unit=unit_number, method=method, index=index, error=str(err)
    )


def _unit_rows(
    job: CorpusJob,
    unit_number: int,
    indices: Sequence[int],
    methods: Sequence[str],
    progress: Progress,
) -> Iterator[List[Dict[str, Any]]]:
    """The rows of one unit, one method at a time as each finishes (the
    loop's :func:`score_unit`; the progress says which runs). A method that
    refuses the unit (a ``ValueError``: an input it cannot explain, said in
    its message) runs again on each of its instances alone; each instance it
    still refuses is recorded as left out (:func:`_left_out`), so a re-run
    does not stop at it again."""
    unit = job.unit_tensors(indices)
    for method in methods:
        progress.working(unit_number, method)
        try:
            rows = _method_rows(job, unit_number, unit, method)
        except ValueError as err:
            rows = _one_by_one(job, unit_number, indices, method, err)
        yield rows


def _one_by_one(
    job: CorpusJob,
    unit_number: int,
    indices: Sequence[int],
    method: str,
    err: ValueError,
) -> List[Dict[str, Any]]:
    """A refused unit's rows, its instances scored one at a time (``err``:
    the unit's refusal, the instance's own when it is alone)."""
    if len(indices) == 1:
        return [_left_out(unit_number, indices[0], method, err)]
    rows: List[Dict[str, Any]] = []
    for index in indices:
        try:
            rows += _method_rows(job, unit_number, job.unit_tensors([index]), method)
        except ValueError as own:
            rows.append(_left_out(unit_number, index, method, own))
    return rows


def run_corpus_job(
    job: CorpusJob, out: os.PathLike, world: Optional[World] = None
) -> Optional[Merged]:
    """Score ``job``'s corpus on this rank's units; rank 0 merges.

    Args:
        job (~captum_iba.evaluation.loop.CorpusJob): What to run.
        out (PathLike): The run's folder (shards, settings and outputs).
        world (World, optional): This process's place; default one process.

    Returns:
        Merged or None: On rank 0, the merged rows (and degradation results);
        None on the other ranks.

    Raises:
        ~captum_iba.app.errors.CLIError:
            On every rank alike, for a bad ``--out``, a re-run with other settings, more
            processes than instances, or inconsistent ranks.
    """
    world = world or World()
    out = Path(out)
    _check(job, out, world)
    units = work_units(job.data, job.batch_size)
    sizes = [len(u) for u in units]
    methods = list(job.scorers)
    start = time.perf_counter()
    with ShardWriter(shard_path(out, world.rank)) as writer:
        done = set(complete_rows(out, sizes))
        writer.append(
            [
                dict(
                    kind="start",
                    rank=world.rank,
                    world_size=world.size,
                    pid=os.getpid(),
                    device=str(world.device),
                    fingerprint=fingerprint(job.settings),
                    time=time.time(),
                )
            ]
        )
        mine = rank_units(len(units), world.rank, world.size)
        todo = {u: [m for m in methods if (u, m) not in done] for u in mine}
        todo = {u: ms for u, ms in todo.items() if ms}
        progress = Progress(out, world, len(job.data) * len(methods), todo, sizes)
        try:
            for u, todo_methods in todo.items():
                for rows in _unit_rows(job, u, units[u], todo_methods, progress):
                    writer.append(rows)
                    progress.update(len(rows))
        finally:
            progress.close()  # its heartbeat too
    world.barrier()
    if not world.is_main:
        return None
    merged = merge_shards(out, job, sizes, methods)
    merged.seconds = time.perf_counter() - start
    merged.scored_now = progress.new_rows() / max(len(methods), 1)
    merged.processes = world.size
    return merged
