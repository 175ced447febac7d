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
* ``settings.json`` - the run's settings and every method's own, what each
  field of ``attributions.jsonl`` holds (``fields``: :data:`ROW_FIELDS`) and
  what each method's scores mean (``scores``: meaning and direction).

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

__all__ = ["ROW_FIELDS", "Merged", "merge_shards", "row_fields"]

#: What ``degradation`` holds.
_TEST_FIELD = (
    "the instance's degradation test, probabilities of the target class in [0, 1] "
    "before (original_probs) and after removing the top tokens at each level "
    "(probs), log-odds, predicted classes and token counts"
)
#: The fields of a row of ``attributions.jsonl``: what each holds, and its unit
#: (written into ``settings.json``; the docs' scaling page lists them too).
ROW_FIELDS: Dict[str, str] = {
    "index": "position of the instance in the corpus split (0-based)",
    "method": "the method's name (settings.json: scores.<method> says what its "
    "scores mean)",
    "text": "the instance's text",
    "text_pair": "its second text (sentence pairs only)",
    "label": "the gold class (index)",
    "target": "the class explained (index): the gold label (attribute --target "
    "predicted: the predicted class)",
    "predicted": "the predicted class (index)",
    "target_probability": "the model's probability of the target class, in [0, 1]",
    "tokens": "the word pieces, special tokens included, padding left out",
    "input_ids": "their token ids",
    "scores": "one score per token, higher = more relevant; the unit is the "
    "method's (settings.json: scores.<method>.meaning)",
    "degradation": "evaluate, and attribute --degradation: " + _TEST_FIELD,
}

#: What ``target`` holds, by the run's target rule.
_TARGET_FIELD = {
    "label": "the class explained (index): the gold label",
    "predicted": "the class explained (index): the predicted class",
}


def row_fields(job: "CorpusJob") -> Dict[str, str]:
    """The fields of this run's rows (:data:`ROW_FIELDS`, as they apply): the
    target rule it used, ``text_pair`` for sentence pairs only and
    ``degradation`` only when the test ran."""
    fields = dict(ROW_FIELDS, target=_TARGET_FIELD[job.target])
    if job.data.text_pairs is None:
        del fields["text_pair"]
    if job.degradation:
        fields["degradation"] = _TEST_FIELD
    else:
        del fields["degradation"]
    return fields


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
        scored_now (float): Instances scored by this run (the others were
            recorded by an earlier one, which this run resumed).
        seconds (float): Wall seconds of this run's scoring and merge.
        processes (int): The processes that ran it.
    """

    rows: List[Dict[str, Any]]
    results: Dict[str, DegradationResult] = field(default_factory=dict)
    seconds_per_instance: Dict[str, float] = field(default_factory=dict)
    scored_now: float = 0.0
    seconds: float = 0.0
    processes: int = 1

    def run_line(self, instances: int, methods: int) -> str:
        """What this run did, for the one summary line of a command."""
        rate = self.scored_now / self.seconds if self.seconds > 0 else 0.0
        before = instances - self.scored_now
        plural = "es" if self.processes != 1 else ""
        return (
            f"{instances} instances x {methods} method(s): {self.scored_now:.0f} "
            f"scored now in {self.seconds:.0f} s ({rate:.2f} instances/s, "
            f"{self.processes} process{plural}), {before:.0f} were recorded before"
        )


def _result(rows: List[Dict[str, Any]], seconds: float) -> DegradationResult:
    """One method's test over the corpus, from its instance rows."""
    first = next(r["test_settings"] for r in rows if "test_settings" in r)
    return merge_records([r["degradation"] for r in rows], first, seconds)


def _meaning(scorer: Any) -> Dict[str, Any]:
    """What a scorer's scores mean, for ``settings.json``."""
    return {
        "meaning": getattr(scorer, "score_meaning", ""),
        "signed": bool(getattr(scorer, "signed", True)),
    }


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
        fields=row_fields(job),
        scores={m: _meaning(job.scorers[m]) for m in methods},
    )
    text = json.dumps(settings, indent=1, sort_keys=True, default=repr)
    atomic_write_text(out / "settings.json", text + "\n")
    return merged
