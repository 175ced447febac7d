"""The search of issue 89 (exploratory): ``iba-surrogate`` on words against
``iba-deletion``, LIME at the same number of forward passes and random, on
SST-2's SEARCH split (``faithfulness_study.split_indices("sst2", "search")``:
dev half A; never the report split) with the project's fine-tuned MiniLM.

Per method: the fair degradation test (deletion, levels k/9, the gold
label; ``faithfulness_study.fair_test``), per instance the first level's
drop (``drop11``) and AOPC, and the CPU-seconds of the scorer
(``time.process_time``, one torch thread, every method in this one
process); paired differences with 95 % bootstrap intervals (the same
resamples of the instances for both methods)::

    CAPTUM_IBA_CACHE=/tmp/ciba-cache python experiments/word_surrogate_search.py \\
        --n 48 --budgets 16,32,64 --out experiments/word_surrogate_results

The surrogate's variants: ``iba-surrogate-<A>`` (A ablations, the default
prior weight 1 and rank outcome), ``iba-surrogate-rule`` (the default budget,
16 to 64 by the words' number), ``iba-surrogate-<A>-log-odds`` (the outcome
untransformed) and ``iba-surrogate-<A>-p<w>`` (the prior's weight), the last
two at the middle budget. ``LIME-<A+1>``: LIME with A + 1 samples - the
surrogate's A ablation passes and its prior's one forward pass (its backward
pass is not counted).
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import faithfulness_study as fs  # noqa: E402

from captum_iba.app.models import load_classifier  # noqa: E402
from captum_iba.evaluation import Resources, build_scorers, encode  # noqa: E402

#: The variants' prior weights tried at the middle budget.
PENALTIES = (0.25, 4.0)


def search_encoded(n: int, tokenizer: Any) -> Dict[str, Any]:
    """The first ``n`` instances of SST-2's search split (its seeded order),
    encoded as the faithfulness study encodes them."""
    data, idx = fs.split_indices("sst2", "search")
    idx = idx[:n]
    data = data.subset(idx)
    enc = encode(tokenizer, data.texts, data.text_pairs, fs.MAX_LENGTH["sst2"])
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "token_type_ids": None,
        "labels": torch.tensor(data.labels),
        "rows": list(idx),
    }


def methods(budgets: Sequence[int]) -> Dict[str, tuple]:
    """Name -> (registered method, its options)."""
    out: Dict[str, tuple] = {"iba-deletion": ("iba-deletion", {})}
    for a in budgets:
        out[f"iba-surrogate-{a}"] = ("iba-surrogate", {"ablations": a})
        out[f"LIME-{a + 1}"] = ("LIME", {"lime_samples": a + 1})
    out["iba-surrogate-rule"] = ("iba-surrogate", {})
    mid = sorted(budgets)[len(budgets) // 2]
    out[f"iba-surrogate-{mid}-log-odds"] = (
        "iba-surrogate",
        {"ablations": mid, "surrogate_outcome": "log-odds"},
    )
    for p in PENALTIES:
        out[f"iba-surrogate-{mid}-p{p:g}"] = (
            "iba-surrogate",
            {"ablations": mid, "penalty": p},
        )
    out["random"] = ("random", {})
    return out


def run(name: str, spec: tuple, model: Any, tok: Any, enc: Dict[str, Any]) -> dict:
    method, options = spec
    scorer = build_scorers(
        [method], Resources(model, tok), method_options={method: options}
    )[method]
    scores, cpu = fs.score(scorer, enc, 16)
    result = fs.fair_test(model, tok, enc, scores, name)
    return {"name": name, "cpu": cpu, **fs.per_instance(result)}


def paired(a: List[float], b: List[float]) -> str:
    return fs.fmt(fs.bootstrap(np.asarray(a) - np.asarray(b)), signed=True)


def report(records: Dict[str, dict], budgets: Sequence[int]) -> str:
    lines = [
        "| method | AOPC | drop@11% | CPU-s / instance |",
        "|---|---|---|---|",
    ]
    for name, r in records.items():
        lines.append(
            f"| {name} | {fs.fmt(fs.bootstrap(np.asarray(r['aopc'])))} | "
            f"{fs.fmt(fs.bootstrap(np.asarray(r['drop11'])))} | "
            f"{np.mean(r['cpu']):.3f} |"
        )
    lines += [
        "",
        "| surrogate | against | AOPC diff | drop@11% diff |",
        "|---|---|---|---|",
    ]
    for name, r in records.items():
        if not name.startswith("iba-surrogate"):
            continue
        budget = name.split("-")[2]
        refs = ["iba-deletion", "random"]
        if budget.isdigit():
            refs.insert(1, f"LIME-{int(budget) + 1}")
        for ref in refs:
            if ref in records:
                o = records[ref]
                lines.append(
                    f"| {name} | {ref} | {paired(r['aopc'], o['aopc'])} | "
                    f"{paired(r['drop11'], o['drop11'])} |"
                )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--budgets", default="16,32,64")
    parser.add_argument("--only", default="", help="comma-separated method names")
    parser.add_argument("--model-dir", default=None, help="a classifier folder")
    parser.add_argument("--out", default="experiments/word_surrogate_results")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("CPU capability:", torch.backends.cpu.get_cpu_capability(), flush=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    path = Path(args.model_dir) if args.model_dir else fs._model_path(None, "sst2")
    model, tok = load_classifier(path)
    enc = search_encoded(args.n, tok)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records: Dict[str, dict] = {}
    wanted = set(filter(None, args.only.split(",")))
    for name, spec in methods(budgets).items():
        if wanted and name not in wanted:
            continue
        file = out / f"{name}.json"
        if file.exists():
            records[name] = json.loads(file.read_text())
            continue
        t0 = time.process_time()
        records[name] = run(name, spec, model, tok, enc)
        records[name].update(
            model=str(path),
            split="search",
            n=args.n,
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
        )
        file.write_text(json.dumps(records[name]))
        print(f"{name}: {time.process_time() - t0:.1f} CPU-s", flush=True)
    table = report(records, budgets)
    (out / "search.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
