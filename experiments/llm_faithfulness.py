"""The faithfulness study of issue 28: methods for causal LMs on zero-shot
prompt tasks, SmolLM2-135M-Instruct by default.

For each task (:data:`captum_iba.app.llm_tasks.TASKS`: SST-2, IMDB reviews of
256-512 tokens, AG News, RTE) the model answers each prompt with its choice
among the task's answer words (:func:`~captum_iba.app.llm_tasks.label_choice`);
each method scores the prompt tokens for that answer (its log-probability),
and the fair degradation test removes the content (the review, the article,
the sentence pair; never the instruction) in the method's order, tracking the
answer's probability among the answer words
(:func:`~captum_iba.metrics.choice_degradation_test`). Per prompt it keeps
drop@11 %, AOPC, comprehensiveness, sufficiency and the CPU-seconds of the
method alone (one torch thread, ``time.process_time``).

Two splits: ``search`` (train prompts, where templates and configurations are
chosen) and ``report`` (the corpus's held-out split, run once). Results are
cached per task, split and method under ``--out``, so a run resumes and
methods can be added later; several processes running the same ``run``
command share its batches (:mod:`study_parts`: each claims the next batch no
other holds), one torch thread each::

    python experiments/llm_faithfulness.py run --task sst2 --split search --n 16 \\
        --methods random,iba-deletion,ablation,ig
    python experiments/llm_faithfulness.py tables --task sst2 --split search

``summary --split report`` gives one row per task (the default against the
anchors). ``tables --docs docs`` also writes them as
``docs/_generated/llm_<task>_<split>.rst`` and the cost-faithfulness plot as
``docs/_static/llm_tradeoff_<task>_<split>.png``.

``at2-<n>`` is AT2 with head weights trained by its own code on ``n`` of the
task's training prompts (``experiments/train_at2.py --task <task> --n <n>``;
``--at2-task`` another task's, ``--at2-dir`` their folder), the content's
words its sources.

Tables use the classifier study's statistics (means, 95 % bootstrap
intervals, paired differences against the anchors).

The methods have the names they have for a classifier (``iba-deletion``,
``ig``, ``ablation``, ...); the record files keep the names of the study's
time (0.2's ``llm-ig.json`` holds ``IG``'s prompts: :func:`record_name`), so
the records of experiments/llm_results read and resume as they are, and the
tables name each method by its name now.
"""

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "lab"))  # the lab: captum_iba_lab
import faithfulness_study as fs  # noqa: E402
from captum_iba_lab import register  # noqa: E402
from captum_iba_lab.amortized_lm import LLM_OBJECTIVE, LLM_TRAIN_PROMPTS  # noqa: E402
from context_study import at2_scorers  # noqa: E402
from context_tables import AT2_PREFIX  # noqa: E402
from llm_study_tables import (  # noqa: E402
    AMORTIZED,
    TITLES,
    amortized,
    record_name,
    summary,
    tables,
)
from study_lm import TOKENIZER_HELP, study_lm  # noqa: E402
from study_parts import Record  # noqa: E402
from studylib.at2_training import at2_fit_path  # noqa: E402

from captum_iba.app.data import HELDOUT_SPLIT  # noqa: E402
from captum_iba.app.llm_tasks import (  # noqa: E402
    TASKS,
    TaskExamples,
    answer_token_ids,
    label_choice,
    task_examples,
)
from captum_iba.app.model_kind import SMOLLM2_HUB_ID  # noqa: E402
from captum_iba.attr.llm_batch import prompt_batch  # noqa: E402
from captum_iba.evaluation import Resources, build_scorers, get_preset  # noqa: E402
from captum_iba.evaluation.llm_degradation import (  # noqa: E402
    content_mask,
    degrade_scores,
)
from captum_iba.evaluation.llm_loop import scorer_batch  # noqa: E402
from captum_iba.registry import EXPLAINER_OBJECTIVES, METHODS  # noqa: E402

register()  # the lab's methods: iba-amortized on a causal LM is iba-amortized-lm
#: The lab's method the records named ``iba-amortized`` (AMORTIZED) run.
LAB_AMORTIZED = "iba-amortized-lm"


def _split(task: str, split: str) -> str:
    return "train" if split == "search" else HELDOUT_SPLIT[TASKS[task].corpus]


