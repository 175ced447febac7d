"""The context study's tables (``experiments/context_study.py tables``):
per method and pooling its means with 95 % bootstrap intervals, paired
differences against ContextCite (and, with ``--anchor``, against any row) on
the same examples, and the cost-faithfulness plot."""

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import faithfulness_study as fs  # noqa: E402

from captum_iba.app.context_corpus import context_columns  # noqa: E402
from captum_iba.metrics.context import TOP_K  # noqa: E402

#: The prefix of ContextCite's method names (``contextcite-32``).
CONTEXTCITE = "contextcite-"
#: The prefix of AT2's method names (``at2-16``: trained on 16 examples).
AT2_PREFIX = "at2-"
#: Methods trained once at several budgets, each costing the same per
#: example whatever its budget: AT2 and an explainer fitted on contexts.
BUDGETED = (AT2_PREFIX, "iba-amortized-ctx-")
#: The rows drawn as IBA's: its methods, and AT2's scorer taught by IBA.
IBA_ROWS = ("iba", AT2_PREFIX + "iba-")


def _rows(records: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Dict[str, Any]]:
    """Per method and pooling, its per-example lists
    (:func:`~captum_iba.app.context_corpus.context_columns`, as ``evaluate
    --task`` sums them up)."""
    return context_columns(
        [dict(r, method=m) for m, rows in records.items() for r in rows]
    )


def _cell(values: Sequence[float], signed: bool = False) -> str:
    kept = np.array([v for v in values if v is not None and np.isfinite(v)])
    if not len(kept):
        return "n/a"
    n = f" (n {len(kept)})" if len(kept) < len(values) else ""
    return fs.fmt(fs.bootstrap(kept), signed=signed) + n


def _mean(values: Sequence[Any]) -> float:
    kept = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(kept)) if kept else -2.0


COLUMNS = ("lds", "top1") + tuple(f"drop{k}" for k in TOP_K)


def means_table(table: Dict[str, Dict[str, Any]]) -> str:
    """Markdown: every method's means with 95 % bootstrap intervals."""
    head = "| method | n | LDS | top-1 hit | " + " | ".join(
        f"top-{k} drop" for k in TOP_K
    )
    lines = [head + " | CPU-s |", "|" + "---|" * (len(COLUMNS) + 3)]
    for m in sorted(table, key=lambda m: -_mean(table[m]["lds"])):
        r = table[m]
        cells = [_cell(r[c]) for c in COLUMNS]
        cpu = f"{np.mean(r['cpu_seconds']):.1f}"
        lines.append(f"| {m} | {len(r['lds'])} | " + " | ".join(cells) + f" | {cpu} |")
    return "\n".join(lines)


