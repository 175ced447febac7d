"""Train AT2's head weights (Cohen-Wang et al. 2025) for a causal LM with
AT2's own trainer, on random ablations of our context tasks' search split
(never the report split), at one or several nested budgets.

The examples are ``context_examples(task, "search", --pool, seed=--seed)``
(by default seed 1000, apart from the context study's examples, seed 0;
``--passages LOW-HIGH`` passages each, as ``evaluate --task`` and
``experiments/context_study.py`` take them; ``--sources LOW,HIGH`` is a
deprecated spelling that warns). The package's store (the responses of all
``--pool`` examples, the ablations' features and outcomes) is kept under
``--work``, resumable; the ablations are run once, for the largest budget's
examples (``--first``: a second worker ablating a later range of the same
store; ``--train-only``: ablate none). The budget ``n`` trains on the first
``n`` examples ablated (budgets nest; 0: AT2's untrained starting point,
every head the same weight). Each budget's weights go to ``--out`` as
``<model>-<task>-n<n>-a<ablations>.pt``
(:func:`~captum_iba_lab.at2.at2_weights_path`; default folder
``~/.cache/captum_iba/at2``), which ``experiments/context_study.py`` reads as
the method ``at2-<n>``, and the budget's CPU- and wall-seconds beside them as
``<model>-<task>-n<n>-a<ablations>.json``
(:func:`studylib.at2_training.at2_fit_path`)::

    pip install --no-deps at2    # its other dependencies: see docs/context.rst
    python experiments/train_at2.py --task context-facts --n 0,8,16 --pool 16 \
        --passages 3-6

``--task`` may also name a prompt task (``sst2``, ``ag_news``, ``rte``,
``imdb``): its training split's prompts (a ``--seed`` sample of ``--pool``),
as the degradation test of prompts makes them, the content's words as the
sources and the model's one-token answer as the response - AT2 trained "on
the same prompts" for ``experiments/llm_faithfulness.py run --methods
at2-<n>``.

A model with a chat template reads a context task's prompts as user turns
(AT2's way; a prompt task's as the task gives them); a base model (Gemma 3
270M) as the study gives them to it: plain text ending in ``"\\nAnswer:"``
(``BASE_SUFFIX``), a BOS before it.

CPU-seconds (one torch thread, ``time.process_time``) and wall-seconds are
each budget's own: its examples' responses and ablations, then the fit. On a
GPU (``--device cuda``), ``--generate-batch`` and ``--ablation-batch`` run
several responses and ablations a pass (a store keeps its generate batch),
and ``--stop-after`` ends the ablations at a time limit, the budgets then
trained on those done.
"""

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict

import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "lab"))  # the lab: captum_iba_lab
from captum_iba_lab.at2 import at2_weights_path, import_at2
from studylib.at2_training import (  # noqa: E402
    AblationPlan,
    at2_fit_path,
    at2_trainer,
    check_store,
    train_at2,
    wall_seconds,
)

from captum_iba._utils.io import cache_root
from captum_iba.app.context_corpus import parse_passages
from captum_iba.app.context_tasks import BASE_SUFFIX, CONTEXT_TASKS, context_examples
from captum_iba.app.llm_tasks import TASKS, task_examples
from captum_iba.app.model_kind import SMOLLM2_HUB_ID
from captum_iba.attr.llm_batch import uses_chat
from captum_iba.evaluation.llm_loop import content_words