def run(args: argparse.Namespace) -> None:
    """Score and test every method not yet cached."""
    torch.set_num_threads(1)
    cpu = torch.backends.cpu.get_cpu_capability()
    args.at2_task = args.at2_task or args.task
    at2 = at2_scorers(args, args.methods.split(","))  # weights checked first
    model, tok = study_lm(args.model, args.tokenizer)
    task = TASKS[args.task]
    examples = task_examples(
        task, _split(args.task, args.split), tok, args.offset + args.n
    )
    if args.offset:  # a sample after the first --offset prompts of the order
        examples = TaskExamples(
            *(getattr(examples, f.name)[args.offset :] for f in fields(examples))
        )
    chosen = label_choice(model, tok, examples.prompts, task)
    accuracy = _accuracy(chosen, examples.labels)
    print(f"{args.task} {args.split}: n {args.n}, accuracy {accuracy:.3f}, "
          f"answers {[chosen.count(c) for c in range(len(task.answers))]}, "
          f"CPU {cpu}", flush=True)  # fmt: skip
    options = get_preset("fair").test.with_tokenizer(tok)
    choices = answer_token_ids(task, tok)
    for given in args.methods.split(","):
        # a registered method by its name now (old: warns); iba-amortized on a
        # causal LM is the lab's (_scorer), its records keep the name
        known = given in at2 or given == AMORTIZED
        name = given if known else METHODS.entry(given).name
        meta = dict(cpu=cpu, model=args.model)
        record = Record(
            Path(args.out) / args.task / _folder(args) / f"{_stem(name, args)}.json",
            examples.indices,
            lambda done, meta=meta: dict(
                meta, accuracy=_accuracy(chosen[:done], examples.labels[:done])
            ),
        )
        scorer = None
        for rows in record.batches(args.n, args.batch_size):
            if scorer is None:  # made once, at the first batch left to run
                made = at2.get(name)
                scorer = (
                    made(model, tok) if made else _scorer(name, model, tok, args, meta)
                )
                if made:
                    meta["fit"] = _at2_fit(scorer)
            batch = prompt_batch(
                tok, [examples.prompts[i] for i in rows],
                [task.answers[chosen[i]] for i in rows], chat=task.chat,
            )  # fmt: skip
            content = content_mask(
                tok, batch, [examples.spans[i] for i in rows], chat=task.chat
            )
            spans = [examples.spans[i] for i in rows]
            began = time.process_time()  # the method alone is timed
            given = scorer_batch(scorer, tok, batch, spans, task.chat)
            scores = scorer.attribute(given)
            seconds = (time.process_time() - began) / len(rows)
            part = fs.per_instance(
                degrade_scores(
                    model, batch, scores.answer, content, options, choices=choices
                )
            )
            part.update(
                cpu_seconds=[seconds] * len(rows),
                answers=[chosen[i] for i in rows],
                indices=[examples.indices[i] for i in rows],
            )
            record.write(rows, part)  # after every batch: an interrupted run resumes
        done = record.load()
        if done["aopc"]:
            print(_line(name, done, args.n), flush=True)


def _folder(args: argparse.Namespace) -> str:
    """The records' folder of a split: ``<split>``, or with ``--offset K``
    ``<split>-after<K>`` (another sample of the same split)."""
    return args.split + (f"-after{args.offset}" if args.offset else "")


def _variant(args: argparse.Namespace) -> str:
    """How ``iba-amortized`` 's fit differs from the command line's: ``-p<K>``
    for another number of prompts (``--fit-prompts``), ``-<objective>`` for
    another objective (``--fit-objective``), ``-e<E>`` for a number of epochs
    (``--fit-epochs``); empty for the command line's own."""
    parts = [] if args.fit_prompts == LLM_TRAIN_PROMPTS else [f"-p{args.fit_prompts}"]
    objective = args.fit_objective or LLM_OBJECTIVE
    parts += [] if objective == LLM_OBJECTIVE else [f"-{objective}"]
    parts += [] if args.fit_epochs is None else [f"-e{args.fit_epochs}"]
    return "".join(parts)


