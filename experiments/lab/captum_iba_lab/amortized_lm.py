"""Amortized IBA on a causal LM (``iba-amortized-lm``): the lab's since issue
88. On a prompt's words it measured at random's level
(docs/studies/amortized_llm.rst) and below random on topic contexts
(docs/studies/amortized_llm_contexts.rst), so it left the product, whose
``iba-amortized`` explains classifiers (where it measured near AttnLRP at
2.6-3.8x less CPU).

An explainer is fitted once per model, layer and task and cached as the
product caches a classifier's (:func:`captum_iba.app.amortized.
explainer_folder`, the task's name as its corpus, these fit settings in its
digest, so the study's and 0.3.0's cached explainers are found as they
were):

* on a prompt task's training prompts (:data:`LLM_TRAIN_PROMPTS`, made as the
  task's run makes its prompts, :func:`training_prompts`) with the model's
  choice among the task's answer words (:func:`task_batches`), trained on
  :data:`LLM_OBJECTIVE` unless asked otherwise; its folder's ``len0`` says
  the prompts were not cut;
* on a context task's search contexts with the model's greedy responses
  (:mod:`captum_iba_lab.context_fit`).

Fit one with ``python -m captum_iba_lab.amortized_lm --model M --task TASK``
(or the studies' scripts); the scorer (:class:`AmortizedLMScorer`) finds the
one cached for the model and layer - the task's given as ``task=``
(``method_options={"iba-amortized-lm": {"task": "sst2"}}``), else the one
task whose explainer is cached.
"""

import argparse
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from captum_iba.app.amortized import cached_in, explainer_folder, fitted_folders
from captum_iba.app.amortized import train_split as _train_split
from captum_iba.app.context_tasks import CONTEXT_TASKS
from captum_iba.app.errors import CLIError
from captum_iba.attr._amortized_pass import Batch
from captum_iba.attr.amortized import AmortizedExplainer
from captum_iba.attr.explainer import OBJECTIVE_OPTIONS
from captum_iba.attr.llm import llm_options
from captum_iba.attr.llm_batch import PromptBatch, _pad_id, prompt_batch
from captum_iba.attr.options import IBAOptions, _check_int
from captum_iba.attr.text import LayerLike, LayerRef, resolve_layer
from captum_iba.evaluation.amortized import (
    IBAAmortizedScorer,
    fit_with,
    objective_settings,
)
from captum_iba_lab.context_fit import (
    CONTEXT_FIT,
    CONTEXT_OBJECTIVE,
    context_fit_settings,
    fit_on_contexts,
)

__all__ = [
    "LLM_ANSWERS",
    "LLM_OBJECTIVE",
    "LLM_TRAIN_PROMPTS",
    "AmortizedLMScorer",
    "cached_lm_explainer",
    "causal_lm_settings",
    "default_objective",
    "fit_batch",
    "fit_lm",
    "lm_explainer",
    "lm_folder",
    "prompt_batches",
    "task_batches",
    "training_prompts",
]

#: Training prompts a causal LM's explainer is fitted on (the copy model's
#: 128, on which the deletion objective ranked the copied token first on 24
#: of 24 held-out prompts: tests/lab/test_amortized_lm.py).
LLM_TRAIN_PROMPTS = 128

#: What a causal LM's explainer is trained on when no objective is asked
#: for: iba-deletion's objective (24 of 24 on the copy model, the distilled
#: one 18).
LLM_OBJECTIVE = "deletion"

#: Which answers a causal LM's explainer is fitted on, part of its folder's
#: settings digest: ``"choice"``, the model's choice among the task's answer
#: words (:func:`task_batches`). An explainer fitted on other answers (the
#: greedy first token, which can be empty, before 0.3) is not taken for it.
LLM_ANSWERS = "choice"


def default_objective(task: Optional[str]) -> str:
    """What a causal LM's explainer for ``task`` is trained on when no
    objective is asked for: :data:`~captum_iba_lab.context_fit.
    CONTEXT_OBJECTIVE` for a context task, else :data:`LLM_OBJECTIVE`."""
    return CONTEXT_OBJECTIVE if task in CONTEXT_TASKS else LLM_OBJECTIVE


