"""The model-randomisation sanity check (Adebayo et al., 2018) on SST-2.

For each method, the fine-tuned MiniLM-L6 is randomised stage by stage from
the top (head, blocks 5..0, embeddings) with
:func:`captum_iba.metrics.cascading_randomization`, and the Spearman rank
correlation between the attributions of the trained and of the randomised
model is kept per stage and sentence. The methods are registered scorers in
the fair preset, built for each randomised model by
:func:`captum_iba.evaluation.method_explainer`; the class explained is the
gold label at every stage. One JSON file per method under ``--out`` (a method
already there is skipped, so a run can be resumed), then the plot and the
docs table::

    PYTHONPATH=$PWD python experiments/sanity_check.py run --n 50 \\
        --n-for IG=30,LIME=20 --methods random,IBA,iba-faithful,IG,LIME,AttnLRP \\
        --out /work/results_sanity
    PYTHONPATH=$PWD python experiments/sanity_check.py report \\
        --out /work/results_sanity --docs docs
"""

import argparse
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

from captum_iba.app.data import HELDOUT_SPLIT, load_dataset
from captum_iba.app.models import load_classifier
from captum_iba.evaluation import attnlrp_available, encode, method_explainer
from captum_iba.metrics import (
    RandomizationOptions,
    RandomizationResult,
    cascading_randomization,
)
from captum_iba.visualization import plot_randomization

#: The bottleneck layer of both IBA configurations: the default index (4 of 6),
#: the layer the faithfulness study chose for iba-faithful on SST-2.
LAYER_INDEX = 4
#: Per method: instances per explanation call.
BATCH = {"LIME": 4, "IG": 8}
ATTNLRP_HINT = (
    "in an environment with transformers>=4.51,<5 and lxt (pip install "
    "'captum-iba[attnlrp]' 'transformers<5' torchvision): PYTHONPATH=$PWD python "
    "experiments/sanity_check.py run --methods AttnLRP --out /work/results_sanity"
)


def sentences(tokenizer, n: int) -> Dict[str, torch.Tensor]:
    """``n`` SST-2 dev sentences drawn with seed 0, in the drawn order."""
    data = load_dataset("sst2", HELDOUT_SPLIT["sst2"])
    rows = np.random.RandomState(0).permutation(len(data))[:n].tolist()
    data = data.subset(rows)
    enc = encode(tokenizer, data.texts, None, 128)
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "labels": torch.tensor(data.labels),
        "rows": rows,
    }


def sizes(args: argparse.Namespace) -> Dict[str, int]:
    """``--n-for IG=30,LIME=20`` as a dict (the first sentences of the same draw)."""
    pairs = [p.split("=") for p in args.n_for.split(",") if p]
    return {name: int(n) for name, n in pairs}


