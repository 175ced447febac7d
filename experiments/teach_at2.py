"""Teach AT2's head weights with one ``iba-deletion`` step instead of
ablations (:mod:`captum_iba_lab.at2_taught`), on a context task's
search contexts (never the report split), at one or several nested budgets.

The command line's ``iba-heads`` is taught the same way on 128 contexts
(:mod:`captum_iba_lab.context_heads`, whose functions this script calls).
The contexts are those ``experiments/train_at2.py`` trains AT2 on (its
seed 1000 and, for ``context-facts``, 3-6 passages; ``--seed``,
``--passages``), in the layout every context method reads. Per context: the
model's greedy response, the teacher's source scores (one deletion step,
pooled by ``logit-max``) and AT2's attention features per source, each kept
under ``--work`` as it is done (resumable) with its CPU-seconds; a context
whose prompt and response do not fit the model's positions, or which AT2
reads as other tokens, is skipped and counted. Each budget ``n`` then fits
the weights on the first ``n`` contexts kept, with AT2's own trainer, and
saves them in AT2's format as
``<model>-<task>-n<n>-iba-deletion-steps1.pt``
(:func:`~captum_iba_lab.at2.at2_weights_path`, default folder
``~/.cache/captum_iba/at2``), which ``experiments/context_study.py`` reads as
the method ``at2-iba-<n>``::

    python experiments/teach_at2.py --task context-facts --n 32,128,256 --pool 256

CPU-seconds (one torch thread, ``time.process_time``): per budget, its
contexts' responses, teacher steps and features, then the fit.
"""

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent / "lab"))  # the lab: captum_iba_lab

from captum_iba_lab.at2 import import_at2
from captum_iba_lab.context_fit import CONTEXT_FIT, fit_contexts
from captum_iba_lab.context_heads import (
    collect_taught,
    fit_taught_budgets,
    taught_store,
)

from captum_iba._utils.io import cache_root  # noqa: E402
from captum_iba.app.context_corpus import parse_passages
from captum_iba.app.context_tasks import CONTEXT_TASKS
from captum_iba.app.model_kind import SMOLLM2_HUB_ID


def parse(argv=None) -> argparse.Namespace:
    """The command line (budgets checked before anything loads)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=CONTEXT_TASKS, default="context-facts")
    parser.add_argument("--n", default="128", help="budgets, nested: 32,128")
    parser.add_argument("--pool", type=int, default=None, help="contexts (>= n)")
    parser.add_argument("--seed", type=int, default=CONTEXT_FIT["seed"])
    parser.add_argument("--passages", default="3-6", metavar="LOW-HIGH")
    parser.add_argument("--masks", type=int, default=32, help="halves per context")
    parser.add_argument("--model", default=SMOLLM2_HUB_ID)
    parser.add_argument("--work", default=None, help="default <cache>/at2/taught")
    parser.add_argument("--out", default=None, help="default <cache>/at2")
    args = parser.parse_args(argv)
    try:
        args.budgets = sorted({int(n) for n in args.n.split(",")})
        args.passages = parse_passages(args.passages)
    except ValueError as err:
        parser.error(f"--n or --passages: {err}")
    if args.budgets[0] < 1:
        parser.error(f"--n: budgets are >= 1; got {args.n}")
    args.pool = args.pool or args.budgets[-1]
    if args.pool < args.budgets[-1]:
        parser.error(f"--pool {args.pool} is below the largest budget")
    return args


def main(argv=None) -> None:
    args = parse(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch.set_num_threads(1)
    import_at2()
    from captum_iba.app.causal_lm import load_causal_lm

    model, tok = load_causal_lm(args.model)
    root = Path(args.work) if args.work else cache_root() / "at2" / "taught"
    work = taught_store(root, args.model, args.task, args.seed, args.passages)
    fit = dict(CONTEXT_FIT, contexts=args.pool, seed=args.seed, passages=args.passages)
    collect_taught(model, tok, fit_contexts(args.task, None, fit), work)
    extras = dict(
        model_name=args.model, task=args.task, seed=args.seed, masks=args.masks,
        sources=list(args.passages),
    )  # fmt: skip
    out = Path(args.out) if args.out else None
    fit_taught_budgets(model, work, args.pool, args.budgets, extras, out)


if __name__ == "__main__":
    sys.exit(main())
