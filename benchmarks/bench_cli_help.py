"""Seconds to print ``captum-iba --help`` and each command's help.

Each help runs as a fresh ``python -m captum_iba ... --help`` process, several
times; the script prints the median wall seconds and the median CPU seconds
(user + system of the child) per help, next to a process that only imports
torch (what every help cost before the parser stopped importing the stack)
and the ratio between the two. Run it on an idle machine: wall seconds
measure the machine's load as much as the command.

Usage::

    python benchmarks/bench_cli_help.py            # 5 runs of each
    python benchmarks/bench_cli_help.py --repeats 10
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import List, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPS = (
    [],
    ["explain"],
    ["evaluate"],
    ["attribute"],
    ["reproduce"],
)


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: Sequence[str], repeats: int) -> Tuple[float, float]:
    """Median wall and CPU seconds of ``python argv...``, ``repeats`` times."""
    env = dict(
        os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    walls: List[float] = []
    cpus: List[float] = []
    for _ in range(repeats):
        cpu, start = _child_cpu(), time.perf_counter()
        subprocess.run(
            [sys.executable, *argv], check=True, capture_output=True, env=env, cwd=ROOT
        )
        walls.append(time.perf_counter() - start)
        cpus.append(_child_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    capability = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"CPU capability {capability}; {os.cpu_count()} cores; load average "
        f"{load:.1f} at the start; {args.repeats} runs each, medians"
    )
    torch_wall, torch_cpu = timed(["-c", "import torch"], args.repeats)
    name = "python -c 'import torch'"
    print(f"{name:<36} wall {torch_wall:6.2f} s  CPU {torch_cpu:6.2f} s")
    for sub in HELPS:
        wall, cpu = timed(["-m", "captum_iba", *sub, "--help"], args.repeats)
        name = " ".join(["captum-iba", *sub, "--help"])
        print(
            f"{name:<36} wall {wall:6.2f} s  CPU {cpu:6.2f} s  "
            f"(CPU {cpu / torch_cpu:.2f} x importing torch)"
        )


if __name__ == "__main__":
    main()
