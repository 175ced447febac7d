"""``captum-iba evaluate`` / ``attribute`` on a causal LM: the corpus as
zero-shot prompts (:data:`~captum_iba.app.llm_tasks.TASKS`), the model's
choice among the task's answer words explained and tested
(:class:`~captum_iba.evaluation.llm_loop.PromptJob`), on the corpus engine
(many processes, resumable) as for a classifier.

The model's kind is known before anything loads where its name says it (a
GGUF file, a folder's ``config.json``, SmolLM2's hub id), else from its
configuration; the methods are checked against it (a classifier's method on
a causal LM is refused, naming the methods for causal LMs).
"""

import argparse
from typing import Any, Dict, List, Optional

from captum_iba.app.errors import CLIError
from captum_iba.app.model_kind import SMOLLM2_HUB_ID, kind_hint, model_kind
from captum_iba.registry import (
    DEFAULT_COMPARISON,
    DEFAULT_LLM_COMPARISON,
    DEFAULT_LLM_METHOD,
    DEFAULT_METHOD,
)

__all__ = [
    "DEFAULT_METHODS",
    "check_kind",
    "default_methods",
    "is_causal_lm",
    "prompt_job",
]


def _hint(model: Optional[str]) -> Optional[str]:
    if model is None:
        return "classifier"  # the default model: MiniLM-L6 fine-tuned
    if model == SMOLLM2_HUB_ID:
        return "causal-lm"
    return kind_hint(model)


#: The methods run when none is named, by command and kind of model.
DEFAULT_METHODS = {
    ("evaluate", "classifier"): DEFAULT_COMPARISON,
    ("evaluate", "causal-lm"): DEFAULT_LLM_COMPARISON,
    ("attribute", "classifier"): (DEFAULT_METHOD,),
    ("attribute", "causal-lm"): (DEFAULT_LLM_METHOD,),
}


def default_methods(command: str, model: Optional[str]) -> List[str]:
    """What ``command`` runs when no method is named: for a model whose name
    says it is a causal LM, the methods for causal LMs."""
    kind = "causal-lm" if _hint(model) == "causal-lm" else "classifier"
    return [m.lower() for m in DEFAULT_METHODS[(command, kind)]]


def is_causal_lm(args: argparse.Namespace) -> bool:
    """Whether ``--model`` is a causal LM (its name, else its configuration)."""
    hint = _hint(args.model)
    if hint is not None:
        return hint == "causal-lm"
    from captum_iba.app.models import model_config

    return model_kind(model_config(args.model)) == "causal-lm"


def prompt_job(args: argparse.Namespace, data: Any, settings: Dict[str, Any]) -> Any:
    """The :class:`~captum_iba.evaluation.llm_loop.PromptJob` of a corpus run
    on a causal LM: the model and tokenizer loaded, every instance of
    ``data`` made a prompt of its corpus's task, the methods built.

    Raises:
        ~captum_iba.app.errors.CLIError: For answer words that are not one
            token.
    """
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.engine.records import weights_digest
    from captum_iba.app.llm_tasks import TASKS, answer_token_ids, prompt_content
    from captum_iba.evaluation import Resources, build_scorers, get_preset
    from captum_iba.evaluation.llm_loop import PromptJob

    task = TASKS[args.dataset]  # (check_kind said it is there)
    model, tok = load_causal_lm(args.model)
    try:
        choices = answer_token_ids(task, tok)
    except ValueError as err:
        raise CLIError(str(err)) from None
    made = [task.prompt(prompt_content(task, data, i)) for i in range(len(data))]
    preset = get_preset(args.setting)
    return PromptJob(
        model=model,
        tokenizer=tok,
        data=data,
        scorers=build_scorers(args.request, Resources(model, tok), preset),
        settings=dict(settings, weights=weights_digest(model), task=repr(task)),
        preset=preset,
        batch_size=args.batch_size,
        target=getattr(args, "target", None) or "predicted",
        degradation=args.command == "evaluate" or args.degradation,
        prompts=[p for p, _ in made],
        spans=[s for _, s in made],
        answers=task.answers,
        choices=choices,
        chat=task.chat,
    )


def check_kind(args: argparse.Namespace, llm: bool) -> None:
    """The methods explain the model's kind, and a causal LM's corpus has a
    prompt task.

    Raises:
        ~captum_iba.app.errors.CLIError: Naming the methods that do not fit
            (and those that do), or the tasks.
    """
    from captum_iba.request import check_model_kind

    kind = "causal-lm" if llm else "classifier"
    try:
        check_model_kind(args.request.methods, kind, cli=True)
    except ValueError as err:
        raise CLIError(f"--methods: {err}") from None
    if llm:
        from captum_iba.app.llm_tasks import TASKS

        if args.dataset not in TASKS:
            raise CLIError(
                f"--dataset {args.dataset}: no prompt task for a causal LM; the "
                f"tasks are {', '.join(sorted(TASKS))}"
            )