def run(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    from captum_iba.app.finetune import get_finetuned_model

    model, tok = load_classifier(args.model_dir or get_finetuned_model("sst2"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for method in [m for m in args.methods.split(",") if m]:
        path = out / f"{method}.json"
        if path.exists():
            print(f"{method}: cached in {path}", flush=True)
            continue
        if method == "AttnLRP" and not attnlrp_available()[0]:
            print(f"AttnLRP: lxt does not import here; run it {ATTNLRP_HINT}")
            continue
        n = sizes(args).get(method, args.n)
        data = sentences(tok, n)
        width = int(data["attention_mask"].sum(1).max())
        explain = method_explainer(method, tok, "fair", layer_index=LAYER_INDEX)
        t0, c0 = time.perf_counter(), time.process_time()
        result = cascading_randomization(
            explain,
            model,
            data["input_ids"][:, :width],
            data["labels"],
            attention_mask=data["attention_mask"][:, :width],
            tokenizer=tok,
            options=RandomizationOptions(
                max_examples_per_batch=BATCH.get(method, 16), show_progress=True
            ),
            method=method,
        )
        result.settings.update(
            corpus="sst2",
            split=HELDOUT_SPLIT["sst2"],
            rows=data["rows"],
            target="gold label",
            layer_index=LAYER_INDEX,
            preset="fair",
            cpu_seconds_total=time.process_time() - c0,
            wall_seconds=time.perf_counter() - t0,
            torch_threads=torch.get_num_threads(),
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
        )
        result.to_json(path)
        print(f"{method}: n={n}, {result.settings['cpu_seconds_total']:.0f} CPU-s")
        print(result.to_markdown(), flush=True)


def load(out: Path, methods: List[str]) -> Dict[str, RandomizationResult]:
    found = {m: out / f"{m}.json" for m in methods}
    return {m: RandomizationResult.from_json(p) for m, p in found.items() if p.exists()}


def to_rst(results: Dict[str, RandomizationResult], variant: str) -> str:
    """A list-table: methods as rows, stages as columns, mean [95 % CI]."""
    first = next(iter(results.values()))
    lines = [
        f".. list-table:: {variant}: mean over sentences [95 % bootstrap CI]",
        "   :header-rows: 1",
        "",
        "   * - method",
        "     - n",
        "     - CPU-s",
    ]
    lines += [f"     - {stage}" for stage in first.stages]
    for name, res in results.items():
        lines += [
            f"   * - {name}",
            f"     - {res.num_instances}",
            f"     - {res.settings.get('cpu_seconds_total', float('nan')):.0f}",
        ]
        for row in res.summary(variant):
            lines.append(
                f"     - {row['mean']:.2f} [{row['low']:.2f}, {row['high']:.2f}]"
            )
    return "\n".join(lines) + "\n"


#: A method passes when, for the fully randomised model, the 95 % interval of
#: its mean correlation lies inside (-BOUND, BOUND) in both variants.
BOUND = 0.2


def verdict_rst(results: Dict[str, RandomizationResult]) -> str:
    """The fully randomised model: both correlations, and pass or fail."""
    lines = [
        ".. list-table:: The fully randomised model: mean [95 % CI]; passes when "
        f"both intervals lie inside (-{BOUND}, {BOUND})",
        "   :header-rows: 1",
        "",
        "   * - method",
        "     - spearman",
        "     - spearman_abs",
        "     - passes",
    ]
    for name, res in results.items():
        rows = [res.summary(v)[-1] for v in ("spearman", "spearman_abs")]
        ok = all(-BOUND < r["low"] and r["high"] < BOUND for r in rows)
        lines.append(f"   * - {name}")
        lines += [
            f"     - {r['mean']:.2f} [{r['low']:.2f}, {r['high']:.2f}]" for r in rows
        ]
        lines.append(f"     - {'yes' if ok else 'no'}")
    return "\n".join(lines) + "\n"


def agreement_rst(results: Dict[str, RandomizationResult]) -> str:
    """How far each stage destroys the model (from the largest run)."""
    res = max(results.values(), key=lambda r: r.num_instances)
    lines = [
        f".. list-table:: The randomised model (n={res.num_instances}): share of "
        "sentences whose prediction is unchanged, mean p(gold label)",
        "   :header-rows: 1",
        "",
        "   * - stage",
        "     - prediction kept",
        "     - p(label)",
        "   * - trained",
        "     - 1.00",
        f"     - {float(res.target_probs[0].mean()):.2f}",
    ]
    for row in res.summary():
        lines += [
            f"   * - {row['stage']}",
            f"     - {row['agreement']:.2f}",
            f"     - {row['target_prob']:.2f}",
        ]
    return "\n".join(lines) + "\n"


def report(args: argparse.Namespace) -> None:
    results = load(Path(args.out), [m for m in args.methods.split(",") if m])
    for name, res in results.items():
        print(f"\n## {name} (n={res.num_instances})\n\n{res.to_markdown('spearman')}")
        print(f"\n{res.to_markdown('spearman_abs')}")
    if args.docs:
        docs = Path(args.docs)
        (docs / "_generated").mkdir(parents=True, exist_ok=True)
        rst = verdict_rst(results) + "\n"
        rst += "".join(to_rst(results, v) + "\n" for v in ("spearman", "spearman_abs"))
        rst += agreement_rst(results)
        (docs / "_generated" / "sanity_sst2.rst").write_text(rst)
        plot_randomization(
            {f"{k} (n={r.num_instances})": r for k, r in results.items()},
            title="SST-2, MiniLM-L6: cascading randomisation (Adebayo et al., 2018)",
            save_path=docs / "_static" / "sanity_sst2.png",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("run", "report"))
    parser.add_argument("--methods", default="random,IBA,iba-faithful,IG,LIME,AttnLRP")
    parser.add_argument("--n", type=int, default=50, help="sentences per method")
    parser.add_argument(
        "--n-for",
        default="IG=30,LIME=20",
        help="fewer sentences for costly methods (the first of the same draw)",
    )
    parser.add_argument("--out", default="/work/results_sanity")
    parser.add_argument(
        "--model-dir", default=None, help="default: the cached fine-tune"
    )
    parser.add_argument("--docs", default=None, help="write the table and plot here")
    args = parser.parse_args()
    run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    main()
