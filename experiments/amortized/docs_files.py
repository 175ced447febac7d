"""The files of docs/amortized.rst made from the study's cached records.

* ``docs/_generated/amortized_search_sst2.rst``: the ablation (SST-2 search
  split): every ``iba-amortized`` candidate, ``iba-faithful`` at layer index 4
  and random, with differences paired against ``iba-faithful l4``;
* ``docs/_static/amortized_tradeoff_sst2.png``: the report split's
  cost-faithfulness plot (the study's plotting) with short labels, the
  anchors, and AttnLRP's point quoted from docs/faithfulness.rst (it runs in
  another environment)::

    python experiments/amortized/docs_files.py --out /work/results_fs
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import faithfulness_study as fs  # noqa: E402

REF = "iba-faithful l4"
#: Report-split methods on the plot, with short labels.
PLOTTED = {
    "random": "random",
    "LOO": "LOO",
    "IG": "IG",
    "iba-faithful (l4, chosen)": "iba-faithful",
    "iba-amortized (l4, distil)": "iba-amortized",
    "iba-amortized (l4, distil, refine 2)": "refine 2",
    "iba-amortized (l4, distil, refine 5)": "refine 5",
    "iba-amortized (l4, keep 0.3 + complement 1)": "budget+complement",
}
#: AttnLRP on the same report split (docs/faithfulness.rst): CPU-s, AOPC, CI.
ATTNLRP = (0.034, 0.484, (0.450, 0.518))


def report_plot(out: Path, docs: Path) -> None:
    """The report split's cost-faithfulness plot, short labels."""
    from captum_iba.visualization import plot_cost_faithfulness

    recs = fs.load_records(out, "sst2", "report")
    points = {}
    for name, label in PLOTTED.items():
        if name in recs:
            mean, low, high = fs.bootstrap(fs.np.array(recs[name]["aopc"]))
            cpu = float(fs.np.mean(recs[name]["cpu_seconds"]))
            points[label] = (cpu, mean, (low, high))
    points["AttnLRP (quoted)"] = ATTNLRP
    plot_cost_faithfulness(
        points,
        highlight=[k for k in points if k.startswith(("iba", "refine", "budget"))],
        title="SST-2 report split (n=200): amortized IBA",
        save_path=docs / "_static" / "amortized_tradeoff_sst2.png",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/faithfulness")
    parser.add_argument("--docs", default="docs")
    args = parser.parse_args()
    recs = fs.load_records(Path(args.out), "sst2", "search")
    keep = {m: r for m, r in recs.items() if m.startswith("iba-") or m == "random"}
    amortized = sorted(m for m in keep if m.startswith("iba-amortized"))
    title = f"SST-2 search split (n={len(keep[REF]['aopc'])}): means [95 % CI]"
    rst = fs.to_rst(fs.table(keep), title)
    rst += "\n" + fs.to_rst(
        fs.paired_table(keep, amortized, [REF]), "Paired against iba-faithful l4"
    )
    path = Path(args.docs) / "_generated" / "amortized_search_sst2.rst"
    path.write_text(rst)
    print(rst)
    report_plot(Path(args.out), Path(args.docs))


if __name__ == "__main__":
    main()