def lm_settings(task: str, objective: str) -> Dict[str, Any]:
    """The fit settings a causal LM's explainer for ``task`` trained on
    ``objective`` is cached by (its folder's digest): a prompt task's
    :func:`~captum_iba.evaluation.amortized.objective_settings` with
    :data:`LLM_ANSWERS`; a context task's :func:`~captum_iba_lab.
    context_fit.context_fit_settings`, data (:data:`~captum_iba_lab.
    context_fit.CONTEXT_FIT`) and greedy responses."""
    if task in CONTEXT_TASKS:
        return dict(context_fit_settings(objective), data=CONTEXT_FIT, answers="greedy")
    return dict(objective_settings(objective), answers=LLM_ANSWERS)


def lm_folder(
    model: Any, layer: LayerRef, task: str, objective: str, max_length: int = 0
) -> Path:
    """Where the explainer of ``model`` 's ``layer`` for ``task`` trained on
    ``objective`` is cached (``max_length`` 0: prompts not cut)."""
    settings = lm_settings(task, objective)
    return explainer_folder(model, layer, task, max_length, objective, settings)


def training_prompts(
    task: str,
    tokenizer: Any,
    data_dir: Optional[str],
    limit: int,
    cut: bool,
    count: Optional[int] = None,
) -> List[str]:
    """A causal LM's training prompts: ``count`` (default
    :data:`LLM_TRAIN_PROMPTS`) instances of the prompt ``task`` 's training
    split (a seeded subset, stratified by label) as its prompts, each
    at most ``limit`` tokens - its content cut to fit when ``cut``
    (``--max-length`` given), else a longer one left out -, as the task's
    run makes them (:func:`~captum_iba.app.llm_tasks.fit_prompt`). Made from
    the tokenizer alone, before the weights load.

    Raises:
        ~captum_iba.app.errors.CLIError: When the task's corpus has no
            training split, or none of its prompts fits.
    """
    from captum_iba.app.llm_tasks import TASKS, fit_prompt, prompt_content

    spec = TASKS[task]
    data = _train_split(task, data_dir, count or LLM_TRAIN_PROMPTS)
    prompts = []
    for i in range(len(data)):
        made = fit_prompt(spec, tokenizer, prompt_content(spec, data, i), limit)
        if made is not None and (cut or not made[2]):
            prompts.append(made[0])
    if not prompts:
        raise CLIError(
            f"iba-amortized: none of {task!r}'s {len(data)} training prompts fits "
            f"in {limit} tokens, to fit the explainer on"
        )
    return prompts


def prompt_batches(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    batch_size: int = 8,
    chat: Optional[bool] = False,
    max_new_tokens: int = 25,
    answers: Optional[Sequence[str]] = None,
) -> List[PromptBatch]:
    """Prompts with the model's greedy answers, in batches: a causal LM's
    training data for :func:`fit_lm` (the answers the causal-LM route
    explains).

    Args:
        model (nn.Module): The causal LM.
        tokenizer: Its tokenizer.
        prompts (Sequence[str]): The training prompts.
        batch_size (int): Prompts per batch. Default 8.
        chat (bool, optional): Wrap each prompt as a user turn of the chat
            template; None: when the tokenizer has one. Default False, as
            :func:`~captum_iba.attr.llm_batch.prompt_batch`: explain with
            the same choice (it is not part of the explainer's key).
        max_new_tokens (int): The longest greedy answer.
        answers (Sequence[str], optional): The answers to explain instead,
            one per prompt (e.g. a prompt task's choice among its answer
            words). Default None: the model's greedy answers.

    Returns:
        list of PromptBatch: The batches.

    Raises:
        ValueError: For no prompt, a bad ``batch_size``, or ``answers`` not
            one per prompt.
    """
    _check_int("batch_size", batch_size)
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty sequence of strings")
    if answers is not None and len(answers) != len(prompts):
        raise ValueError(
            f"answers must hold one answer per prompt: {len(answers)} for "
            f"{len(prompts)} prompts"
        )
    return [
        prompt_batch(
            tokenizer,
            prompts[i : i + batch_size],
            None if answers is None else list(answers[i : i + batch_size]),
            model=model,
            chat=chat,
            max_new_tokens=max_new_tokens,
        )  # fmt: skip
        for i in range(0, len(prompts), batch_size)
    ]


