"""The SST-2 comparison of issue #3: IBA (three priors), IG, LIME and random,
in the "paper" and the "fair" settings, on SST-2 dev sentences.

Scores that do not depend on the setting (IBA with each prior, random) are
computed once and tested under both settings' conventions; every method's
scores are cached in ``--out`` so that a re-run only repeats the tests.

Usage::

    python experiments/sst2_table.py --n 300 --out results/sst2_table
"""

import argparse
import json
import time
from pathlib import Path
from typing import Any, Dict, Tuple

import torch

from captum_iba import (
    compare,
    degradation_test,
    encoder_layers,
    make_scorers,
    plot_degradation_curves,
)
from captum_iba.app.data import load_dataset
from captum_iba.app.finetune import get_finetuned_model
from captum_iba.app.models import load_classifier
from captum_iba.attr import paper_layer_index
from captum_iba.evaluation import (
    IBAScorer,
    encode,
    fit_dataset_prior,
    get_preset,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--model", help="default: the cached SST-2 MiniLM")
    parser.add_argument("--out", default="results/sst2_table")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lime-max-length", type=int, default=128)
    parser.add_argument("--lime-samples", type=int, default=200, help="fair LIME")
    parser.add_argument("--ig-steps", type=int, default=50, help="fair IG")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)

    model, tok = load_classifier(args.model or get_finetuned_model("sst2"))
    data = load_dataset("sst2", "dev", max_examples=args.n)
    order = sorted(range(len(data)), key=lambda i: len(data.texts[i]))
    data = data.subset(order)
    enc = encode(tok, data.texts, max_length=128)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    labels = torch.tensor(data.labels)
    index = paper_layer_index(model)
    layer = encoder_layers(model)[index]
    train = load_dataset("sst2", "train", max_examples=1000)

    # name -> (scorer, settings it is tested in)
    plan: Dict[str, Tuple[Any, Tuple[str, ...]]] = {}
    both = ("paper", "fair")
    for setting, methods in (("fair", ("IG", "LIME")), ("paper", ("IG", "LIME-text"))):
        for name, scorer in make_scorers(
            model,
            tok,
            setting=setting,
            methods=methods,
            lime_max_length=args.lime_max_length,
            **(
                dict(lime_samples=args.lime_samples, ig_steps=args.ig_steps)
                if setting == "fair"
                else {}
            ),
        ).items():
            plan[f"{name} [{setting}]"] = (scorer, (setting,))
    plan["random"] = (make_scorers(model, tok, methods=("random",))["random"], both)
    for prior in ("paper", "reference", "dataset"):
        obj = (
            fit_dataset_prior(model, tok, layer, train) if prior == "dataset" else prior
        )
        scorer = IBAScorer(model, layer, prior=obj, tokenizer=tok, name="IBA")
        scorer.settings["layer_index"] = index
        plan[f"IBA ({prior})"] = (scorer, both)

    results: Dict[str, Dict[str, Any]] = {"paper": {}, "fair": {}}
    timing: Dict[str, float] = {}
    for name, (scorer, settings) in plan.items():
        cache = out / f"scores_{_slug(name)}.pt"
        if cache.exists():
            saved = torch.load(cache, weights_only=True)  # no unpickling
            scores, seconds = saved["scores"], saved["seconds_per_instance"]
        else:
            start = time.perf_counter()
            scores = torch.cat(
                [
                    scorer.attribute(
                        ids[s : s + args.batch_size],
                        target=labels[s : s + args.batch_size],
                        attention_mask=mask[s : s + args.batch_size],
                    )
                    for s in range(0, len(labels), args.batch_size)
                ]
            )
            seconds = (time.perf_counter() - start) / len(labels)
            torch.save({"scores": scores, "seconds_per_instance": seconds}, cache)
        timing[name] = seconds
        print(f"{name}: {seconds:.3f} s/instance", flush=True)
        for setting in settings:
            test = get_preset(setting).test.with_tokenizer(
                tok, max_examples_per_batch=128
            )
            label = name.split(" [")[0]
            results[setting][label] = degradation_test(
                model,
                ids,
                scores,
                target=labels,
                attention_mask=mask,
                options=test,
                metadata=dict(
                    method=label,
                    attribution=dict(
                        scorer.settings,
                        setting=setting,
                        seconds_per_instance=seconds,
                        n=len(labels),
                    ),
                ),
            )
            results[setting][label].to_json(out / f"{setting}_{_slug(label)}.json")

    summary = {}
    for setting, res in results.items():
        table = compare(res)
        (out / f"{setting}.md").write_text(table.to_markdown() + "\n")
        plot_degradation_curves(
            res,
            normalized=True,
            title=f"SST-2 dev, {setting} setting (n={len(labels)})",
            save_path=out / f"curves_{setting}.png",
        )
        summary[setting] = table.rows
        print(f"\n## {setting} setting (n={len(labels)})\n{table.to_markdown()}")
    (out / "summary.json").write_text(
        json.dumps({"rows": summary, "seconds_per_instance": timing}, indent=2)
    )


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


if __name__ == "__main__":
    main()