def _stem(name: str, args: argparse.Namespace) -> str:
    """The record's file stem: :func:`record_name`; for ``iba-amortized``
    fitted on another task's prompts (``--fit-on``) ``-from-<task>``, then
    :func:`_variant`; ``at2-<n>`` as it is (``-from-<task>`` when trained
    on another task's, ``--at2-task``)."""
    if name.startswith(AT2_PREFIX):  # at2-<n>: AT2 trained on n prompts
        trained_on = getattr(args, "at2_task", None) or args.task
        return name + ("" if trained_on == args.task else f"-from-{trained_on}")
    stem = record_name(name)
    steps = getattr(args, "iba_steps", None)
    layer = getattr(args, "iba_layer", None)
    if name == "iba-deletion" and (
        steps
        or layer is not None
        or getattr(args, "iba_option", None)
        or getattr(args, "second", None)
        or getattr(args, "norm_rule", False)
    ):
        extra = "".join(f"-{k}{v}" for k, v in _iba_options(args).items())
        second = getattr(args, "second", None)
        extra += f"-{_passes_stem(second)}" if second else ""
        rest_from = getattr(args, "rest_from", None)
        extra += f"-from{rest_from}" if second and rest_from else ""
        extra += "-normrule" if getattr(args, "norm_rule", False) else ""
        at = "" if layer is None else f"-layer{layer}"
        return stem + at + (f"-steps{steps}" if steps else "") + extra
    if name != AMORTIZED:
        return stem
    if args.fit_on not in (None, args.task):
        stem += f"-from-{args.fit_on}"
    refine = getattr(args, "refine_steps", 0)
    return stem + _variant(args) + (f"-r{refine}" if refine else "")


def _explainer(model: Any, tok: Any, module: Any, args: argparse.Namespace) -> Any:
    """``iba-amortized`` 's explainer, fitted (once, then loaded) on the
    ``--fit-on`` task's ``--fit-prompts`` training prompts (a seeded subset) with the
    answer words the model chooses: with the command line's settings, the
    command line's explainer (its cache folder); with others, in that
    folder's name plus :func:`_variant` (never taken by the command line)."""
    from captum_iba_lab.amortized_lm import (
        fit_lm,
        lm_explainer,
        lm_folder,
        task_batches,
        training_prompts,
    )

    from captum_iba.attr.text import resolve_layer
    from captum_iba.evaluation.amortized import objective_settings

    fit_on, k = args.fit_on or args.task, args.fit_prompts
    objective, variant = args.fit_objective or LLM_OBJECTIVE, _variant(args)
    ref = resolve_layer(model, module)
    limit = model.config.max_position_embeddings
    prompts = training_prompts(
        fit_on, tok, None, limit, cut=False, count=max(k, LLM_TRAIN_PROMPTS)
    )
    if not variant:
        return lm_explainer(
            model, tok, ref, fit_on, True, LLM_OBJECTIVE, prompts=prompts
        )
    if k > len(prompts):
        raise SystemExit(f"--fit-prompts {k}: {fit_on} gives {len(prompts)}")
    folder = lm_folder(model, ref, fit_on, objective)
    folder = folder.with_name(folder.name + variant)
    batches = task_batches(model, tok, fit_on, prompts[:k])
    settings = objective_settings(objective)  # (loaded when fitted before)
    if args.fit_epochs is not None:
        settings["epochs"] = args.fit_epochs
    return fit_lm(model, ref.module, batches, tok, folder, **settings)


def _scorer(
    name: str, model: Any, tok: Any, args: argparse.Namespace, meta: Dict[str, Any]
) -> Any:
    """The method's scorer; ``iba-amortized`` 's with its explainer
    (:func:`_explainer`), the fit's statistics added to the record's ``meta``
    (``fit``); ``iba-deletion`` with ``--iba-steps`` steps and its bottleneck
    after layer ``--iba-layer`` when given."""
    run = {"steps": args.iba_steps} if args.iba_steps else {}
    if getattr(args, "iba_layer", None) is not None:
        run["layer"] = args.iba_layer
    given = {"iba-deletion": run} if run else {}
    if args.refine_steps:
        given[AMORTIZED] = {"refine_steps": args.refine_steps}
    is_amortized = name == AMORTIZED
    method = LAB_AMORTIZED if is_amortized else name  # the lab's, for the records' name
    options = {method: given[name]} if name in given else {}
    if is_amortized:
        explainer = partial(_explainer, model, tok, args=args)
        options[method] = dict(options.get(method, {}), explainer=explainer)
    scorer = build_scorers(
        [method], Resources(model, tok), method_options=options, kind="causal-lm"
    )[method]
    if name == "iba-deletion" and _iba_options(args):
        fields = _iba_options(args)  # study options no request takes
        scorer.options = dataclasses.replace(scorer.options, **fields)
        scorer.settings.update(fields)
    if name == "iba-deletion" and getattr(args, "norm_rule", False):
        from studylib.norm_rule import NormRule

        scorer = NormRule(scorer)
    if name == "iba-deletion" and args.second:
        from studylib.kept_step import KeptStep, parse_passes

        return KeptStep(scorer, parse_passes(args.second), args.rest_from or 0)
    if not is_amortized:
        return scorer
    epochs = scorer.settings["explainer"]["epochs"]
    fit = dict(
        scorer.settings["fit"], task=args.fit_on or args.task, epochs=epochs,
        prompts=scorer.settings["fit"]["instances"] // epochs,
        objective=args.fit_objective or LLM_OBJECTIVE,
        refine_steps=args.refine_steps,
    )  # fmt: skip
    print(f"{name}: its explainer's fit: {fit}", flush=True)
    meta["fit"] = fit
    return scorer