def _floats(values: Sequence[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def paired_table(table: Dict[str, Dict[str, Any]], extra: Sequence[str] = ()) -> str:
    """Markdown: paired differences (method minus ContextCite, and minus each
    row of ``extra``, e.g. ``"iba-deletion (max)"``) on the examples both
    hold, 95 % bootstrap intervals.

    Raises:
        SystemExit: For a row of ``extra`` the table does not have.
    """
    for row in extra:
        if row not in table:
            raise SystemExit(
                f"--anchor {row!r}: no such row; the rows: {', '.join(table)}"
            )
    found = [m for m in table if m.startswith(CONTEXTCITE)]
    anchors = list(dict.fromkeys(found + list(extra)))  # each once
    lines = ["| method | anchor | n | d LDS | d top-1 | d top-1 drop |"]
    lines.append("|---|---|---|---|---|---|")
    for ref in anchors:
        for m in (m for m in table if m != ref):
            n = min(len(table[m]["lds"]), len(table[ref]["lds"]))
            diffs = [
                np.subtract(_floats(table[m][c][:n]), _floats(table[ref][c][:n]))
                for c in ("lds", "top1", "drop1")
            ]
            cells = " | ".join(_cell(d, signed=True) for d in diffs)
            lines.append(f"| {m} | {ref} | {n} | {cells} |")
    return "\n".join(lines)


def _records(folder: Path, first: Any = None) -> Dict[str, List[Dict[str, Any]]]:
    """Per method, its records in ``folder`` (only the first ``first``
    contexts when given); none: an error naming the folder."""
    records = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    if first is not None:  # every method on the same contexts
        records = {
            m: [r for r in rs if r["index"] < first] for m, rs in records.items()
        }
    records = {m: r for m, r in records.items() if r}
    if not records:
        raise SystemExit(f"no results in {folder}")
    return records


def pooled(
    folders: Sequence[Dict[str, List[Dict[str, Any]]]],
) -> Dict[str, List[Dict[str, Any]]]:
    """Several runs' records as one: the methods every run holds, each run's
    contexts that all of them hold (in the order of their index), the runs
    one after the other - so that rows pair context by context.

    Raises:
        SystemExit: When no method is in every run.
    """
    common = [m for m in folders[0] if all(m in f for f in folders[1:])]
    if not common:
        raise SystemExit("no method is in every --out folder")
    out: Dict[str, List[Dict[str, Any]]] = {m: [] for m in common}
    for records in folders:
        shared = set.intersection(*({r["index"] for r in records[m]} for m in common))
        for m in common:
            out[m] += sorted(
                (r for r in records[m] if r["index"] in shared),
                key=lambda r: r["index"],
            )
    return out


def tables(args: argparse.Namespace) -> None:
    """The task's table and its paired differences against ContextCite (and
    each ``--anchor`` row); with several ``--out`` folders (commas), their
    runs pooled (:func:`pooled`)."""
    folders = [Path(o) / args.task / args.split for o in args.out.split(",")]
    runs = [_records(folder, args.first) for folder in folders]
    records = runs[0] if len(runs) == 1 else pooled(runs)
    table = _rows(records)
    means = means_table(table)
    differences = paired_table(table, getattr(args, "anchor", None) or ())
    print(f"{args.task} {args.split}\n\n{means}\n\n{differences}")
    if args.docs:
        tag = f"_{args.tag}" if args.tag else ""
        name = f"context_{args.task}_{args.split}{tag}".replace("-", "_")
        what = f"{args.task}, {args.split} split" + (f", {args.tag}" if tag else "")
        rst = fs.to_rst(means, f"{what}: means, 95 % bootstrap intervals")
        if len(differences.splitlines()) > 2:  # no anchor run: no differences
            rst += "\n" + fs.to_rst(
                differences, f"{what}: paired differences (method minus the anchor)"
            )
        path = Path(args.docs) / "_generated" / f"{name}.rst"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rst)
        plot(table, what, Path(args.docs) / "_static" / f"{name}.png")


def plot(table: Dict[str, Dict[str, Any]], title: str, path: Path) -> None:
    """The cost-faithfulness picture: each method's mean LDS at its best
    pooling (the table has the others: all of them crowded the plot, and its
    labels were placed by other methods' points), 95 % bootstrap interval,
    against its mean CPU-seconds per example; AT2 at its best training
    budget (its budgets cost the same per example: their points stacked, and
    their labels could not be placed in order); IBA's (:data:`IBA_ROWS`)
    drawn highlighted."""
    from captum_iba.visualization import plot_cost_faithfulness

    points, best = {}, one_budget(best_pooling(table), table)
    for m, r in ((m, r) for m, r in table.items() if m in best):
        lds = np.array([v for v in r["lds"] if v is not None and np.isfinite(v)])
        mean, low, high = fs.bootstrap(lds)
        points[best[m]] = (float(np.mean(r["cpu_seconds"])), mean, (low, high))
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_cost_faithfulness(
        points,
        highlight=[m for m in points if m.startswith(IBA_ROWS)],
        ylabel="LDS (higher is more faithful)",
        xlabel="CPU-seconds per example (one thread, log scale)",
        title=title,
        save_path=path,
    )


def one_budget(rows: List[str], table: Dict[str, Dict[str, Any]]) -> Dict[str, str]:
    """``rows`` with each trained method's budgets (:data:`BUDGETED`:
    ``at2-<n>``, ``iba-amortized-ctx-[<task>-]<n>``, each family its own) kept
    at the best mean LDS only, each row mapped to its plot label (the best
    budget's says of how many it was chosen)."""
    families: Dict[str, List[str]] = {}
    keep = {}
    for row in rows:
        family, _, budget = row.split(" (")[0].rpartition("-")
        if row.startswith(BUDGETED) and budget.isdigit():
            families.setdefault(family, []).append(row)
        else:
            keep[row] = row
    for budgets in families.values():
        top = max(budgets, key=lambda r: _mean(table[r]["lds"]))
        many = f" (best of {len(budgets)} budgets)" if len(budgets) > 1 else ""
        keep[top] = top + many
    return keep


def best_pooling(table: Dict[str, Dict[str, Any]]) -> List[str]:
    """The rows of ``table`` (``method`` or ``method (pooling)``) with the
    highest mean LDS of each method."""
    best: Dict[str, str] = {}
    for row in table:
        method = row.split(" (")[0]
        if method not in best or _mean(table[row]["lds"]) > _mean(
            table[best[method]]["lds"]
        ):
            best[method] = row
    return list(best.values())
