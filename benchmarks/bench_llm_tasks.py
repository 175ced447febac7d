"""Methods for causal LMs on the prompt tasks' own prompts: CPU-seconds a
prompt, and as a ratio to one forward + backward of the same prompts, in one
run.

The study's prompts (``experiments/llm_faithfulness.py``): the first ``--n``
prompts of each task's report split, the model's answers among the task's
words, in batches of ``--batch-size`` (the study's 4; several sizes, e.g.
``--batch-size 1 4 16``, run one after the other in one process) explained by the
scorers the study and the command line build
(:func:`captum_iba.evaluation.build_scorers`). A method is a registry name,
with options after a colon (``iba-deletion:steps=1``). Per batch: the
method's process time (one torch thread) and that of one forward + backward
of the batch (:func:`bench_llm.forward_backward`), so that runs in two
environments (AttnLRP needs ``lxt`` under transformers 4.x,
docs/llm.rst) compare by their ratios as well as their seconds on one
machine. Medians over the batches, after one untimed batch per method;
``torch.backends.cpu.get_cpu_capability()`` printed with the figures.
``--json FILE`` adds the rows to FILE (one JSON object a line), each
method's as it finishes (a run stopped by a time limit keeps what it
measured); ``--table FILE`` prints every method of FILE against
``--reference``, task by task and batch size, paired by batch.

On a GPU (``--device cuda``) the seconds are wall-clock, synchronised, and
a machine without the weights takes ``--random-weights``: the ``--model``
folder's configuration and tokenizer with seeded random weights (the same
cost: every method here runs a fixed number of steps). ``iba-amortized``
among the methods fits the command line's explainer for each task first
(``evaluate --methods iba-amortized``'s fit: ``--fit-prompts`` of the
task's training prompts with the model's choice among its answer words,
the deletion objective, into ``$CAPTUM_IBA_CACHE``) and prints its seconds
(a ``fit`` row in ``--json``).

Usage::

    python benchmarks/bench_llm_tasks.py --methods iba-deletion iba-deletion:steps=1 \\
        --n 16 --json bench_tasks.jsonl
    python benchmarks/bench_llm_tasks.py --methods attnlrp --n 16 \\
        --tokenizer SMOLLM2_TOKENIZER_4X --json bench_tasks.jsonl   # lxt env
    python benchmarks/bench_llm_tasks.py --table bench_tasks.jsonl --reference attnlrp
    python benchmarks/bench_llm_tasks.py --device cuda --random-weights \
        --model SMOLLM2_CONFIG --methods iba-deletion:steps=1 iba-amortized
"""

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "experiments" / "lab"))  # the lab
from bench_llm import forward_backward  # noqa: E402

TASKS = ("sst2", "ag_news", "rte", "imdb")
#: The explainers this process fitted, by (task, training prompts, module).
_FITTED: Dict[Tuple[str, int, Any], Any] = {}


def method_of(spec: str) -> Tuple[str, Dict[str, Any]]:
    """``name:key=value,...`` as the name and its options (JSON values -
    numbers, ``true``, ``null`` - parsed, others kept as strings)."""
    name, _, rest = spec.partition(":")
    options: Dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--methods {spec!r}: options are key=value, got {item!r}")
        try:  # a number, true/false, null; else the string itself
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return name, options


def timed(fn: Any, device: Optional[torch.device] = None) -> float:
    """The process time of ``fn()``; on a CUDA ``device`` its wall-clock
    time, synchronised."""
    if device is None or device.type != "cuda":
        began = time.process_time()
        fn()
        return time.process_time() - began
    torch.cuda.synchronize(device)
    began = time.perf_counter()
    fn()
    torch.cuda.synchronize(device)
    return time.perf_counter() - began


def on_device(batch: Any, device: torch.device) -> Any:
    """A :class:`~captum_iba.attr.llm_batch.PromptBatch` with its tensors on
    ``device``."""
    moved = {
        f.name: getattr(batch, f.name).to(device)
        for f in dataclasses.fields(batch)
        if isinstance(getattr(batch, f.name), torch.Tensor)
    }
    return dataclasses.replace(batch, **moved)


