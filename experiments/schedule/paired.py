"""Paired differences of the schedule candidates against the 0.3 schedule.

Reads the faithfulness study's per-instance records (``OUT/<corpus>/<split>/``)
and prints, per candidate, the mean AOPC and drop at 11 %, the paired mean
difference against ``iba-deletion s10 lr3`` with a 95 % percentile bootstrap
interval (instances resampled, seed 0), and the CPU-s ratio.

Usage::

    python experiments/schedule/paired.py OUT/sst2/report [BASE.json]

(``BASE.json``: another reference in the same folder, e.g.
``iba-deletion_s7_lr4.json`` for the candidates against the 7-step default.)
"""

import json
import sys
from pathlib import Path

import numpy as np

BASE = "iba-deletion_s10_lr3.json"


def interval(diff: np.ndarray, n_boot: int = 2000) -> tuple:
    """95 % percentile bootstrap interval of the mean of ``diff``."""
    rng = np.random.default_rng(0)
    means = diff[rng.integers(0, len(diff), (n_boot, len(diff)))].mean(1)
    return tuple(np.percentile(means, [2.5, 97.5]))


def main() -> None:
    folder = Path(sys.argv[1])
    name = sys.argv[2] if len(sys.argv) > 2 else BASE
    base = json.loads((folder / name).read_text())
    print(f"{folder}: n={len(base['aopc'])}, against {base['method']}")
    print(
        "| schedule | AOPC | d AOPC [95 %] | drop@11 % | d drop [95 %] | CPU-s ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for path in sorted(folder.glob("iba-deletion_s*.json")):
        rec = json.loads(path.read_text())
        assert rec["rows"] == base["rows"], f"{path}: other instances"
        cells = []
        for key in ("aopc", "drop11"):
            a, b = np.array(rec[key]), np.array(base[key])
            lo, hi = interval(a - b)
            diff = f"{(a - b).mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"
            cells += [f"{a.mean():.3f}", diff]
        ratio = np.median(rec["cpu_seconds"]) / np.median(base["cpu_seconds"])
        print(f"| {rec['method']} | " + " | ".join(cells) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
