"""How the lab fits a causal LM's ``iba-amortized-lm`` explainer on a
context task (issue 52, the product's until issue 88; ``python -m
captum_iba_lab.amortized_lm --task context-facts``): the task's search
contexts - AG News's training part, never the report split - with the
model's greedy responses, their sources
marked, distilled from one ``iba-deletion`` step's masks
(docs/studies/amortized_llm_contexts.rst, "Fitted on contexts": the settings
measured there against AT2).

The explainer is cached as every other (:func:`~captum_iba_lab.amortized_lm.
lm_folder`, the task's name as its corpus); these settings are part of
its folder's digest, so an explainer fitted otherwise is never taken for it.
"""

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from captum_iba.app.errors import CLIError

__all__ = [
    "CONTEXT_FIT",
    "CONTEXT_OBJECTIVE",
    "context_fit_batches",
    "context_fit_settings",
    "fit_contexts",
    "fit_on_contexts",
]

#: The data and schedule of a context task's explainer: ``contexts`` search
#: contexts drawn with ``seed`` (AT2's training examples in
#: ``experiments/train_at2.py``; for ``context-facts`` ``passages`` passages
#: each), its teacher ``iba-deletion`` with ``teacher_steps`` steps, ``epochs``
#: epochs, ``batch_size`` contexts a batch.
CONTEXT_FIT: Dict[str, Any] = dict(
    contexts=128, seed=1000, passages=(3, 6), teacher_steps=1, epochs=30,
    batch_size=4,
)  # fmt: skip

#: What a context task's explainer is trained on when ``--explainer-objective``
#: is not given: the teacher's masks alone (the deletion objective costs a
#: forward and backward of the whole model per context and epoch).
CONTEXT_OBJECTIVE = "distil"


def context_fit_settings(
    objective: str = CONTEXT_OBJECTIVE, fit: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """The fit settings of a context task's explainer trained on
    ``objective`` (:func:`~captum_iba.evaluation.amortized.objective_settings`
    with ``fit`` 's epochs and teacher steps; ``fit`` by default
    :data:`CONTEXT_FIT`)."""
    from captum_iba.evaluation.amortized import objective_settings

    fit = CONTEXT_FIT if fit is None else fit
    teacher = {"config": "deletion", "steps": fit["teacher_steps"]}
    return dict(objective_settings(objective), epochs=fit["epochs"], teacher=teacher)


def fit_contexts(
    task: str, data_dir: Optional[str] = None, fit: Optional[Dict[str, Any]] = None
) -> List[Any]:
    """``fit`` 's search contexts of ``task`` (default :data:`CONTEXT_FIT`;
    the examples, no model needed)."""
    from captum_iba.app.context_tasks import context_examples

    fit = CONTEXT_FIT if fit is None else fit
    options = {"sources": fit["passages"]} if task == "context-facts" else {}
    return context_examples(
        task, "search", fit["contexts"], seed=fit["seed"], data_dir=data_dir,
        **options,
    )  # fmt: skip


def context_fit_batches(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Any],
    positions: Optional[int] = None,
    before: Optional[Callable[[int], Any]] = None,
    fit: Optional[Dict[str, Any]] = None,
) -> List[Any]:
    """The training batches of a context explainer: the ``examples`` whose
    prompt and longest response fit in the model's ``positions``, with the
    model's greedy responses
    (:func:`~captum_iba.evaluation.context_loop.context_batch`), in the
    layout a context task's run gives the model (its chat template, else
    text), ``fit`` 's ``batch_size`` a batch (and its ``max_new_tokens``
    when given, else the run's). ``before`` is called with the number of
    contexts kept before their responses are made (the slow part).

    Raises:
        ~captum_iba.app.errors.CLIError: When no context fits.
    """
    from captum_iba.app.context_tasks import prompt_layout
    from captum_iba.attr.llm_batch import uses_chat
    from captum_iba.evaluation.context_loop import (
        MAX_NEW_TOKENS,
        ContextData,
        context_batch,
        too_long,
    )

    fit = CONTEXT_FIT if fit is None else fit
    longest = fit.get("max_new_tokens", MAX_NEW_TOKENS)
    chat = uses_chat(tokenizer, None)
    data = ContextData(tuple(examples), prompt_layout(chat))
    kept = [
        i
        for i in range(len(data))
        if too_long(tokenizer, data, i, chat, positions, longest) is None
    ]
    if not kept:
        raise CLIError(
            f"iba-amortized: none of the {len(data)} search contexts fits in the "
            f"model's {positions} positions, to fit the explainer on"
        )
    if before is not None:
        before(len(kept))
    size = fit["batch_size"]
    return [
        context_batch(model, tokenizer, data, kept[i : i + size], chat, longest)
        for i in range(0, len(kept), size)
    ]


def fit_on_contexts(
    model: Any,
    tokenizer: Any,
    layer: Any,
    task: str,
    folder: Path,
    data_dir: Optional[str] = None,
    objective: str = CONTEXT_OBJECTIVE,
    fit: Optional[Dict[str, Any]] = None,
    examples: Optional[Sequence[Any]] = None,
) -> Any:
    """Fit (into ``folder``, resumed from it) the explainer of ``model`` 's
    ``layer`` (a :class:`~captum_iba.attr.text.LayerRef`) on the context
    ``task`` 's search contexts (``examples`` when given, else
    :func:`fit_contexts`), with ``fit`` 's settings (default
    :data:`CONTEXT_FIT`: :func:`context_fit_batches`,
    :func:`context_fit_settings`).

    Returns:
        AmortizedExplainer: The explainer.
    """
    from captum_iba._utils.common import max_positions
    from captum_iba_lab.amortized_lm import fit_lm

    fit = CONTEXT_FIT if fit is None else fit
    if examples is None:
        examples = fit_contexts(task, data_dir, fit)

    def say(contexts: int) -> None:
        print(
            f"[captum_iba] on {contexts} search contexts of the {task} task with the "
            f"model's greedy responses, objective {objective!r}, taught by "
            f"iba-deletion with {fit['teacher_steps']} step(s)",
            flush=True,
        )

    batches = context_fit_batches(
        model, tokenizer, examples, max_positions(model), before=say, fit=fit
    )
    return fit_lm(
        model, layer.module, batches, tokenizer, folder,
        **context_fit_settings(objective, fit),
    )  # fmt: skip
