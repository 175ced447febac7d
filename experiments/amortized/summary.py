"""The four corpora's amortized results in one table and one figure.

Reads the study's cached report-split records (one ``--out`` folder holding
every corpus) and writes

* ``docs/_generated/amortized_summary.rst``: per corpus, the two amortized
  explainers (``iba-faithful`` and ``iba-deletion`` as the teacher) with their
  AOPC, drop at 11 %, CPU-s per instance and fit CPU-minutes, and AOPC
  differences paired with ``iba-faithful``, AttnLRP, fair IG and the teacher;
* ``docs/_static/amortized_tradeoff_all.png``: AOPC against CPU-seconds per
  instance, one panel per corpus.

Records run on a GPU carry no CPU cost: their CPU-s is the first round's CPU
mean on the same model and instances (docs/faithfulness.rst), marked "*"::

    python experiments/amortized/summary.py --out /work/results_r2fs
"""

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import faithfulness_study as fs  # noqa: E402

CORPORA = {"sst2": "SST-2", "rte": "RTE", "ag_news": "AG News", "imdb": "IMDB"}
#: The per-sample reference (``iba-faithful`` at the layer chosen on the
#: search split) and the two explainers of each corpus.
FAITHFUL = {"sst2": 4, "rte": 0, "ag_news": 1, "imdb": 0}
DELETION = "iba-amortized (emb, distil iba-deletion, n={})"
AMORTIZED = {
    "sst2": ("iba-amortized (l4, distil)", DELETION.format(500)),
    "rte": ("iba-amortized (l0, distil, n=500)", DELETION.format(500)),
    "ag_news": ("iba-amortized (l1, distil, n=500)", DELETION.format(500)),
    "imdb": ("iba-amortized (l0, distil, n=250)", DELETION.format(250)),
}
#: CPU-s of records run on a GPU: the first round's CPU means
#: (docs/_generated/faithfulness_<corpus>.rst, same models and instances).
FIRST_ROUND_CPU = {
    "rte": {"random": 0.0, "iba-faithful": 1.731, "IG": 2.966, "LOO": 1.741},
    "ag_news": {"random": 0.0, "iba-faithful": 1.064, "IG": 2.210, "LOO": 0.975},
    "imdb": {
        "random": 0.0,
        "iba-faithful": 4.936,
        "IG": 7.034,
        "LOO": 15.224,
        "iba-deletion": 3.58,
    },
}
ANCHORS = ("random", "LOO", "IG", "AttnLRP", "iba-faithful", "iba-deletion")


def faithful_name(corpus: str) -> str:
    return f"iba-faithful (l{FAITHFUL[corpus]}, chosen)"


def cpu(corpus: str, short: str, rec: Dict[str, Any]) -> Tuple[float, bool]:
    """CPU-s per instance and whether it is quoted from the first round."""
    if fs._on_cpu(rec):
        return float(np.mean(rec["cpu_seconds"])), False
    return FIRST_ROUND_CPU[corpus][short], True


def paired(recs: Dict[str, Any], m: str, ref: str, key: str = "aopc") -> str:
    """``m - ref`` on the same instances, mean [95 % CI]."""
    if ref not in recs or m not in recs:
        return "n/a"
    if recs[m]["rows"] != recs[ref]["rows"]:
        raise SystemExit(f"{m} and {ref} were not run on the same instances")
    diff = np.array(recs[m][key]) - np.array(recs[ref][key])
    return fs.fmt(fs.bootstrap(diff), signed=True)


def rows_of(out: Path, corpus: str) -> Tuple[List[List[str]], Dict[str, Any]]:
    """The table rows of one corpus and its plotted points."""
    recs = fs.load_records(out, corpus, "report")
    names = {"iba-faithful": faithful_name(corpus)}
    names.update({a: a for a in ANCHORS if a != "iba-faithful"})
    teacher_of = dict(zip(AMORTIZED[corpus], ("iba-faithful", "iba-deletion")))
    rows, points = [], {}
    for short, name in list(names.items()) + [(m, m) for m in AMORTIZED[corpus]]:
        if name not in recs:
            continue
        rec = recs[name]
        seconds, quoted = cpu(corpus, short, rec)
        mean, low, high = fs.bootstrap(np.array(rec["aopc"]))
        label = {AMORTIZED[corpus][0]: "amortized (faithful)"}.get(name, short)
        label = {AMORTIZED[corpus][1]: "amortized (deletion)"}.get(name, label)
        points[label] = (seconds, mean, (low, high))
        if name not in teacher_of:
            continue
        fit = rec["settings"].get("fit") or {}
        rows.append([
            CORPORA[corpus], f"{label} (n={fit.get('instances', 0) // 2:,})",
            fs.fmt(fs.bootstrap(np.array(rec["aopc"]))),
            fs.fmt(fs.bootstrap(np.array(rec["drop11"]))),
            f"{seconds:.3f}", f"{fit.get('cpu_seconds', float('nan')) / 60:.1f}",
            paired(recs, name, names["iba-faithful"]),
            paired(recs, name, "AttnLRP"), paired(recs, name, "IG"),
            paired(recs, name, names[teacher_of[name]]),
        ])  # fmt: skip
    attn = recs.get("AttnLRP")
    if attn is not None:
        seconds, _ = cpu(corpus, "AttnLRP", attn)
        rows.append([
            CORPORA[corpus], "AttnLRP", fs.fmt(fs.bootstrap(np.array(attn["aopc"]))),
            fs.fmt(fs.bootstrap(np.array(attn["drop11"]))), f"{seconds:.3f}",
            "", paired(recs, "AttnLRP", names["iba-faithful"]), "", "", "",
        ])  # fmt: skip
    return rows, points


HEAD = [
    "corpus", "explainer (training instances)", "AOPC", "drop at 11 %",
    "CPU-s", "fit (CPU-min)", "d AOPC vs iba-faithful", "d AOPC vs AttnLRP",
    "d AOPC vs IG", "d AOPC vs its teacher",
]  # fmt: skip


def rst_table(rows: List[List[str]], title: str) -> str:
    lines = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    for row in [HEAD] + rows:
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {cell}" for cell in row[1:]]
    return "\n".join(lines) + "\n"


def figure(points: Dict[str, Dict[str, Any]], path: Path) -> None:
    from matplotlib.figure import Figure

    from captum_iba.visualization import plot_cost_faithfulness

    fig = Figure(figsize=(12, 8.4), layout="constrained")
    for i, (corpus, pts) in enumerate(points.items()):
        ax = fig.add_subplot(2, 2, i + 1)
        n = {"imdb": 100}.get(corpus, 200)
        plot_cost_faithfulness(
            pts, highlight=[k for k in pts if k.startswith("amortized")],
            title=f"{CORPORA[corpus]} (report split, n={n})", ax=ax,
        )  # fmt: skip
    fig.savefig(path, dpi=120)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/faithfulness")
    parser.add_argument("--docs", default="docs")
    args = parser.parse_args(argv)
    rows, points = [], {}
    for corpus in CORPORA:
        r, p = rows_of(Path(args.out), corpus)
        rows += r
        if p:
            points[corpus] = p
    docs = Path(args.docs)
    text = rst_table(rows, "Report splits: amortized IBA, means and paired d [95 % CI]")
    (docs / "_generated" / "amortized_summary.rst").write_text(text)
    print(text)
    figure(points, docs / "_static" / "amortized_tradeoff_all.png")


if __name__ == "__main__":
    main()