def load_model(args: argparse.Namespace) -> Tuple[Any, Any]:
    """The causal LM (float32, on ``--device``) and its tokenizer; with
    ``--random-weights`` the ``--model`` folder's configuration with seeded
    random weights."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from captum_iba.app.causal_lm import load_causal_lm

    if args.random_weights:
        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_config(config).float()
        model, tok = model.eval(), AutoTokenizer.from_pretrained(args.model)
    else:
        model, tok = load_causal_lm(args.model)
    if args.tokenizer:
        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    return model.to(args.device), tok


def fitted(model: Any, tok: Any, task: str, k: int, rows: List[Dict[str, Any]]) -> Any:
    """A function of the layer module: the command line's explainer for
    ``task`` (the lab's :func:`~captum_iba_lab.amortized_lm.lm_explainer` on
    ``k`` training prompts), its fit timed into ``rows``."""
    from captum_iba_lab.amortized_lm import (
        LLM_OBJECTIVE,
        lm_explainer,
        lm_folder,
        training_prompts,
    )

    from captum_iba.attr.amortized_store import RECORD
    from captum_iba.attr.text import resolve_layer

    def fit(module: Any) -> Any:
        if (task, k, module) in _FITTED:  # another batch size's: fitted once
            return _FITTED[task, k, module]
        limit = model.config.max_position_embeddings
        prompts = training_prompts(task, tok, None, limit, cut=False, count=k)
        ref, made = resolve_layer(model, module), []
        folder = lm_folder(model, ref, task, LLM_OBJECTIVE)
        if (folder / RECORD).is_file():  # it would be loaded, not fitted
            raise SystemExit(
                f"an explainer is cached in {folder}: to time a fit, set "
                "CAPTUM_IBA_CACHE to an empty folder"
            )
        seconds = timed(
            lambda: made.append(
                lm_explainer(
                    model, tok, ref, task, True, LLM_OBJECTIVE, prompts=prompts
                )
            ),  # fmt: skip
            model.device,
        )
        row = dict(task=task, method="fit", prompts=len(prompts), seconds=seconds)
        rows.append(row)
        print(f"{task:<8} {'iba-amortized fit':<24} {seconds:>7.1f} s on "
              f"{len(prompts)} training prompts", flush=True)  # fmt: skip
        _FITTED[task, k, module] = made[0]
        return made[0]

    return fit


def batches(task_name: str, model: Any, tok: Any, n: int, size: int) -> List[Any]:
    """The study's first ``n`` report prompts of a task, answered, batched
    (on the model's device)."""
    from captum_iba.app.data import HELDOUT_SPLIT
    from captum_iba.app.llm_tasks import TASKS as PROMPT_TASKS
    from captum_iba.app.llm_tasks import label_choice, task_examples
    from captum_iba.attr.llm_batch import prompt_batch

    task = PROMPT_TASKS[task_name]
    examples = task_examples(task, HELDOUT_SPLIT[task.corpus], tok, n)
    chosen = label_choice(model, tok, examples.prompts, task)
    return [
        on_device(
            prompt_batch(
                tok,
                examples.prompts[i : i + size],
                [task.answers[c] for c in chosen[i : i + size]],
                chat=task.chat,
            ),
            model.device,
        )
        for i in range(0, len(examples.prompts), size)
    ]


def measure(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Every (task, method, batch): the method's and the unit's seconds
    (CPU-s; on CUDA wall-clock)."""
    from transformers import __version__

    torch.set_num_threads(1)
    cpu = torch.backends.cpu.get_cpu_capability()
    model, tok = load_model(args)
    device = model.device
    gpu = f"; GPU {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    load = os.getloadavg()[0]
    print(f"CPU capability {cpu}; torch {torch.__version__}; transformers "
          f"{__version__}; load average {load:.1f}{gpu}", flush=True)  # fmt: skip
    rows: List[Dict[str, Any]] = []  # the fits' rows too, as they are made
    done = 0  # rows in --json
    for size in args.batch_size:
        for task in args.tasks.split(","):
            work = batches(task, model, tok, args.n, size)
            for spec in args.methods:
                try:
                    rows += method_rows(spec, model, tok, task, work, args, rows)
                except Exception:  # reported; the other methods and tasks go on
                    traceback.print_exc()
                    print(f"{task:<8} {spec:<24} FAILED (above)", flush=True)
                write_rows(args.json, rows[done:])
                done = len(rows)
    return rows


def write_rows(path: Optional[str], rows: List[Dict[str, Any]]) -> None:
    """Adds ``rows`` to the JSON-lines file ``path`` (None: nowhere)."""
    if path and rows:
        with open(path, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


def method_rows(
    spec: str,
    model: Any,
    tok: Any,
    task: str,
    work: List[Any],
    args: argparse.Namespace,
    fits: List[Dict[str, Any]],
) -> List[Dict[str, Any]]:
    """One method's rows on a task's batches (an explainer's fit timed into
    ``fits``), its medians printed."""
    from captum_iba.evaluation import Resources, build_scorers

    name, options = method_of(spec)
    if name == "iba-amortized":  # on a causal LM: the lab's iba-amortized-lm
        from captum_iba_lab import register

        register()
        explainer = fitted(model, tok, task, args.fit_prompts, fits)
        name, options = "iba-amortized-lm", dict(options, explainer=explainer)
    (scorer,) = build_scorers(
        [name], Resources(model, tok), method_options={name: options},
        kind="causal-lm",
    ).values()  # fmt: skip
    scorer.attribute(work[0])  # untimed: kernels, allocator, path check
    device, mine = model.device, []
    cpu = torch.backends.cpu.get_cpu_capability() if device.type == "cpu" else None
    for k, batch in enumerate(work):
        unit = timed(forward_backward(model, batch), device)
        seconds = timed(lambda s=scorer, b=batch: s.attribute(b), device)
        mine.append(dict(
            task=task, method=spec, batch=k, prompts=len(batch), size=len(work[0]),
            cpu=cpu or str(device),
            seconds=seconds / len(batch), unit=unit / len(batch),
        ))  # fmt: skip
    clock = "CPU-s" if device.type == "cpu" else "s"
    precision = scorer.settings.get("precision", "float32")
    print(f"{task:<8} {spec:<24} b={len(work[0]):<3} {_median(mine, 'seconds'):>7.3f} "
          f"{clock} a prompt, {_median(mine, 'ratio'):>5.2f} x forward+backward "
          f"({precision})", flush=True)  # fmt: skip
    return mine


def _median(rows: List[Dict[str, Any]], key: str) -> float:
    if key == "ratio":
        return statistics.median(r["seconds"] / r["unit"] for r in rows)
    return statistics.median(r[key] for r in rows)


def table(path: str, reference: str) -> None:
    """Each method against ``reference``, task by task: medians of its seconds
    and ratios, and the median of the per-batch quotients (paired)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    for fit in (r for r in rows if r["method"] == "fit"):
        print(f"{fit['task']:<8} iba-amortized fit: {fit['seconds']:.1f} s on "
              f"{fit['prompts']} training prompts")  # fmt: skip
    rows = [r for r in rows if r["method"] != "fit"]
    print(f"{'task':<8} {'b':>3} {'method':<24} {'CPU':<7} {'s':>7} {'x F+B':>6} "
          f"{'x ' + reference:>14}")  # fmt: skip
    # rows written before batch sizes were recorded: the study's batches of 4
    keys = dict.fromkeys((r["task"], r.get("size", 4)) for r in rows)
    for task, size in keys:
        mine = [r for r in rows if (r["task"], r.get("size", 4)) == (task, size)]
        ref = {r["batch"]: r for r in mine if r["method"] == reference}
        for method in dict.fromkeys(r["method"] for r in mine):
            cells = [r for r in mine if r["method"] == method]
            paired = [r["seconds"] / ref[r["batch"]]["seconds"] for r in cells
                      if r["batch"] in ref]  # fmt: skip
            quotient = f"{statistics.median(paired):.2f}" if paired else "-"
            print(f"{task:<8} {size:>3} {method:<24} {cells[0]['cpu']:<7} "
                  f"{_median(cells, 'seconds'):>7.3f} {_median(cells, 'ratio'):>6.2f} "
                  f"{quotient:>14}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--methods", nargs="+", default=["iba-deletion"])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument(
        "--batch-size", type=int, nargs="+", default=[4],
        help="prompts a batch (several: each in turn, one process)",
    )  # fmt: skip
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--tokenizer", help="another tokenizer folder (lxt's env)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--random-weights", action="store_true",
        help="the --model folder's configuration with seeded random weights",
    )  # fmt: skip
    parser.add_argument(
        "--fit-prompts", type=int, default=None,
        help="iba-amortized: training prompts of its fit (default the command "
        "line's, 128)",
    )  # fmt: skip
    parser.add_argument("--json", help="add the rows to this JSON-lines file")
    parser.add_argument("--table", help="print the rows of this file, then stop")
    parser.add_argument("--reference", default="attnlrp")
    args = parser.parse_args()
    if args.table:
        table(args.table, args.reference)
        return
    if args.fit_prompts is None:
        from captum_iba_lab.amortized_lm import LLM_TRAIN_PROMPTS

        args.fit_prompts = LLM_TRAIN_PROMPTS
    measure(args)  # --json: written as each method finishes


if __name__ == "__main__":
    main()
