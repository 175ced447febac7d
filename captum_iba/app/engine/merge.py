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
  field of ``attributions.jsonl`` holds (``fields``: :data:`ROW_FIELDS`),
  what each method's scores mean (``scores``: meaning and direction) and the
  instances a method refused (``left_out``: index, method, error), which both
  files leave out for every method.

Both are written to a temporary name and renamed. The merged numbers do not
depend on the number of processes (see :mod:`~captum_iba.app.engine.units`).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Sequence

from captum_iba._utils.io import atomic_write_text
from captum_iba._utils.ranking import is_flat, spread_said
from captum_iba.app.engine.records import complete_rows, record_type
from captum_iba.app.errors import CLIError

if TYPE_CHECKING:  # pragma: no cover
    from captum_iba.evaluation.loop import CorpusJob

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
    return job.row_fields(fields)


#: Shard-only fields, left out of ``attributions.jsonl``.
_INTERNAL = ("kind", "unit", "seconds", "test_settings")


@dataclass
class Merged:
    """What rank 0 merged.

    Attributes:
        rows (list[dict]): ``attributions.jsonl``'s rows, in file order.
        results (dict): Method -> :class:`~captum_iba.metrics.DegradationResult`
            (a context task: its per-example metrics,
            :meth:`~captum_iba.evaluation.context_loop.ContextJob.merge_tests`)
            over the whole corpus (empty without the degradation test).
        seconds_per_instance (dict): Method -> mean seconds of its scorer per
            instance (over the runs that recorded the rows).
        scored_now (float): Instances scored by this run (the others were
            recorded by an earlier one, which this run resumed).
        seconds (float): Wall seconds of this run's scoring and merge.
        processes (int): The processes that ran it.
        flat (dict): Method -> its instances whose scores rank nothing (flat
            at the tokens that are not special,
            :func:`~captum_iba._utils.ranking.is_flat`).
        no_ranking (dict): Method -> why it ranks no token at all, where it
            says so (IBA after a layer whose first token alone is read).
        layers (dict): Method -> where its layer is, for IBA (``"after encoder
            layer 5"``).
        left_out (list[dict]): The instances a method refused (``index``,
            ``method``, ``error``), left out of every method's rows and
            results so that the methods are compared on the same instances.
    """

    rows: List[Dict[str, Any]]
    results: Dict[str, Any] = field(default_factory=dict)
    seconds_per_instance: Dict[str, float] = field(default_factory=dict)
    scored_now: float = 0.0
    seconds: float = 0.0
    processes: int = 1
    flat: Dict[str, int] = field(default_factory=dict)
    no_ranking: Dict[str, str] = field(default_factory=dict)
    layers: Dict[str, str] = field(default_factory=dict)
    left_out: List[Dict[str, Any]] = field(default_factory=list)

    def left_out_notes(self) -> List[str]:
        """One note per instance a method refused: left out of every
        method's results, and why."""
        return [
            f"note: instance {r['index']} is left out of every method's results: "
            f"{r['method']} refused it ({_first_line(r['error'])})"
            for r in self.left_out
        ]

    def ranking_notes(self, instances: int) -> List[str]:
        """One warning per method that ranks nothing on some instances (its
        rows of the table measure nothing there), naming its layer and why."""
        notes = []
        for method, count in self.flat.items():
            why = self.no_ranking.get(method, "")
            if not count and not why:
                continue
            at = f" ({self.layers[method]})" if self.layers.get(method) else ""
            said = f"warning: {method}{at} ranks nothing on {count} of {instances}"
            said += " instances (flat scores"
            said += f": {spread_said()})" if count else ")"
            if why:
                said += f": {why}"
            elif count:
                said += (
                    ": it found nothing that changes the prediction there; for IBA "
                    "this happens after a layer the prediction barely reads, try an "
                    "earlier layer (--layer) or iba-deletion"
                )
            notes.append(said + "; its row of the table measures no ranking there")
        return notes

    def run_line(self, instances: int, methods: int) -> str:
        """What this run did, for the one summary line of a command
        (``instances``: those in the results; the left out are added)."""
        out = len({r["index"] for r in self.left_out})
        instances += out
        rate = self.scored_now / self.seconds if self.seconds > 0 else 0.0
        before = max(instances - self.scored_now, 0.0)
        plural = "es" if self.processes != 1 else ""
        return (
            f"{instances} instances x {methods} method(s): {self.scored_now:.0f} "
            f"scored now in {self.seconds:.0f} s ({rate:.2f} instances/s, "
            f"{self.processes} process{plural}), {before:.0f} were recorded before"
            + (f", {out} left out (see the note)" if out else "")
        )


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")