def _passes_stem(given: str) -> str:
    """``--second`` 's passes as a record's stem (studylib.kept_step)."""
    from studylib.kept_step import parse_passes

    return "-".join(p.stem for p in parse_passes(given))


def _iba_options(args: argparse.Namespace) -> Dict[str, Any]:
    """``--iba-option KEY=VALUE`` as IBAOptions fields (numbers parsed), in the
    order given: iba-deletion's options that no request takes (``init_alpha``,
    ``lr``, ``complement_skip``, ...), recorded in the record's stem."""
    fields = {}
    for given in getattr(args, "iba_option", None) or []:
        key, _, value = given.partition("=")
        fields[key] = json.loads(value)
    return fields


def _at2_fit(scorer: Any) -> Dict[str, Any]:
    """``at2-<n>`` 's fit, for its record (``fit``): the task and the number
    of prompts its weights were trained on, its ablations each and, where
    ``train_at2.py`` wrote them beside the weights (:func:`at2_fit_path`),
    the training's CPU-s (the ablations and the fit) and its CPU's kind."""
    settings = scorer.settings
    fit = dict(
        task=settings["trained_on"], prompts=settings["trained_examples"],
        objective="AT2", ablations=settings["ablations"],
    )  # fmt: skip
    stats = at2_fit_path(settings["weights"])
    if stats.is_file():
        written = json.loads(stats.read_text())
        fit.update(cpu_seconds=written["cpu_seconds"], cpu=written.get("cpu"))
    return fit


def _line(name: str, done: Dict[str, Any], n: int) -> str:
    """A method's record, as far as this process sees it."""
    held = len(done["aopc"])
    rest = "" if held >= n else " (the rest run elsewhere, or a re-run resumes)"
    return (
        f"{name}: n {held} of {n}{rest}; aopc {np.mean(done['aopc']):.4f} "
        f"drop11 {np.mean(done['drop11']):.4f} "
        f"CPU-s/prompt {np.mean(done['cpu_seconds']):.2f}"
    )