def task_batches(
    model: Any, tokenizer: Any, task: str, prompts: Sequence[str]
) -> List[PromptBatch]:
    """A causal LM's training batches for the prompt ``task``: each prompt
    with the answer word the model chooses among the task's
    (:func:`~captum_iba.app.llm_tasks.label_choice`), the answer the corpus
    run explains - never an empty answer, which a greedy first token can be
    (SmolLM2 ends some RTE prompts at once)."""
    from captum_iba.app.llm_tasks import TASKS, label_choice

    spec = TASKS[task]
    chosen = label_choice(model, tokenizer, prompts, spec)
    answers = [spec.answers[c] for c in chosen]
    return prompt_batches(model, tokenizer, prompts, chat=spec.chat, answers=answers)


def fit_batch(batch: Any) -> Any:
    """A :class:`~captum_iba.attr.batches.PromptBatch` as the explainer's fit
    reads it (:class:`~captum_iba.attr._amortized_pass.Batch`): the
    arguments of :class:`~captum_iba.attr.llm.CausalLMLogLikelihood`, its
    ``scored`` tokens the explained ones, as the causal-LM route explains
    them; any other batch as it is."""
    if not isinstance(batch, PromptBatch):
        return batch
    args = batch.arguments()
    extra = (args["attention_mask"], args["labels"])
    return Batch(args["input_ids"], extra, batch.scored[:, :-1].bool())


def causal_lm_settings(options: Dict[str, Any], tokenizer: Any) -> Dict[str, Any]:
    """A causal LM's fit settings from ``options``: the objective's and the
    teacher's IBA options explain the answer's log-probability (objective
    ``"log_probability"``), a named configuration with the fields the
    causal-LM route adds (:func:`~captum_iba.attr.llm.llm_options`:
    ``iba-deletion``'s complement at every step); the padding id is the
    tokenizer's pad, else its end-of-text token, as the causal-LM route's.

    Raises:
        ValueError: Without a tokenizer.
    """
    if tokenizer is None:
        raise ValueError(
            "a causal LM's explainer needs its tokenizer (tokenizer=): its digest "
            "is kept with the explainer, and it gives the padding id"
        )
    out = dict(options)
    out["options"] = _log_probability(out.get("options", OBJECTIVE_OPTIONS))
    if out.get("teacher") is not None:
        out["teacher"] = _log_probability(out["teacher"])
    out.setdefault("pad_token_id", _pad_id(tokenizer))  # the batches' padding
    return out


def _log_probability(value: Any) -> IBAOptions:
    """IBA options (themselves, a configuration name or a dict of fields with
    an optional ``config``) for the answer's log-probability."""
    if isinstance(value, IBAOptions):
        return value.replace(objective="log_probability")
    fields = {"config": value} if isinstance(value, str) else dict(value)
    fields = llm_options({"config": "paper", **fields})
    config = fields.pop("config")
    return IBAOptions.from_config(config, **{**fields, "objective": "log_probability"})


def fit_lm(
    model: Any,
    layer: Any,
    data: Any,
    tokenizer: Any = None,
    folder: Optional[Any] = None,
    show_progress: bool = True,
    **settings: Any,
) -> AmortizedExplainer:
    """Fit (or load from ``folder``) a causal LM's explainer: the product's
    fit (:func:`~captum_iba.evaluation.amortized.fit_with`) with
    :func:`causal_lm_settings`, over ``data`` 's
    :class:`~captum_iba.attr.batches.PromptBatch` es (:func:`fit_batch`).
    The arguments are :func:`~captum_iba.evaluation.amortized.fit_amortized`
    's; the tokenizer is needed."""
    # read lazily: a loader that stops (Ctrl-C) stops the fit, which resumes
    batches = _SizedFit(data) if hasattr(data, "__len__") else _Fit(data)
    return fit_with(
        model, layer, batches, causal_lm_settings, tokenizer, folder, show_progress,
        **settings,
    )  # fmt: skip