def _result(
    job: "CorpusJob", rows: List[Dict[str, Any]], seconds: float, first: Any
) -> Any:
    """One method's test over the corpus, from its instance rows and the
    test settings a unit recorded (``first``): a
    :class:`~captum_iba.metrics.DegradationResult`, or the job's own."""
    return job.merge_tests([r[job.test_field] for r in rows], first, seconds)


def _meaning(scorer: Any, flat: int) -> Dict[str, Any]:
    """What a scorer's scores mean, for ``settings.json`` (and, where they
    rank nothing, how often and why)."""
    out = {
        "meaning": getattr(scorer, "score_meaning", ""),
        "signed": bool(getattr(scorer, "signed", True)),
        "flat_instances": flat,
    }
    why = getattr(scorer, "settings", {}).get("no_ranking")
    if why:
        out["no_ranking"] = why
    return out


def _layer(settings: Dict[str, Any]) -> str:
    """Where a scorer's layer is, from its settings ("" for none)."""
    if settings.get("layer_index") is not None:
        return f"after encoder layer {settings['layer_index']}"
    return f"at {settings['layer']}" if settings.get("layer") else ""


def _flat(row: Dict[str, Any], scorer: Any) -> bool:
    """Whether a row's scores rank nothing at its tokens that are not special."""
    special = set(getattr(scorer, "special_token_ids", None) or ())
    words = [s for i, s in zip(row["input_ids"], row["scores"]) if i not in special]
    return is_flat(words)


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
    refused = [
        {k: r[k] for k in ("index", "method", "error")}
        for u in range(len(sizes))
        for m in methods
        for r in found[(u, m)]
        if record_type(r) == "failed"
    ]
    skip = {r["index"] for r in refused}
    if len(skip) == len(job.data):
        first = refused[0]
        raise CLIError(
            f"every instance was refused by a method, e.g. instance {first['index']} "
            f"by {first['method']}: {_first_line(first['error'])}"
        )
    per_method = {
        m: sorted(
            (
                r
                for u in range(len(sizes))
                for r in found[(u, m)]
                if r["index"] not in skip
            ),
            key=lambda r: r["index"],
        )
        for m in methods
    }
    seconds = {
        m: sum(r["seconds"] for r in rows) / len(rows) for m, rows in per_method.items()
    }
    merged = Merged(rows=[], seconds_per_instance=seconds, left_out=refused)
    merged.flat = {
        m: sum(_flat(r, job.scorers[m]) for r in per_method[m]) for m in methods
    }
    merged.no_ranking = {
        m: job.scorers[m].settings["no_ranking"]
        for m in methods
        if job.scorers[m].settings.get("no_ranking")
    }
    merged.layers = {m: _layer(job.scorers[m].settings) for m in methods}
    for i in range(len(job.data) - len(skip)):
        for m in methods:
            row = per_method[m][i]
            merged.rows.append({k: v for k, v in row.items() if k not in _INTERNAL})
    if job.degradation:
        first = {  # a unit's test settings (its first row's, left out or not)
            m: next(
                r["test_settings"]
                for u in range(len(sizes))
                for r in found[(u, m)]
                if "test_settings" in r
            )
            for m in methods
        }
        merged.results = {
            m: _result(job, per_method[m], seconds[m], first[m]) for m in methods
        }
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
        scores={m: _meaning(job.scorers[m], merged.flat[m]) for m in methods},
        left_out=refused,
    )
    text = json.dumps(settings, indent=1, sort_keys=True, default=repr)
    atomic_write_text(out / "settings.json", text + "\n")
    return merged
