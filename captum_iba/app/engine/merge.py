"""Rank 0's merge: the shards of a finished run into its output files.

* ``attributions.jsonl`` - one JSON object per instance and method, in corpus
  order: ``index``, ``method``, ``text`` (``text_pair``), ``label``,
  ``target`` (the class explained), ``predicted``, ``target_probability``,
  ``tokens``, ``input_ids``, ``scores`` (one per token, padding left out)
  and, when the degradation test ran, ``degradation`` (the instance's
  probabilities per level, see
  :meth:`~captum_iba.metrics.DegradationResult.instance_records`). pandas
  (``pd.read_json(path, lines=True)``) and Hugging Face ``datasets``
  (``load_dataset("json", data_files=path)``) read it as it is.
* ``settings.json`` - the run's settings and every method's own.

Both are written to a temporary name and renamed. The merged numbers do not
depend on the number of processes (see :mod:`~captum_iba.app.engine.units`).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Sequence

from captum_iba._utils.io import atomic_write_text
from captum_iba.app.engine.records import complete_rows
from captum_iba.app.errors import CLIError
from captum_iba.evaluation.loop import merge_records
from captum_iba.metrics import DegradationResult

if TYPE_CHECKING:  # pragma: no cover
    from captum_iba.app.engine.run import CorpusJob

__all__ = ["Merged", "merge_shards"]

#: Shard-only fields, left out of ``attributions.jsonl``.
_INTERNAL = ("kind", "unit", "seconds", "test_settings")


@dataclass
class Merged:
    """What rank 0 merged.

    Attributes:
        rows (list[dict]): ``attributions.jsonl``'s rows, in file order.
        results (dict): Method -> :class:`~captum_iba.metrics.DegradationResult`
            over the whole corpus (empty without the degradation test).
        seconds_per_instance (dict): Method -> mean seconds of its scorer per
            instance (over the runs that recorded the rows).
    """

    rows: List[Dict[str, Any]]
    results: Dict[str, DegradationResult] = field(default_factory=dict)
    seconds_per_instance: Dict[str, float] = field(default_factory=dict)


def _result(rows: List[Dict[str, Any]], seconds: float) -> DegradationResult:
    """One method's test over the corpus, from its instance rows."""
    first = next(r["test_settings"] for r in rows if "test_settings" in r)
    return merge_records([r["degradation"] for r in rows], first, seconds)


def merge_shards(
    out: Path, job: "CorpusJob", sizes: Sequence[int], methods: Sequence[str]
) -> Merged:
    """Merge the shards of ``out`` and write its output files.

    Args:
        out (Path): The run's folder.
        job (~captum_iba.evaluation.loop.CorpusJob): The run.
        sizes (Sequence[int]): Instances per unit.
        methods (Sequence[str]): The methods, in output order.

    Returns:
        Merged: The rows and results.

    Raises:
        ~captum_iba.app.errors.CLIError:
            If a unit is missing (a rank stopped without recording it).
    """
    found = complete_rows(out, sizes)
    missing = [
        (u, m) for u in range(len(sizes)) for m in methods if (u, m) not in found
    ]
    if missing:
        raise CLIError(
            f"{len(missing)} unit(s) are not recorded in {out} (e.g. unit "
            f"{missing[0][0]} of {missing[0][1]}): run the same command again"
        )
    per_method = {
        m: sorted(
            (r for u in range(len(sizes)) for r in found[(u, m)]),
            key=lambda r: r["index"],
        )
        for m in methods
    }
    seconds = {
        m: sum(r["seconds"] for r in rows) / len(rows) for m, rows in per_method.items()
    }
    merged = Merged(rows=[], seconds_per_instance=seconds)
    for i in range(len(job.data)):
        for m in methods:
            row = per_method[m][i]
            merged.rows.append({k: v for k, v in row.items() if k not in _INTERNAL})
    if job.degradation:
        merged.results = {m: _result(per_method[m], seconds[m]) for m in methods}
    atomic_write_text(
        out / "attributions.jsonl",
        (json.dumps(r, ensure_ascii=False) + "\n" for r in merged.rows),
    )
    settings = dict(
        job.settings,
        instances=len(job.data),
        units=len(sizes),
        methods={m: job.scorers[m].settings for m in methods},
        seconds_per_instance=seconds,
    )
    text = json.dumps(settings, indent=1, sort_keys=True, default=repr)
    atomic_write_text(out / "settings.json", text + "\n")
    return merged
