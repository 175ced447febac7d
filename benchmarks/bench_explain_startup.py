"""What one ``captum-iba explain`` loads: modules, and seconds after torch.

Each run is a fresh process that imports torch and transformers first (their
cost is the same for every version of this package and is printed apart),
then runs ``captum-iba explain`` on a tiny random BERT saved in a temporary
folder (so no fine-tune and no download), and prints the modules of the
package loaded, the other modules loaded, whether matplotlib and the corpus
engine were imported, and the wall and CPU seconds from after torch to the
end. ``--repo`` runs another checkout of the package (e.g. a worktree of an
earlier commit) the same way, so that two versions are compared in one run.

Usage::

    python benchmarks/bench_explain_startup.py                  # this checkout
    python benchmarks/bench_explain_startup.py --repo ../old --repeats 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import json, sys, time, resource
import torch, transformers, transformers.models.bert  # the same cost everywhere
base = set(sys.modules)
wall, cpu = time.perf_counter(), time.process_time()
from captum_iba.app.cli import main
import io, contextlib
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
new = sorted(set(sys.modules) - base)
print(json.dumps({
    "code": code,
    "wall": time.perf_counter() - wall,
    "cpu": time.process_time() - cpu,
    "package": len([m for m in new if m.startswith("captum_iba")]),
    "others": len([m for m in new if not m.startswith("captum_iba")]),
    "matplotlib": "matplotlib" in sys.modules,
    "engine": "captum_iba.app.engine" in sys.modules,
    "reproduce": "captum_iba.app.reproduce" in sys.modules,
    "lime": "lime" in sys.modules,
}))
"""


def tiny_model(folder: str) -> str:
    """A tiny random BERT classifier with a small vocabulary, saved."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film"]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(words)})
    cfg = BertConfig(
        vocab_size=len(words), hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32,
    )  # fmt: skip
    BertForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def run(repo: str, argv: List[str]) -> Dict[str, object]:
    env = dict(os.environ, PYTHONPATH=repo, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"failed: {argv}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", help="a checkout (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch

    repos = args.repo or [ROOT]
    print(f"CPU capability: {torch.backends.cpu.get_cpu_capability()}")
    with tempfile.TemporaryDirectory() as folder:
        model = tiny_model(folder)
        for method in ("iba-deletion", "ig"):
            argv = ["explain", "a fine film", "--model", model, "--method", method]
            for repo in repos:
                runs = [run(repo, argv) for _ in range(args.repeats)]
                first = runs[0]
                wall = statistics.median(float(r["wall"]) for r in runs)
                cpu = statistics.median(float(r["cpu"]) for r in runs)
                print(
                    f"{os.path.basename(os.path.abspath(repo)):>12} {method:>13}: "
                    f"package modules {first['package']:>3}, other modules "
                    f"{first['others']:>4}, matplotlib {first['matplotlib']!s:>5}, "
                    f"engine {first['engine']!s:>5}, reproduce "
                    f"{first['reproduce']!s:>5}, lime {first['lime']!s:>5}; after "
                    f"torch: {wall:.2f} s wall, {cpu:.2f} CPU-s (median of "
                    f"{len(runs)})"
                )


if __name__ == "__main__":
    main()