class _Fit:
    """An iterable of batches as :func:`fit_batch` gives them, read as the
    fit reads it (once per epoch)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def __iter__(self) -> Any:
        return (fit_batch(b) for b in self.data)


class _SizedFit(_Fit):
    """:class:`_Fit` of a loader that has a length."""

    def __len__(self) -> int:
        return len(self.data)


def lm_explainer(
    model: Any,
    tokenizer: Any,
    layer: LayerRef,
    task: str,
    fit: bool,
    objective: Optional[str] = None,
    data_dir: Optional[str] = None,
    max_length: int = 0,
    prompts: Optional[Sequence[str]] = None,
) -> AmortizedExplainer:
    """The cached explainer of the causal LM ``model`` 's ``layer`` for
    ``task`` trained on ``objective`` (None: :func:`default_objective`),
    fitted (and cached) when ``fit`` and none is: on a prompt task's
    ``prompts`` (:func:`training_prompts`; ``max_length`` 0: not cut) with
    the model's choice among its answer words, on a context task's search
    contexts (:func:`~captum_iba_lab.context_fit.fit_on_contexts`).

    Raises:
        ~captum_iba.app.errors.CLIError: When none is cached and ``fit`` is
            False (naming the command that fits it), or when the cached one
            is damaged or stale.
    """
    objective = objective or default_objective(task)
    folder = lm_folder(model, layer, task, objective, max_length)

    def fitted() -> AmortizedExplainer:
        if task in CONTEXT_TASKS:
            return fit_on_contexts(
                model, tokenizer, layer, task, folder, data_dir, objective
            )
        print(
            f"[captum_iba] on {len(prompts or ())} training prompts of the "
            f"{task} task with the model's choice among its answer words, "
            f"objective {objective!r}"
        )
        batches = task_batches(model, tokenizer, task, list(prompts or ()))
        return fit_lm(
            model, layer.module, batches, tokenizer, folder,
            **objective_settings(objective),
        )  # fmt: skip

    none = (
        f"no fitted explainer for this causal LM and layer in {folder}: fit it "
        f"with {_fit_command(task, objective)} first"
    )
    return cached_in(
        folder, model, layer, fitted if fit else None, tokenizer, none_fitted=none
    )


def _fit_command(task: str, objective: str) -> str:
    """The command that fits the explainer of ``task`` (``TASK``: any)
    trained on ``objective``, quoted."""
    flag = "" if objective == default_objective(task) else f" --objective {objective}"
    return f"`python -m captum_iba_lab.amortized_lm --model MODEL --task {task}{flag}`"


def cached_lm_explainer(
    model: Any,
    tokenizer: Any,
    layer: LayerRef,
    objective: Optional[str] = None,
    task: Optional[str] = None,
) -> AmortizedExplainer:
    """The explainer cached for the causal LM ``model`` 's ``layer`` and
    ``objective`` (None: each task's :func:`default_objective`), fitted on
    ``task`` (None: the one task whose explainer is cached, named) - the one
    fitted on uncut prompts, else the longest; never fitted here.

    Raises:
        ~captum_iba.app.errors.CLIError: When none is cached (naming the
            command that fits one), or several tasks' are and ``task`` is
            None (naming them and ``task=``).
    """
    if task is None:
        task = _the_cached_task(model, layer, objective)
    chosen = objective or default_objective(task)
    found = fitted_folders(model, layer, task, settings=lm_settings(task, chosen))
    if not found:
        raise CLIError(
            f"iba-amortized-lm: no explainer fitted on the {task} task is cached "
            f"for this causal LM and layer (objective {chosen!r}): fit it with "
            f"{_fit_command(task, chosen)} (with the same --layer)"
        )
    length = 0 if 0 in found else max(found)
    print(f"[captum_iba] iba-amortized-lm: the explainer fitted on the {task} task")
    return lm_explainer(model, tokenizer, layer, task, False, chosen, max_length=length)


def _the_cached_task(model: Any, layer: LayerRef, objective: Optional[str]) -> str:
    """The one prompt or context task whose explainer is cached for
    ``model``, ``layer`` and ``objective`` (None: each task's
    :func:`default_objective`).

    Raises:
        ~captum_iba.app.errors.CLIError: When none is, naming the command
            that fits one; when several are, naming them and ``task=``.
    """
    from captum_iba.app.llm_tasks import TASKS

    def cached(task: str) -> bool:
        settings = lm_settings(task, objective or default_objective(task))
        return bool(fitted_folders(model, layer, task, settings=settings))

    tasks = [t for t in (*TASKS, *CONTEXT_TASKS) if cached(t)]
    if not tasks:
        shown = "" if objective is None else f" (objective {objective!r})"
        raise CLIError(
            f"no fitted explainer for this causal LM and layer{shown}: fit one "
            f"with {_fit_command('TASK', objective or LLM_OBJECTIVE)} (TASK a "
            f"prompt task, {', '.join(TASKS)}, or a context task, "
            f"{', '.join(CONTEXT_TASKS)})"
        )
    if len(tasks) > 1:
        raise CLIError(
            f"iba-amortized-lm: explainers fitted on several tasks "
            f"({', '.join(tasks)}) are cached for this causal LM and layer: "
            "choose one with method_options={'iba-amortized-lm': {'task': TASK}}"
        )
    return tasks[0]


class AmortizedLMScorer(IBAAmortizedScorer):
    """amortized IBA on a causal LM: a fitted explainer, one pass per prompt

    An explainer taught by iba-deletion once per model and task (the whole
    answer only), then one forward pass per attribution. The scores are the
    mask of the whole answer over the prompt's scored tokens; there are no
    per-output-token scores.

    Args:
        model: A Hugging Face causal LM.
        layer: The bottlenecked layer (default its token embeddings).
        explainer (AmortizedExplainer or Callable, optional): The fitted
            explainer, or a function of the layer module returning one.
            Default None: the one cached for the model
            (:func:`cached_lm_explainer`, for ``task``).
        task (str, optional): The task whose explainer is taken (a prompt
            or context task). Default None: the one task cached.
        explainer_objective (str, optional): What it must have been trained
            on (None: the task's :func:`default_objective`).
        **kwargs: See :class:`~captum_iba.evaluation.amortized.IBAAmortizedScorer`.
    """

    models = ("causal-lm",)
    needs = ("layer", "explainer_objective")
    signed = False
    word_reduction = "mean"
    explains_spans = False  # its explainer is fitted for the whole answer
    per_token_note = (
        "its explainer is fitted for the whole answer's log-probability, not "
        "for each output token"
    )
    prompt_meaning = (
        "the share of the token's signal the answer needs, as the fitted "
        "explainer predicts it (the mask in [0, 1]; 0: none)"
    )

    def __init__(
        self,
        model: Any,
        layer: LayerLike = "embeddings",
        explainer: Any = None,
        task: Optional[str] = None,
        explainer_objective: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        if explainer is None:
            explainer = _finder(
                model, kwargs.get("tokenizer"), task, explainer_objective
            )
        super().__init__(
            model, layer, explainer, explainer_objective=explainer_objective, **kwargs
        )


def _finder(
    model: Any, tokenizer: Any, task: Optional[str], objective: Optional[str]
) -> Callable[..., AmortizedExplainer]:
    """A function of the layer module giving the explainer cached for it."""

    def find(module: Any, **_: Any) -> AmortizedExplainer:
        ref = resolve_layer(model, module)
        return cached_lm_explainer(model, tokenizer, ref, objective, task)

    return find


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m captum_iba_lab.amortized_lm --model M --task TASK``: fit
    (and cache) the explainer of a causal LM for a prompt or context task."""
    from captum_iba._utils.common import max_positions
    from captum_iba.app.causal_lm import load_causal_lm, load_lm_tokenizer
    from captum_iba.app.llm_tasks import TASKS
    from captum_iba.registry import EXPLAINER_OBJECTIVES

    p = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True, choices=(*TASKS, *CONTEXT_TASKS))
    p.add_argument("--objective", choices=tuple(EXPLAINER_OBJECTIVES))
    p.add_argument("--layer", default="embeddings")
    p.add_argument("--data-dir")
    args = p.parse_args(argv)
    tok = load_lm_tokenizer(args.model)
    model, _ = load_causal_lm(args.model, tok)
    prompts = None
    if args.task in TASKS:  # as a prompt task's run makes them, not cut
        limit = max_positions(model) or 10**9
        prompts = training_prompts(args.task, tok, args.data_dir, limit, cut=False)
    ref = resolve_layer(model, int(args.layer) if args.layer.isdigit() else args.layer)
    found = lm_explainer(
        model, tok, ref, args.task, True, args.objective, args.data_dir,
        prompts=prompts,
    )  # fmt: skip
    print(f"[captum_iba] iba-amortized-lm's explainer: {found.stats}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
