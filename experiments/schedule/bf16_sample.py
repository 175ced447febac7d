"""bfloat16 against float32 for the default on a sample of the SST-2 report split.

Issue 54 asked for ``precision="auto"`` 's faithfulness re-check at the
default's 7 steps. On a CPU without native bfloat16 that precision is
emulated (about 20x slower), so this runs every ``--stride`` -th sentence of
the report split (sorted by length, as the study sorts them), the default
(``iba-deletion``: ``config="deletion"`` at the embeddings) in float32 and
in bfloat16 (forced with ``CAPTUM_IBA_CPU_BF16=on``), the fair degradation
test on both, and prints the mean AOPC and drop at 11 % with the paired
difference (95 % bootstrap interval, instances resampled). One thread.

Usage::

    python experiments/schedule/bf16_sample.py [--stride 5] [--steps 7]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from faithfulness_study import (  # noqa: E402
    BATCH,
    _model_path,
    encoded,
    fair_test,
    load_classifier,
    per_instance,
    score,
)

from captum_iba.evaluation.iba import IBAScorer  # noqa: E402


def interval(diff: np.ndarray, n_boot: int = 2000) -> tuple:
    """95 % percentile bootstrap interval of the mean of ``diff``."""
    rng = np.random.default_rng(0)
    means = diff[rng.integers(0, len(diff), (n_boot, len(diff)))].mean(1)
    return tuple(np.percentile(means, [2.5, 97.5]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stride", type=int, default=5)
    parser.add_argument("--steps", type=int, default=7)
    args = parser.parse_args()
    os.environ["CAPTUM_IBA_CPU_BF16"] = "on"
    torch.set_num_threads(1)
    model, tok = load_classifier(_model_path(None, "sst2"), "cpu")
    enc = encoded("sst2", "report", tok)
    keep = list(range(0, len(enc["rows"]), args.stride))
    enc = {
        k: v if v is None else (v[keep] if torch.is_tensor(v) else [v[i] for i in keep])
        for k, v in enc.items()
    }
    print(f"SST-2 report split, every {args.stride}th sentence: n={len(keep)}")
    records = {}
    for precision in ("float32", "bf16"):
        scorer = IBAScorer(
            model, "embeddings", config="deletion", tokenizer=tok, setting="fair",
            steps=args.steps, precision=precision,
        )  # fmt: skip
        start = time.process_time()
        scores, _ = score(scorer, enc, BATCH["sst2"])
        seconds = time.process_time() - start
        records[precision] = per_instance(fair_test(model, tok, enc, scores, precision))
        aopc = np.mean(records[precision]["aopc"])
        print(f"{precision}: AOPC {aopc:.4f}, scoring {seconds:.1f} CPU-s", flush=True)
    for key in ("aopc", "drop11"):
        a, b = np.array(records["bf16"][key]), np.array(records["float32"][key])
        lo, hi = interval(a - b)
        print(f"{key}: bf16 - float32 = {(a - b).mean():+.4f} [{lo:+.4f}, {hi:+.4f}]")


if __name__ == "__main__":
    main()