def parse(argv=None) -> argparse.Namespace:
    """The command line (budgets checked before anything loads)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task",
        choices=CONTEXT_TASKS + tuple(sorted(TASKS)),
        default="context-facts",
        help="a context task, or a prompt task (its training split's prompts, "
        "the content's words as sources, the answer word as the response)",
    )
    parser.add_argument(
        "--n",
        default="16",
        help="training examples; several: nested budgets, 0,8,16 (0: untrained)",
    )
    parser.add_argument("--ablations", type=int, default=32, help="per example")
    parser.add_argument(
        "--pool", type=int, default=16, help="the store's examples (budgets <= it)"
    )
    parser.add_argument("--seed", type=int, default=1000, help="the examples' seed")
    parser.add_argument(
        "--passages",
        default=None,
        metavar="LOW-HIGH",
        help="context-facts: the passages per context (default 3-6)",
    )
    parser.add_argument(
        "--sources", default=None, help="deprecated: --passages LOW-HIGH"
    )
    parser.add_argument("--iterations", type=int, default=1000, help="Adam steps")
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="a second worker: ablate from this example on, train nothing",
    )
    parser.add_argument(
        "--train-only", action="store_true", help="ablate nothing: train on those done"
    )
    parser.add_argument(
        "--device", default="cpu", help="where the model runs (cpu, cuda, cuda:1)"
    )
    parser.add_argument(
        "--generate-batch", type=int, default=1, help="responses generated together"
    )
    parser.add_argument(
        "--ablation-batch", type=int, default=4, help="ablations a forward pass"
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="ablate no example begun after this many wall-seconds (resume later); "
        "budgets beyond the examples ablated are skipped",
    )
    parser.add_argument("--model", default=SMOLLM2_HUB_ID)
    parser.add_argument("--out", default=None, help="weights folder (default: cache)")
    parser.add_argument("--work", default=None, help="AT2's store (default: cache)")
    args = parser.parse_args(argv)
    try:
        args.budgets = sorted({int(v) for v in args.n.split(",")})
    except ValueError:
        parser.error(f"--n takes integers: {args.n!r}")
    if args.budgets[0] < 0 or args.ablations < 2 or args.budgets[-1] > args.pool:
        parser.error("--n must be 0..--pool (0: untrained) and --ablations >= 2")
    if args.generate_batch < 1 or args.ablation_batch < 1:
        parser.error("--generate-batch and --ablation-batch must be >= 1")
    if args.device != "cpu" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no CUDA device here")
    args.source_range = _passages(parser, args)
    return args


def _passages(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """``--passages LOW-HIGH`` (default 3-6) by ``parse_passages``, or the
    deprecated ``--sources LOW,HIGH`` with a FutureWarning naming --passages."""
    text = args.passages or "3-6"
    if args.sources is not None:
        if args.passages is not None:
            parser.error("give --passages only (--sources is its deprecated spelling)")
        text = args.sources.replace(",", "-", 1)
        warnings.warn(
            f"--sources {args.sources} is deprecated: write --passages {text}",
            FutureWarning,
            stacklevel=2,
        )
    try:
        return parse_passages(text)
    except ValueError as err:
        parser.error(str(err))


def work_folder(args: argparse.Namespace) -> Path:
    """AT2's store of this set of examples (under ``--work``, default the
    cache's ``at2/work``), one per model, task, seed, ablations, pool and
    passages."""
    name = args.model.rstrip("/").split("/")[-1]
    work = Path(args.work) if args.work else cache_root() / "at2" / "work"
    low, high = args.source_range
    passages = f"-x{low}-{high}" if args.task in CONTEXT_TASKS else ""
    return work / (
        f"{name}-{args.task}-s{args.seed}-a{args.ablations}-p{args.pool}{passages}"
    )


def laid_examples(args: argparse.Namespace, tok: Any) -> Dict[str, Any]:
    """:func:`at2_trainer`'s examples and how to read them (``examples``,
    ``laid``, ``chat``, ``suffix``, ``max_new_tokens``): a context task's
    ``(sources, query)`` pairs (its search split), as the context study
    lays them out; or a prompt task's prompts of its training split
    (``--seed``'s sample), as the degradation test of prompts gives them,
    their content's words as sources, answered in one token (the answer
    word that test explains)."""
    chat = uses_chat(tok, None)  # a base model: the study's plain-text layout
    if args.task in CONTEXT_TASKS:
        options = {"sources": args.source_range} if args.task == "context-facts" else {}
        examples = context_examples(
            args.task, "search", args.pool, args.seed, **options
        )
        pairs = [(e.sources, e.query) for e in examples]
        suffix = "" if chat else BASE_SUFFIX
        return dict(examples=pairs, chat=chat, suffix=suffix, max_new_tokens=24)
    task = TASKS[args.task]
    found = task_examples(task, "train", tok, args.pool, seed=args.seed)
    laid = [(p, content_words(p, span)) for p, span in zip(found.prompts, found.spans)]
    return dict(examples=laid, laid=True, chat=chat and task.chat, max_new_tokens=1)


def main(argv=None) -> None:
    args = parse(argv)
    work = work_folder(args)  # one store per set of examples
    try:  # a store begun with another batch: refused before the model loads
        check_store(work, args.pool, args.generate_batch)
    except ValueError as err:
        raise SystemExit(f"train_at2.py: {err}") from None
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch.set_num_threads(1)
    import_at2()  # its slow import first: not the training's cost
    from captum_iba.app.causal_lm import load_causal_lm

    model, tok = load_causal_lm(args.model)
    model.to(args.device)
    read = laid_examples(args, tok)
    trainer, seconds = at2_trainer(
        model,
        tok,
        work_dir=work,
        ablations=args.ablations,
        plan=AblationPlan(
            limit=0 if args.train_only else args.budgets[-1],
            first=args.first,
            generate_batch=args.generate_batch,
            ablation_batch=args.ablation_batch,
            stop_after=args.stop_after,
        ),
        **read,
    )
    if args.first:  # a second worker: the first one trains
        print(f"ablated examples {args.first}..{args.budgets[-1] - 1} in {work}")
        return
    train_budgets(args, trainer, seconds, work)


def train_budgets(
    args: argparse.Namespace, trainer: Any, seconds: Dict[int, float], work: Path
) -> None:
    """Train each budget of ``args`` on the first examples of ``work`` 's
    store that are ablated (a budget past them refused, or skipped under
    ``--stop-after``); print each budget's CPU- and wall-seconds (its
    examples' ablations and its fit) and write them beside its weights
    (:func:`studylib.at2_training.at2_fit_path`)."""
    ablated = [
        i for i in range(args.pool) if trainer.is_features_and_outputs_completed(i)
    ]
    walls = wall_seconds(work, args.pool)
    print(f"{len(ablated)} of {args.pool} examples ablated in {work}", flush=True)
    for n in args.budgets:
        if n > len(ablated) and args.stop_after is None:
            raise SystemExit(
                f"train_at2.py: budget {n}: only {len(ablated)} examples of {work} "
                "have their ablations (ablate more, or give --stop-after to skip it)"
            )
        if n > len(ablated):  # --stop-after ended the ablations before it
            print(f"budget {n} skipped: {len(ablated)} examples ablated", flush=True)
            continue
        began, wall = time.process_time(), time.perf_counter()
        path = at2_weights_path(args.model, args.task, n, args.ablations, args.out)
        extras = dict(
            model_name=args.model, task=args.task, seed=args.seed,
            ablations=args.ablations,
        )  # fmt: skip
        if args.task in CONTEXT_TASKS:
            extras["sources"] = list(args.source_range)
        with torch.enable_grad():
            train_at2(
                trainer, n, path, extras, iterations=args.iterations,
                device=args.device,
            )  # fmt: skip
        fit = time.process_time() - began
        fit_wall = time.perf_counter() - wall
        data = sum(seconds[i] for i in ablated[:n])  # those train_at2 takes
        data_wall = sum(walls[i] for i in ablated[:n])
        stats = dict(
            n=n, ablations=args.ablations, task=args.task, saved=str(path),
            device=args.device, cpu=torch.backends.cpu.get_cpu_capability(),
            cpu_seconds=round(data + fit, 1), ablation_cpu_seconds=round(data, 1),
            fit_cpu_seconds=round(fit, 1), wall_seconds=round(data_wall + fit_wall, 1),
            ablation_wall_seconds=round(data_wall, 1),
            fit_wall_seconds=round(fit_wall, 1),
        )  # fmt: skip
        print(json.dumps(stats), flush=True)
        at2_fit_path(path).write_text(json.dumps(stats, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
