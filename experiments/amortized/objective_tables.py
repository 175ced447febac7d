"""Issue 30's tables: the explainers trained on the deletion objective against
the distilled one, their teacher and the anchors, on one split of each corpus.

Reads the faithfulness study's per-instance records (``OUT/<corpus>/<split>/``)
and prints, per corpus, every method's means with 95 % bootstrap intervals
(drop at 11 %, AOPC, comprehensiveness, sufficiency, CPU-s) and the paired
differences (drop at 11 %, AOPC) against the references that are there::

    python experiments/amortized/objective_tables.py --out /work/results30 \
        --corpora sst2,rte,ag_news,imdb --split search

``--docs docs`` also writes the compact tables (one row per method) as
``docs/_generated/objective_<split>_<corpus>.rst``; ``--plot PNG`` draws AOPC
against CPU-s per instance, one panel per corpus (the explainers at the study's
training size, fitted in domain, with their refinements; the anchors).
"""

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import faithfulness_study as fs  # noqa: E402

#: The references of the paired differences (those present in a folder); the
#: distilled explainer is the one fitted in domain, at the study's size (500
#: instances; IMDB's 250).
DISTILLED = (
    "iba-amortized (distil iba-deletion, n=500)",
    "iba-amortized (distil iba-deletion, n=250)",
)
REFS = DISTILLED + ("iba-deletion", "AttnLRP", "IG")


#: Short names of the references in the compact table's header.
SHORT = {**{d: "distilled" for d in DISTILLED}, **{r: r for r in REFS[2:]}}


def present_refs(records: dict) -> list:
    """The references in ``records``: the first distilled one, then the rest."""
    distilled = [r for r in DISTILLED if r in records][:1]
    return distilled + [r for r in REFS[2:] if r in records]


def compact(records: dict) -> str:
    """Markdown: one row per method - n, AOPC, drop at 11 %, CPU-s and the
    paired AOPC difference against each reference present (95 % interval)."""
    refs = present_refs(records)
    head = "| method | n | AOPC | drop11 | CPU-s | " + " | ".join(
        f"d AOPC vs {SHORT[r]}" for r in refs
    )
    lines = [head + " |", "|" + "---|" * (5 + len(refs))]
    for m in sorted(records, key=lambda m: fs.np.mean(records[m]["aopc"])):
        r = records[m]
        cells = [str(len(r["aopc"]))]
        cells += [f"{fs.np.mean(r[k]):.3f}" for k in ("aopc", "drop11")]
        cells.append(fs._cost_cell(r))
        for ref in refs:
            if ref == m:
                cells.append("")
                continue
            diff = fs.np.array(r["aopc"]) - fs.np.array(records[ref]["aopc"])
            cells.append(fs.fmt(fs.bootstrap(diff), signed=True))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The plotted methods' short labels (prefixes; a refinement of k steps adds
#: "+rk"): dist = distilled, obj = the deletion objective, obj+dist = both.
LABELS = {
    "iba-amortized deletion objective keep 0.3 + distil": "obj+dist",
    "iba-amortized deletion objective keep 0.3": "obj",
    "iba-amortized (distil iba-deletion": "dist",
}
ANCHORS = ("random", "IG", "AttnLRP", "iba-deletion")
TITLES = {"sst2": "SST-2", "rte": "RTE", "ag_news": "AG News", "imdb": "IMDB"}


def plotted(records: dict) -> dict:
    """``label -> (CPU-s, AOPC, (low, high))`` for the plot: the anchors and
    the explainers at the study's size (500; IMDB 250) fitted in domain."""
    points = {}
    for m, r in records.items():
        label = m if m in ANCHORS else None
        size = ("n=500)" in m or "n=250)" in m) and "fit on" not in m
        for prefix, short in LABELS.items() if label is None and size else ():
            if m.startswith(prefix):
                refine = m.rsplit(", refine ", 1)
                label = short + (f" +r{refine[1]}" if len(refine) == 2 else "")
                break
        if label is not None:
            mean, low, high = fs.bootstrap(fs.np.array(r["aopc"]))
            points[label] = (float(fs.np.mean(r["cpu_seconds"])), mean, (low, high))
    return points


def plot(out: Path, corpora: Sequence[str], split: str, path: Path) -> None:
    """AOPC against CPU-s per instance, one panel per corpus."""
    from matplotlib.figure import Figure

    from captum_iba.visualization import plot_cost_faithfulness

    fig = Figure(figsize=(12, 8.4), layout="constrained")
    for i, corpus in enumerate(corpora):
        records = fs.load_records(out, corpus, split)
        n = max((len(r["aopc"]) for r in records.values()), default=0)
        points, name = plotted(records), TITLES.get(corpus, corpus)
        plot_cost_faithfulness(
            points, highlight=[k for k in points if k not in ANCHORS],
            title=f"{name} ({split} split, n={n})", ax=fig.add_subplot(2, 2, i + 1),
        )  # fmt: skip
    fig.savefig(path, dpi=120)


def fits(out: Path) -> str:
    """Markdown: every cached explainer's fit (``OUT/explainers``) - its
    corpus, kind, training instances and CPU-minutes (teacher included)."""
    lines = [
        "| explainer | kind | training instances | fit CPU-min |",
        "|---|---|---|---|",
    ]
    for record in sorted((out / "explainers").glob("*/explainer.json")):
        found = fs.json.loads(record.read_text())
        settings, stats = found["key"]["settings"], found["stats"]
        deletion = (settings.get("options") or {}).get("removal") == "attention"
        kind = "objective" if deletion else "distilled"
        if deletion and settings.get("distil"):
            kind += " + distil"
        minutes = stats["cpu_seconds"] / 60
        name, n = record.parent.name, stats["instances"] // settings.get("epochs", 1)
        lines.append(f"| {name} | {kind} | {n} | {minutes:.1f} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the study's --out folder")
    parser.add_argument("--corpora", default="sst2,rte,ag_news,imdb")
    parser.add_argument("--split", choices=("search", "report"), default="search")
    parser.add_argument(
        "--compact", action="store_true", help="one row per method (AOPC)"
    )
    parser.add_argument(
        "--docs",
        help="also write the compact tables as docs/_generated/"
        "objective_<split>_<corpus>.rst under this folder",
    )
    parser.add_argument(
        "--fits", action="store_true", help="the cached explainers' fit costs"
    )
    parser.add_argument("--plot", help="also draw AOPC against CPU-s to this PNG")
    args = parser.parse_args(argv)
    if args.plot:
        plot(Path(args.out), args.corpora.split(",")[:4], args.split, Path(args.plot))
    if args.fits:
        print(fits(Path(args.out)))
        return
    for corpus in args.corpora.split(","):
        records = fs.load_records(Path(args.out), corpus, args.split)
        if not records:
            print(f"## {corpus} {args.split}: no records\n")
            continue
        print(f"## {corpus} {args.split}\n")
        if args.compact or args.docs:
            table = compact(records)
            print(table + "\n")
            if args.docs:
                name = f"objective_{args.split}_{corpus}.rst"
                path = Path(args.docs) / "_generated" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                title = (
                    f"{corpus}, {args.split} split: means; paired AOPC differences "
                    "with 95 % bootstrap intervals; CPU-s per instance, one thread"
                )
                path.write_text(fs.to_rst(table, title))
            continue
        print(fs.table(records) + "\n")
        methods = [m for m in records if m not in ("random",)]
        print(fs.paired_table(records, methods, present_refs(records)) + "\n")


if __name__ == "__main__":
    main()
