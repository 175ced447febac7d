"""``captum-iba evaluate`` / ``attribute`` on a causal LM: the corpus as
zero-shot prompts (:data:`~captum_iba.app.llm_tasks.TASKS`), the model's
choice among the task's answer words explained and tested
(:class:`~captum_iba.evaluation.llm_loop.PromptJob`), on the corpus engine
(many processes, resumable) as for a classifier.

The model's kind was decided at the entry, before anything loads, and the
methods checked against it (a classifier's method on a causal LM is refused,
naming the methods for causal LMs): :class:`PromptTask` is the causal LM's
corpus job (:func:`~captum_iba.app.cli_checks.corpus_task`).
"""

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

from captum_iba.app.corpus_task import DatasetTask, Prepared, on_device
from captum_iba.app.errors import CLIError

__all__ = [
    "PROMPT_TASK",
    "PreparedPrompts",
    "PromptTask",
    "check_prompt_task",
    "prepare_prompts",
    "prompt_job",
]


@dataclass
class PreparedPrompts:
    """A causal LM's corpus run, prepared before its weights load
    (:func:`prepare_prompts`).

    Attributes:
        data: The corpus split.
        tokenizer: The model's tokenizer.
        prompts (list of str): Each instance's prompt.
        spans (list of (int, int)): Where its content lies.
        cut (list of int): Per instance, the content tokens cut to fit
            ``--max-length`` (empty when it was not given).
        choices (list of int): The answer words' token ids.
    """

    data: Any
    tokenizer: Any
    prompts: List[str]
    spans: List[Tuple[int, int]]
    cut: List[int]
    choices: List[int]


def prepare_prompts(args: Any, split: str) -> PreparedPrompts:
    """Everything of a causal LM's corpus run that needs no weights, checked
    before they load: the request against the model's configuration
    (:func:`~captum_iba.app.llm_checks.check_lm_request`), the answer words
    (one known token each), and every prompt against the model's positions -
    a prompt longer is refused, naming the instances, unless ``--max-length``
    is given: then each prompt is made to fit it by cutting its content
    (never the instruction), the tokens cut recorded per row.

    Raises:
        ~captum_iba.app.errors.CLIError: Naming what does not fit.
    """
    from captum_iba._utils.common import max_positions
    from captum_iba.app.causal_lm import load_lm_tokenizer
    from captum_iba.app.checks import check_against_config
    from captum_iba.app.data import load_dataset
    from captum_iba.app.llm_checks import check_lm_request, lm_config
    from captum_iba.app.llm_tasks import (
        TASKS,
        answer_token_ids,
        fit_prompt,
        prompt_content,
    )

    task = TASKS[args.dataset]  # (check_prompt_task said it is there)
    config = lm_config(args.model)
    check_lm_request(args.request, config)
    check_against_config(config, max_length=args.max_length)
    positions = max_positions(SimpleNamespace(config=config))
    tok = load_lm_tokenizer(args.model, checked=True)  # (the request's kind)
    try:
        choices = answer_token_ids(task, tok)
    except ValueError as err:
        raise CLIError(str(err)) from None
    data = load_dataset(
        args.dataset, split, data_dir=args.data_dir, max_examples=args.n
    )
    limit = args.max_length or positions or 10**9
    out = PreparedPrompts(data, tok, [], [], [], choices)
    long: List[str] = []
    for i in range(len(data)):
        made = fit_prompt(task, tok, prompt_content(task, data, i), limit)
        if made is None or (made[2] and args.max_length is None):
            long.append(str(i))
            continue
        out.prompts.append(made[0])
        out.spans.append(made[1])
        out.cut.append(made[2])
    if long:
        what = f"{len(long)} prompt(s) (instances {', '.join(long[:8])}"
        what += ", ...)" if len(long) > 8 else ")"
        if args.max_length is None:
            raise CLIError(
                f"--dataset {args.dataset}: {what} have more tokens than the "
                f"model's {positions} positions; give --max-length {positions} "
                "(or fewer) to cut their content to fit, recorded per row, or "
                "--n to take fewer instances"
            )
        raise CLIError(
            f"--max-length {args.max_length}: {what} do not fit even with one "
            "token of content: the instruction alone is longer"
        )
    if args.max_length is None:
        out.cut = []
    return out


def prompt_job(args: Any, prepared: PreparedPrompts, settings: Dict[str, Any]) -> Any:
    """The :class:`~captum_iba.evaluation.llm_loop.PromptJob` of a corpus run
    on a causal LM: the model loaded (its tokenizer and prompts were
    prepared before, :func:`prepare_prompts`), the methods built."""
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.engine.records import weights_digest
    from captum_iba.app.llm_tasks import TASKS
    from captum_iba.evaluation import Resources, build_scorers, get_preset
    from captum_iba.evaluation.llm_loop import PromptJob

    task = TASKS[args.dataset]
    tok = prepared.tokenizer
    model, _ = load_causal_lm(args.model, tok)
    preset = get_preset(args.setting)
    return PromptJob(
        model=model,
        tokenizer=tok,
        data=prepared.data,
        scorers=build_scorers(
            args.request,
            Resources(model, tok),
            preset,
            kind=args.kind,
        ),
        settings=dict(settings, weights=weights_digest(model), task=repr(task)),
        preset=preset,
        batch_size=args.batch_size,
        target=getattr(args, "target", None) or "predicted",
        degradation=args.command == "evaluate" or args.degradation,
        prompts=prepared.prompts,
        spans=prepared.spans,
        answers=task.answers,
        choices=prepared.choices,
        chat=task.chat,
        cut=prepared.cut,
    )


def check_prompt_task(args: Any) -> None:
    """A causal LM's corpus has a prompt task.

    Raises:
        ~captum_iba.app.errors.CLIError: Naming the tasks.
    """
    from captum_iba.app.llm_tasks import TASKS

    if args.dataset not in TASKS:
        raise CLIError(
            f"--dataset {args.dataset}: no prompt task for a causal LM; the "
            f"tasks are {', '.join(sorted(TASKS))}"
        )


class PromptTask(DatasetTask):
    """A causal LM's corpus run: the corpus as zero-shot prompts, the model's
    choice among the task's answer words explained and tested."""

    def prepare(self, args: Any, split: str) -> Prepared:
        """The prompt task checked, the prompts made and checked
        (:func:`prepare_prompts`)."""
        check_prompt_task(args)
        return prepare_prompts(args, split), None

    def job(
        self, args: Any, world: Any, split: str, prepared: Any, settings: Dict
    ) -> Any:
        return on_device(prompt_job(args, prepared, settings), world)


#: The causal LM's corpus task (:func:`~captum_iba.app.cli_checks.corpus_task`).
PROMPT_TASK = PromptTask()
