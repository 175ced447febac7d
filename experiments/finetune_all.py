"""Fine-tunes MiniLM-L6 on each local corpus and prints held-out accuracies.

Usage (from the repository root)::

    PYTHONPATH=$PWD python experiments/finetune_all.py sst2 ag_news imdb rte

Each corpus uses the model ``captum-iba reproduce`` uses: its recipe in
``captum_iba.app.finetune.RECIPES`` with ``REPRODUCE_OVERRIDES`` (a number of
optimisation steps; 8-15 minutes each on a 2-core CPU), cached under
``$CAPTUM_IBA_CACHE`` or ``~/.cache/captum_iba``; an already cached model is
only checked and re-read. ``--quick`` uses the plain recipes instead (SST-2:
``explain``'s 5-minute recipe).
"""

import argparse
import json
import time

from captum_iba.app.finetune import (
    RECIPES,
    REPRODUCE_OVERRIDES,
    FineTuneOptions,
    get_finetuned_model,
    read_result,
)


def main() -> None:
    """Runs the fine-tuning of the corpora named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "datasets", nargs="*", default=["sst2", "ag_news", "imdb", "rte"]
    )
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument(
        "--quick", action="store_true", help="the plain recipes, not reproduce's"
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--num-threads",
        type=int,
        default=None,
        help="torch threads while training (1 is faster on a busy shared CPU)",
    )
    args = parser.parse_args()

    given = {}
    for key in ("lr", "steps", "max_train_examples"):
        if getattr(args, key) is not None:
            given[key] = getattr(args, key)

    rows = []
    for name in args.datasets:
        if name not in RECIPES:
            raise SystemExit(f"No recipe for {name!r}; known: {sorted(RECIPES)}")
        t0 = time.time()
        overrides = {} if args.quick else dict(REPRODUCE_OVERRIDES.get(name, {}))
        overrides.update(given)
        folder = get_finetuned_model(
            name,
            progress=not args.no_progress,
            num_threads=args.num_threads,
            options=FineTuneOptions.recipe(name, **overrides),
        )
        rec = read_result(folder)
        rows.append((name, rec, folder, time.time() - t0))
        print(json.dumps({"dataset": name, "folder": str(folder), **rec}, indent=1))

    print()
    print(
        f"{'corpus':<9} {'split':<11} {'acc %':>6} {'n_train':>7} {'n_eval':>6} "
        f"{'steps':>6} {'epochs':>6} {'min':>5}  folder"
    )
    for name, rec, folder, _ in rows:
        print(
            f"{name:<9} {rec['heldout_split']:<11} "
            f"{100 * rec['heldout_accuracy']:6.2f} "
            f"{rec['n_train']:7d} {rec['n_eval']:6d} {rec['steps']:6d} "
            f"{rec['epochs_done']:6.2f} {rec['total_seconds'] / 60:5.1f}  {folder}"
        )


if __name__ == "__main__":
    main()
