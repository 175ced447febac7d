"""Methods for causal LMs on the prompt tasks' own prompts: CPU-seconds a
prompt, and as a ratio to one forward + backward of the same prompts, in one
run.

The study's prompts (``experiments/llm_faithfulness.py``): the first ``--n``
prompts of each task's report split, the model's answers among the task's
words, in batches of ``--batch-size`` (the study's 4) explained by the
scorers the study and the command line build
(:func:`captum_iba.evaluation.build_scorers`). A method is a registry name,
with options after a colon (``iba-deletion:steps=1``). Per batch: the
method's process time (one torch thread) and that of one forward + backward
of the batch (:func:`bench_llm.forward_backward`), so that runs in two
environments (AttnLRP needs ``lxt`` under transformers 4.x,
docs/llm.rst) compare by their ratios as well as their seconds on one
machine. Medians over the batches, after one untimed batch per method;
``torch.backends.cpu.get_cpu_capability()`` printed with the figures.
``--json FILE`` adds the rows to FILE (one JSON object a line);
``--table FILE`` prints every method of FILE against ``--reference``,
task by task, paired by batch.

Usage::

    python benchmarks/bench_llm_tasks.py --methods iba-deletion iba-deletion:steps=1 \\
        --n 16 --json bench_tasks.jsonl
    python benchmarks/bench_llm_tasks.py --methods attnlrp --n 16 \\
        --tokenizer SMOLLM2_TOKENIZER_4X --json bench_tasks.jsonl   # lxt env
    python benchmarks/bench_llm_tasks.py --table bench_tasks.jsonl --reference attnlrp
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_llm import forward_backward  # noqa: E402

TASKS = ("sst2", "ag_news", "rte", "imdb")


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


def timed(fn: Any) -> float:
    """The process time of ``fn()``."""
    began = time.process_time()
    fn()
    return time.process_time() - began


def batches(task_name: str, model: Any, tok: Any, n: int, size: int) -> List[Any]:
    """The study's first ``n`` report prompts of a task, answered, batched."""
    from captum_iba.app.data import HELDOUT_SPLIT
    from captum_iba.app.llm_tasks import TASKS as PROMPT_TASKS
    from captum_iba.app.llm_tasks import label_choice, task_examples
    from captum_iba.attr.llm_batch import prompt_batch

    task = PROMPT_TASKS[task_name]
    examples = task_examples(task, HELDOUT_SPLIT[task.corpus], tok, n)
    chosen = label_choice(model, tok, examples.prompts, task)
    return [
        prompt_batch(
            tok,
            examples.prompts[i : i + size],
            [task.answers[c] for c in chosen[i : i + size]],
            chat=task.chat,
        )  # fmt: skip
        for i in range(0, len(examples.prompts), size)
    ]


def measure(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Every (task, method, batch): the method's and the unit's CPU-s."""
    from transformers import AutoTokenizer, __version__

    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.evaluation import Resources, build_scorers

    torch.set_num_threads(1)
    cpu = torch.backends.cpu.get_cpu_capability()
    model, tok = load_causal_lm(args.model)
    if args.tokenizer:
        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    load = os.getloadavg()[0]
    print(f"CPU capability {cpu}; torch {torch.__version__}; transformers "
          f"{__version__}; load average {load:.1f}", flush=True)  # fmt: skip
    rows = []
    for task in args.tasks.split(","):
        work = batches(task, model, tok, args.n, args.batch_size)
        for spec in args.methods:
            name, options = method_of(spec)
            (scorer,) = build_scorers(
                [name], Resources(model, tok), method_options={name: options},
                kind="causal-lm",
            ).values()  # fmt: skip
            scorer.attribute(work[0])  # untimed: kernels, allocator, path check
            for k, batch in enumerate(work):
                unit = timed(forward_backward(model, batch))
                seconds = timed(lambda s=scorer, b=batch: s.attribute(b))
                rows.append(dict(
                    task=task, method=spec, batch=k, prompts=len(batch), cpu=cpu,
                    seconds=seconds / len(batch), unit=unit / len(batch),
                ))  # fmt: skip
            mine = [r for r in rows if r["task"] == task and r["method"] == spec]
            print(f"{task:<8} {spec:<24} {_median(mine, 'seconds'):>7.3f} CPU-s a "
                  f"prompt, {_median(mine, 'ratio'):>5.2f} x forward+backward",
                  flush=True)  # fmt: skip
    return rows


def _median(rows: List[Dict[str, Any]], key: str) -> float:
    if key == "ratio":
        return statistics.median(r["seconds"] / r["unit"] for r in rows)
    return statistics.median(r[key] for r in rows)


def table(path: str, reference: str) -> None:
    """Each method against ``reference``, task by task: medians of its CPU-s
    and ratios, and the median of the per-batch quotients (paired)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    print(f"{'task':<8} {'method':<24} {'CPU':<7} {'CPU-s':>7} {'x F+B':>6} "
          f"{'x ' + reference:>14}")  # fmt: skip
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        ref = {r["batch"]: r for r in mine if r["method"] == reference}
        for method in dict.fromkeys(r["method"] for r in mine):
            cells = [r for r in mine if r["method"] == method]
            paired = [r["seconds"] / ref[r["batch"]]["seconds"] for r in cells
                      if r["batch"] in ref]  # fmt: skip
            quotient = f"{statistics.median(paired):.2f}" if paired else "-"
            print(f"{task:<8} {method:<24} {cells[0]['cpu']:<7} "
                  f"{_median(cells, 'seconds'):>7.3f} {_median(cells, 'ratio'):>6.2f} "
                  f"{quotient:>14}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--methods", nargs="+", default=["iba-deletion"])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--tokenizer", help="another tokenizer folder (lxt's env)")
    parser.add_argument("--json", help="add the rows to this JSON-lines file")
    parser.add_argument("--table", help="print the rows of this file, then stop")
    parser.add_argument("--reference", default="attnlrp")
    args = parser.parse_args()
    if args.table:
        table(args.table, args.reference)
        return
    rows = measure(args)
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
