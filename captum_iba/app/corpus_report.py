"""What a corpus run writes and prints when its merge is complete: the
degradation test's table of ``evaluate`` on a corpus
(:func:`degradation_report`), the attributions of ``attribute``
(:func:`attribution_report`); a context task's summary is its own
(:meth:`~captum_iba.app.context_corpus.ContextTask.report`)."""

import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from captum_iba._utils.io import atomic_write_text, write_marker
from captum_iba.app import command_parts

__all__ = [
    "ENGINE_FILES",
    "attribution_report",
    "degradation_report",
    "write_degradation",
    "wrap",
]

#: What the corpus engine leaves in ``--out`` (the merge, its settings, the
#: per-rank shards a re-run resumes from).
ENGINE_FILES = ["attributions.jsonl", "settings.json", "shards"]


def wrap(text: str) -> str:
    """``text`` in lines of at most 88 characters."""
    return "\n".join(textwrap.wrap(text, 88))


def write_degradation(
    out: Path, stem: str, results: Dict, curves: bool, notes: Sequence[str] = ()
) -> Tuple[Any, List[str]]:
    """Each method's result as JSON, the comparison table with ``notes``
    under it (and the curves), each written atomically; returns the table and
    the names written."""
    from captum_iba.metrics import compare

    written = []
    for name, result in results.items():
        path = out / f"{stem}_{command_parts.slug(name)}.json"
        result.to_json(path)
        written.append(path.name)
    table = compare(results)
    below = "".join(f"\n{note}\n" for note in notes)
    atomic_write_text(out / f"{stem}.md", table.to_markdown() + "\n" + below)
    written.append(f"{stem}.md")
    if curves:
        from captum_iba.visualization import plot_degradation_curves

        plot_degradation_curves(results, save_path=out / f"{stem}_curves.png")
        written.append(f"{stem}_curves.png")
    return table, written


def _accuracy(rows: Sequence[Dict[str, Any]]) -> float:
    """The share of instances whose predicted class (a causal LM's choice)
    is the gold label."""
    first = {r["index"]: r for r in rows}.values()
    return sum(r["predicted"] == r["label"] for r in first) / max(len(first), 1)


def degradation_report(args: Any, merged: Any, warning: Optional[str]) -> int:
    """``evaluate`` on a corpus: each method's degradation test, the table
    (and the curves) written and printed, the model's accuracy, the run's
    ``warning`` again under them."""
    out = Path(args.out)
    stem = f"{args.dataset}_{args.setting}"
    n = len({row["index"] for row in merged.rows})  # methods may be several IBAs
    notes = merged.ranking_notes(n) + merged.left_out_notes()
    table, written = write_degradation(
        out, stem, merged.results, curves=True, notes=notes
    )
    files = ENGINE_FILES + written
    write_marker(out, command_parts.MARKER, files=files, command="evaluate", n=n)
    accuracy = _accuracy(merged.rows)
    print(f"\n{args.dataset} (n={n}), setting {args.setting}")
    print(table.to_markdown())
    print(wrap(f"Columns: {table.legend()}"))
    for note in notes:
        print(wrap(note))
    print(
        f"done: {merged.run_line(n, len(merged.results))}; model accuracy on them "
        f"{100 * accuracy:.1f} %; results in {out}/"
    )
    if warning:  # said at the start too; the accuracy above is read here
        print(wrap(f"warning: {warning}"))
    return 0


def attribution_report(args: Any, merged: Any) -> int:
    """``attribute``: the rows' file named, and the degradation test's table
    with ``--degradation``."""
    out = Path(args.out)
    written = list(ENGINE_FILES)
    n = len({row["index"] for row in merged.rows})
    notes = merged.ranking_notes(n) + merged.left_out_notes()
    if merged.results:
        table, files = write_degradation(
            out, "degradation", merged.results, curves=False, notes=notes
        )
        written += files
        print(table.to_markdown())
        print(wrap(f"Columns: {table.legend()}"))
    for note in notes:
        print(wrap(note))
    write_marker(
        out,
        command_parts.MARKER,
        files=written,
        command="attribute",
        n=len(merged.rows),
    )
    print(
        f"done: {merged.run_line(n, len(merged.rows) // max(n, 1))}; "
        f"{len(merged.rows)} rows in {out / 'attributions.jsonl'} (fields and "
        f"units: {out / 'settings.json'})"
    )
    return 0
