"""The first ``captum-iba explain`` of a newcomer who is offline: how long
until the package's own message (issue 31, item 10).

Each run is a fresh ``python -m captum_iba explain "..."`` with an empty
model cache (``$CAPTUM_IBA_CACHE`` a new temporary folder, so the default
model must be fine-tuned) and no local corpus (``$CAPTUM_IBA_DATA`` an empty
folder), so the fine-tune's corpus is looked for on the Hugging Face hub. On
a machine that cannot reach the hub the run must end with the missing-corpus
message; the script prints the seconds it took, the exit code and that
message's start, with ``HF_HUB_OFFLINE`` unset and set, and the CPU
(``torch.backends.cpu.get_cpu_capability()``). Run it offline (here: a
machine whose only network is a package index), else it measures the online
path. ``--repo`` runs another checkout (e.g. a worktree of an earlier
commit) the same way.

Usage::

    python benchmarks/bench_offline_first_run.py
    python benchmarks/bench_offline_first_run.py --repo ../old --repeats 3
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = "A gripping, beautifully acted film that never drags."


def first_run(repo: str, offline_flag: bool) -> Tuple[float, int, str]:
    """One first run: (seconds, exit code, the last line it printed)."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as data:
        env = dict(os.environ, CAPTUM_IBA_CACHE=cache, CAPTUM_IBA_DATA=data)
        env["PYTHONPATH"] = repo
        env.pop("HF_HUB_OFFLINE", None)
        env.pop("HF_DATASETS_OFFLINE", None)
        if offline_flag:
            env["HF_HUB_OFFLINE"] = "1"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "captum_iba", "explain", TEXT],
            env=env,
            cwd=data,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
    lines = (proc.stdout + proc.stderr).strip().splitlines() or [""]
    return seconds, proc.returncode, lines[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=ROOT, help="the checkout to run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch

    print(
        f"CPU capability: {torch.backends.cpu.get_cpu_capability()}; "
        f"{os.cpu_count()} CPUs; repo {os.path.abspath(args.repo)}"
    )
    for offline_flag in (False, True):
        seconds: List[float] = []
        last: Dict[str, object] = {}
        for _ in range(args.repeats):
            s, code, line = first_run(args.repo, offline_flag)
            seconds.append(s)
            last = {"code": code, "line": line}
        label = "HF_HUB_OFFLINE=1" if offline_flag else "HF_HUB_OFFLINE unset"
        print(
            f"{label}: median {statistics.median(seconds):.1f} s "
            f"(min {min(seconds):.1f}, max {max(seconds):.1f}, n={len(seconds)}); "
            f"exit {last['code']}; says: {str(last['line'])[:160]}"
        )


if __name__ == "__main__":
    main()
