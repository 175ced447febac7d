"""Fit ``iba-amortized``'s explainer on a context task's search contexts
(issue 52: an amortized explainer per source, against AT2 trained on the
same contexts).

The contexts are ``context_examples(task, "search", --n, seed=--seed)`` -
by default AT2's training examples (``experiments/train_at2.py``: seed
1000, 3-6 passages; never the report split) - each with the model's greedy
response (at most the context study's 24 tokens) in batches of
``--batch-size``, its sources marked (the explainer masks the sources'
tokens only, as every method of the context study scores them). The
explainer is fitted as the command line fits one on a context task
(:func:`~captum_iba_lab.context_fit.fit_on_contexts`, its defaults
:data:`~captum_iba_lab.context_fit.CONTEXT_FIT` those of this script) on
``--objective`` (``distil``: ``iba-deletion``'s masks alone; ``deletion``:
its objective, warm-started by them), its teacher ``iba-deletion`` with
``--teacher-steps`` steps (one step's mask is what the context study found
most faithful there), and saved (resumably) under ``--out`` as
``<model>-<task>-n<n>-<objective>-t<steps>`` (:func:`explainer_path`), which
``experiments/context_study.py`` reads as the method
``iba-amortized-ctx-<n>`` (``--explainer-dir``)::

    python experiments/fit_context_explainer.py --task context-facts --n 512

CPU-seconds (one torch thread, ``time.process_time``) of the responses and
of the fit (the explainer's own count) are printed and kept in ``fit.json``
beside the explainer.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "lab"))  # the lab: captum_iba_lab
from captum_iba_lab.context_fit import (  # noqa: E402
    CONTEXT_FIT,
    fit_contexts,
    fit_on_contexts,
)
from study_lm import study_lm  # noqa: E402

from captum_iba._utils.io import (  # noqa: E402
    atomic_write_text,
    cache_root,
    model_slug,
)
from captum_iba.app.context_corpus import parse_passages  # noqa: E402
from captum_iba.app.context_tasks import CONTEXT_TASKS  # noqa: E402
from captum_iba.app.model_kind import SMOLLM2_HUB_ID  # noqa: E402
from captum_iba.registry import EXPLAINER_OBJECTIVES  # noqa: E402


def explainer_path(
    model_name: str,
    task: str,
    n: int,
    objective: str = "distil",
    teacher_steps: int = 1,
    folder: Optional[str] = None,
) -> Path:
    """The folder of an explainer fitted on ``n`` search contexts of
    ``task``: ``<folder>/<model>-<task>-n<n>-<objective>-t<teacher_steps>``
    (``folder`` by default ``<cache>/context_explainers``)."""
    root = cache_root() / "context_explainers" if folder is None else Path(folder)
    return root / f"{model_slug(model_name)}-{task}-n{n}-{objective}-t{teacher_steps}"


def fit_context_explainer(
    model: Any,
    tok: Any,
    examples: List[Any],
    folder: Path,
    objective: str = "distil",
    task: str = "context-facts",
    **fit: Any,
) -> Tuple[Any, Dict[str, float]]:
    """Fit (or resume) the explainer of ``model`` 's embeddings on
    ``examples`` (``task`` 's contexts) with their greedy responses, saved in
    ``folder``, with ``fit`` overriding
    :data:`~captum_iba_lab.context_fit.CONTEXT_FIT`; returns it and the
    CPU-seconds of the responses and of the fit."""
    from captum_iba.attr.text import resolve_layer

    began = time.process_time()
    explainer = fit_on_contexts(
        model, tok, resolve_layer(model, "embeddings"), task, folder,
        objective=objective, fit=dict(CONTEXT_FIT, **fit), examples=examples,
    )  # fmt: skip
    total = time.process_time() - began
    fitted = float(explainer.stats.get("cpu_seconds", 0.0))
    return explainer, {
        "responses_cpu_seconds": total - fitted,
        "fit_cpu_seconds": fitted,
    }


def parse(argv=None) -> argparse.Namespace:
    """The command line (checked before the model loads)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=CONTEXT_TASKS, default="context-facts")
    p.add_argument("--n", type=int, default=CONTEXT_FIT["contexts"], help="contexts")
    p.add_argument("--seed", type=int, default=CONTEXT_FIT["seed"])
    p.add_argument("--passages", default="-".join(map(str, CONTEXT_FIT["passages"])))
    p.add_argument("--objective", choices=tuple(EXPLAINER_OBJECTIVES), default="distil")
    p.add_argument("--teacher-steps", type=int, default=CONTEXT_FIT["teacher_steps"])
    p.add_argument("--epochs", type=int, default=CONTEXT_FIT["epochs"])
    p.add_argument("--batch-size", type=int, default=CONTEXT_FIT["batch_size"])
    p.add_argument("--model", default=SMOLLM2_HUB_ID)
    p.add_argument("--out", help="explainers' folder (default: the cache's)")
    args = p.parse_args(argv)
    for name in ("n", "teacher_steps", "epochs", "batch_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    parse_passages(args.passages)  # LOW-HIGH, checked
    return args


def main(argv=None) -> None:
    args = parse(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch.set_num_threads(1)
    fit = dict(
        CONTEXT_FIT, contexts=args.n, seed=args.seed,
        passages=parse_passages(args.passages), teacher_steps=args.teacher_steps,
        epochs=args.epochs, batch_size=args.batch_size,
    )  # fmt: skip
    examples = fit_contexts(args.task, None, fit)
    folder = explainer_path(
        args.model, args.task, args.n, args.objective, args.teacher_steps, args.out
    )
    model, tok = study_lm(args.model)
    explainer, seconds = fit_context_explainer(
        model, tok, examples, folder, args.objective, args.task, **fit
    )
    print(f"{seconds} ({explainer.stats})", flush=True)
    record = dict(
        vars(args), **seconds, capability=torch.backends.cpu.get_cpu_capability(),
        stats={k: v for k, v in explainer.stats.items() if not callable(v)},
    )  # fmt: skip
    atomic_write_text(folder / "fit.json", json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
