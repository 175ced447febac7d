"""The amortized ablation's table for docs/amortized.rst (SST-2 search split).

Reads the study's cached records (``--out``) and writes
``docs/_generated/amortized_search_sst2.rst``: every ``iba-amortized``
candidate, ``iba-faithful`` at layer index 4 and random, with paired
differences against ``iba-faithful l4``::

    python experiments/amortized/search_table.py --out /work/results_fs
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import faithfulness_study as fs  # noqa: E402

REF = "iba-faithful l4"


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


if __name__ == "__main__":
    main()