def _accuracy(chosen: List[int], labels: List[int]) -> float:
    return float(np.mean([c == y for c, y in zip(chosen, labels)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "tables", "summary", "amortized"):
        p = sub.add_parser(name)
        if name in ("summary", "amortized"):
            p.add_argument("--tasks", default=",".join(TITLES))
        else:
            p.add_argument("--task", choices=sorted(TASKS), required=True)
        p.add_argument("--split", choices=("search", "report"), default="search")
        p.add_argument("--out", default="results/llm_faithfulness")
    for name in ("tables", "summary", "amortized"):
        sub.choices[name].add_argument(
            "--docs", help="also write the tables (and plot) under this docs folder"
        )
    sub.choices["tables"].add_argument(
        "--model-name",
        help="the records' model, for the plot's title and the docs' file names "
        "(llm_<task>_<split>_<tag>.rst, the tag its first word, lower case; "
        "default SmolLM2, whose files have no tag)",
    )
    sub.choices["run"].add_argument("--n", type=int, default=200)
    sub.choices["run"].add_argument(
        "--offset",
        type=int,
        default=0,
        help="skip the first K prompts of the split's seeded order: a sample no "
        "record of the split holds (recorded under <split>-after<K>)",
    )
    sub.choices["run"].add_argument("--methods", default="random,iba-deletion")
    sub.choices["run"].add_argument("--batch-size", type=int, default=4)
    sub.choices["run"].add_argument("--model", default=SMOLLM2_HUB_ID)
    sub.choices["run"].add_argument(
        "--fit-on",
        choices=sorted(TASKS),
        help="iba-amortized: the task whose training prompts its explainer is "
        "fitted on (default: --task; another task's is a transfer, recorded as "
        "iba-amortized-from-<task>)",
    )
    sub.choices["run"].add_argument(
        "--fit-prompts",
        type=int,
        default=LLM_TRAIN_PROMPTS,
        help="iba-amortized: how many of the task's training prompts (a seeded "
        f"subset) its explainer is fitted on (default {LLM_TRAIN_PROMPTS}, the "
        "command line's number and cached explainer; another is recorded as "
        "iba-amortized-p<K>)",
    )
    sub.choices["run"].add_argument("--tokenizer", help=TOKENIZER_HELP)
    sub.choices["run"].add_argument(
        "--at2-dir", help="at2-<n>: AT2's weights folder (default: the cache's)"
    )
    sub.choices["run"].add_argument(
        "--at2-task",
        help="at2-<n>: the task its weights were trained on (experiments/"
        "train_at2.py --task; default --task: trained on the task's own "
        "training prompts)",
    )
    sub.choices["run"].add_argument(
        "--fit-objective",
        choices=sorted(EXPLAINER_OBJECTIVES),
        help=f"iba-amortized: what its explainer is trained on (default "
        f"{LLM_OBJECTIVE!r}, the command line's; another is recorded as "
        "iba-amortized-<objective>)",
    )
    sub.choices["run"].add_argument(
        "--fit-epochs",
        type=int,
        help="iba-amortized: epochs of its fit (default the objective's; given: "
        "recorded as iba-amortized-e<E>)",
    )
    sub.choices["run"].add_argument(
        "--iba-layer",
        type=int,
        help="iba-deletion: the bottleneck after this layer of the model's stack "
        "(0-based; the deletion acts in the layers above it, a step runs and "
        "differentiates only those; default the embeddings), recorded as "
        "llm-iba-deletion-layer<K>",
    )
    sub.choices["run"].add_argument(
        "--iba-steps",
        type=int,
        help="iba-deletion: its optimisation steps (default its configuration's, "
        "7; given: recorded as llm-iba-deletion-steps<K>), e.g. the control of "
        "--refine-steps: as many steps from no explainer",
    )
    sub.choices["run"].add_argument(
        "--second",
        metavar="MODE:SHARE[:TRIM[:COMBINE]][+...]",
        help="iba-deletion: more steps on shorter prompts (kept:0.5: the top "
        "half the first kept; rest:0.25: the top quarter deleted; rest:0.25:0.3 "
        "also the bottom 30 %%; rest:0.33::last: the rest ranked by that step "
        "alone; '+' for a third pass), studylib.kept_step; recorded as "
        "llm-iba-deletion-...-<MODE><SHARE>[-trim<TRIM>][-last]",
    )
    sub.choices["run"].add_argument(
        "--rest-from",
        type=int,
        help="with --second: the fewest scored tokens of a prompt that takes "
        "the passes (iba-fast's rule: 128; default all), recorded as ...-from<N>",
    )
    sub.choices["run"].add_argument(
        "--norm-rule",
        action="store_true",
        help="iba-deletion: its gradient through the RMS norms as through fixed "
        "scales (AttnLRP's rule; studylib.norm_rule), recorded as "
        "llm-iba-deletion-...-normrule",
    )
    sub.choices["run"].add_argument(
        "--iba-option",
        action="append",
        metavar="KEY=VALUE",
        help="iba-deletion: an IBAOptions field no request takes (init_alpha=2, "
        "complement_skip=1, lr=8; a JSON value), recorded as "
        "llm-iba-deletion[-steps<K>]-<KEY><VALUE>",
    )
    sub.choices["run"].add_argument(
        "--refine-steps",
        type=int,
        default=0,
        help="iba-amortized: iba-deletion's steps from the explainer's mask, per "
        "prompt (default 0; given: recorded as iba-amortized-...-r<K>, the same "
        "explainer)",
    )
    args = parser.parse_args()
    commands = {
        "run": run, "tables": tables, "summary": summary, "amortized": amortized
    }  # fmt: skip
    commands[args.command](args)


if __name__ == "__main__":
    main()
