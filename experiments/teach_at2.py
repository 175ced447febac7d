"""Teach AT2's head weights with one ``iba-deletion`` step instead of
ablations (:mod:`captum_iba.evaluation.at2_taught`), on a context task's
search contexts (never the report split), at one or several nested budgets.

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
(:func:`~captum_iba.evaluation.at2.at2_weights_path`, default folder
``~/.cache/captum_iba/at2``), which ``experiments/context_study.py`` reads as
the method ``at2-iba-<n>``::

    python experiments/teach_at2.py --task context-facts --n 32,128,256 --pool 256

CPU-seconds (one torch thread, ``time.process_time``): per budget, its
contexts' responses, teacher steps and features, then the fit.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from captum_iba._utils.common import max_positions
from captum_iba._utils.io import cache_root, model_slug
from captum_iba.app.context_corpus import parse_passages
from captum_iba.app.context_fit import CONTEXT_FIT, fit_contexts
from captum_iba.app.context_tasks import CONTEXT_TASKS, prompt_layout
from captum_iba.app.model_kind import SMOLLM2_HUB_ID
from captum_iba.attr.llm_batch import uses_chat
from captum_iba.evaluation.at2 import at2_weights_path, import_at2
from captum_iba.evaluation.at2_taught import (
    TEACHER,
    TEACHER_POOLING,
    feature_extractor,
    fit_taught,
    source_features,
    teacher_scorer,
)
from captum_iba.evaluation.at2_training import _save
from captum_iba.evaluation.context_loop import (
    ContextData,
    context_batch,
    method_source_scores,
    too_long,
)


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


def collect(model: Any, tok: Any, examples: Sequence[Any], work: Path) -> None:
    """Each example's features and teacher scores into ``work`` (one file a
    context, its number; kept as they are done, so a re-run resumes)."""
    chat = uses_chat(tok, None)
    data = ContextData(tuple(examples), prompt_layout(chat))
    scorer = teacher_scorer(model, tok)
    work.mkdir(parents=True, exist_ok=True)
    for i in range(len(data)):
        path = work / f"{i:05d}.npz"
        if path.exists():
            continue
        if too_long(tok, data, i, chat, max_positions(model)) is not None:
            np.savez(path, skipped="too long")
            continue
        began = time.process_time()
        batch = context_batch(model, tok, data, [i], chat)
        made = time.process_time()
        found = scorer.attribute(batch)
        teacher = method_source_scores(found, batch, [TEACHER_POOLING])
        taught = time.process_time()
        features = source_features(model, tok, batch, 0, chat)
        if features is None:
            np.savez(path, skipped="AT2 reads other tokens")
            continue
        seconds = [made - began, taught - made, time.process_time() - taught]
        np.savez(
            path, features=features.numpy(), cpu=np.array(seconds),
            teacher=teacher[TEACHER_POOLING][0].double().numpy(),
        )  # fmt: skip


def fit_budgets(
    model: Any, work: Path, pool: int, extras: Dict[str, Any], out: Optional[str]
) -> List[Dict[str, Any]]:
    """Each budget of ``extras["budgets"]`` fitted on the first ``n`` contexts
    kept of ``work`` 's first ``pool`` and saved (weights named by
    :func:`~captum_iba.evaluation.at2.at2_weights_path` with the teacher);
    a budget above the contexts kept is skipped, said. Returns what each
    printed."""
    kept = [np.load(p) for p in sorted(work.glob("*.npz"))[:pool]]
    skipped = sum("skipped" in k for k in kept)
    kept = [k for k in kept if "skipped" not in k]
    print(f"{len(kept)} contexts kept, {skipped} skipped, in {work}", flush=True)
    extractor = feature_extractor(model)
    done = []
    for n in extras["budgets"]:
        if n > len(kept):
            print(f"budget {n} skipped: {len(kept)} contexts kept", flush=True)
            continue
        began = time.process_time()
        estimator = fit_taught(
            [k["features"] for k in kept[:n]], [k["teacher"] for k in kept[:n]],
            extractor, masks=extras["masks"],
        )  # fmt: skip
        fit = time.process_time() - began
        data = np.sum([k["cpu"] for k in kept[:n]], axis=0)
        path = at2_weights_path(
            extras["model_name"], extras["task"], n, 0, out, TEACHER
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        _save(estimator.cpu(), model, path, dict(extras, n=n, teacher=TEACHER))
        done.append(dict(
            n=n, task=extras["task"], saved=str(path),
            cpu_seconds=round(float(data.sum()) + fit, 1),
            responses=round(float(data[0]), 1), teacher=round(float(data[1]), 1),
            features=round(float(data[2]), 1), fit=round(fit, 1),
        ))  # fmt: skip
        print(json.dumps(done[-1]), flush=True)
    return done


def main(argv=None) -> None:
    args = parse(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch.set_num_threads(1)
    import_at2()
    from captum_iba.app.causal_lm import load_causal_lm

    model, tok = load_causal_lm(args.model)
    low, high = args.passages
    root = Path(args.work) if args.work else cache_root() / "at2" / "taught"
    work = root / f"{model_slug(args.model)}-{args.task}-s{args.seed}-x{low}-{high}"
    fit = dict(CONTEXT_FIT, contexts=args.pool, seed=args.seed, passages=args.passages)
    collect(model, tok, fit_contexts(args.task, None, fit), work)
    extras = dict(
        model_name=args.model, task=args.task, seed=args.seed, masks=args.masks,
        sources=list(args.passages), budgets=args.budgets,
    )  # fmt: skip
    fit_budgets(model, work, args.pool, extras, args.out)


if __name__ == "__main__":
    sys.exit(main())
