"""The command line's amortized explainers: fitted once per model and layer,
on the corpus's training split, and cached.

The explainer sits at the embeddings and is taught by ``iba-deletion`` (the
registry's ``iba-amortized``; at an encoder layer it would be taught by
``iba-faithful``). ``captum-iba evaluate`` / ``attribute --methods
iba-amortized`` call
:func:`cached_explainer` with ``fit=True`` (fit when none is cached, under a
file lock so that the processes of a ``torchrun`` wait for one fit);
``captum-iba explain --method iba-amortized`` with ``fit=False`` (a clear
error when none is cached), on the model's own corpus or the one
``--fit-on`` names. The folder is
``<cache>/explainers/<corpus>-l<embeddings or layer index>-len<max length>-s<settings
digest>-<weights digest>``, one per data setting and per
:data:`~captum_iba.evaluation.amortized.AMORTIZED_SETTINGS` (an explainer fitted
with a release's other settings is not taken for today's; a causal LM's digest
also holds :data:`LLM_ANSWERS`, the answers it was fitted on); the store
itself (:mod:`captum_iba.attr.amortized_store`) refuses an explainer fitted
for other weights, layer or settings.

A causal LM's explainer is fitted the same way on a prompt task's training
prompts (:data:`LLM_TRAIN_PROMPTS`, made as the task's run makes its prompts,
with the model's choice among the task's answer words, :func:`task_batches`,
as the run explains it), on :data:`LLM_OBJECTIVE` unless ``--explainer-objective`` says
otherwise; its folder's ``len0`` says the prompts were not cut.
``captum-iba explain`` takes the one cached for the model and layer, or,
when several tasks' are, the one ``--fit-on TASK`` names
(:func:`cached_lm_explainer`). On a context task (``evaluate --task
context-facts``) it is fitted on the task's search contexts with the model's
greedy responses (:mod:`captum_iba.app.context_fit`), on
:data:`~captum_iba.app.context_fit.CONTEXT_OBJECTIVE` unless
``--explainer-objective`` says otherwise; ``explain --context ... --fit-on
context-facts`` takes it.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import torch
from filelock import FileLock

from captum_iba._utils.digest import weights_digest
from captum_iba.app.context_fit import (
    CONTEXT_FIT,
    CONTEXT_OBJECTIVE,
    context_fit_settings,
    fit_on_contexts,
)
from captum_iba.app.context_tasks import CONTEXT_TASKS
from captum_iba.app.data import load_dataset
from captum_iba.app.errors import CLIError
from captum_iba.app.finetune.store import default_cache_dir
from captum_iba.attr.amortized import AmortizedExplainer
from captum_iba.attr.amortized_store import RECORD
from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER, kind_of
from captum_iba.attr.text import LayerRef
from captum_iba.evaluation.amortized import (
    fit_amortized,
    objective_settings,
    prompt_batches,
)
from captum_iba.evaluation.corpus import encode_instances

__all__ = [
    "LLM_ANSWERS",
    "LLM_OBJECTIVE",
    "LLM_TRAIN_PROMPTS",
    "TRAIN_INSTANCES",
    "cached_explainer",
    "cached_lm_explainer",
    "explainer_folder",
    "lm_objective",
    "task_batches",
    "training_prompts",
]

#: Training instances an explainer is fitted on (the study's fits on RTE, AG
#: News and SST-2's deletion-taught explainer;
#: docs/studies/amortized_training.rst: faithfulness does not grow measurably
#: past 250-500).
TRAIN_INSTANCES = 500


#: Training prompts a causal LM's explainer is fitted on (the copy model's
#: 128, on which the deletion objective ranked the copied token first on 24
#: of 24 held-out prompts: tests/evaluation/test_amortized_llm.py).
LLM_TRAIN_PROMPTS = 128

#: What a causal LM's explainer is trained on when ``--explainer-objective``
#: is not given: iba-deletion's objective (24 of 24 on the copy model, the
#: distilled one 18).
LLM_OBJECTIVE = "deletion"

#: Which answers a causal LM's explainer is fitted on, part of its folder's
#: settings digest: ``"choice"``, the model's choice among the task's answer
#: words (:func:`task_batches`). An explainer fitted on other answers (the
#: greedy first token, which can be empty, before 0.3) is not taken for it.
LLM_ANSWERS = "choice"

#: The ``--max-length`` an explainer for ``explain`` is preferably taken with
#: (the corpus commands' default).
DEFAULT_MAX_LENGTH = 128


def explainer_folder(
    model: Any,
    layer: LayerRef,
    corpus: str,
    max_length: Optional[int] = None,
    objective: str = "distil",
) -> Path:
    """Where the explainer of ``model`` 's ``layer``, fitted on ``corpus`` 's
    training split cut to ``max_length`` word pieces, is cached: one folder
    per data setting and per fit settings (:func:`settings_digest` of the
    ``objective`` it is trained on), so that an explainer fitted on other
    data or with other settings is never reused. ``max_length`` None gives
    the pattern of every data setting (a ``*`` in its place), for
    :func:`fitted_folders`."""
    where = "embeddings" if layer.index is None else layer.index
    length = "*" if max_length is None else int(max_length)
    digest = settings_digest(
        objective, kind_of(model).name, context=corpus in CONTEXT_TASKS
    )
    name = f"{corpus}-l{where}-len{length}-s{digest}-{weights_digest(model)}"
    return default_cache_dir() / "explainers" / name


def settings_digest(
    objective: str = "distil", kind: str = "classifier", context: bool = False
) -> str:
    """8 hexadecimal digits of ``iba-amortized`` 's fit settings for
    ``objective`` (:func:`~captum_iba.evaluation.amortized.objective_settings`:
    ``AMORTIZED_SETTINGS`` for the default, ``"distil"``) on a model of
    ``kind``; a causal LM's with the answers it is fitted on
    (:data:`LLM_ANSWERS`); on a ``context`` task, its settings and data
    (:data:`~captum_iba.app.context_fit.CONTEXT_FIT`, greedy responses)."""
    settings = dict(objective_settings(objective), **_FITTING[kind].digested)
    if context:
        settings = dict(
            context_fit_settings(objective), data=CONTEXT_FIT, answers="greedy"
        )
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def fitted_folders(
    model: Any, layer: LayerRef, corpus: str, objective: str = "distil"
) -> Dict[int, Path]:
    """The cached explainers of ``model`` 's ``layer`` on ``corpus`` trained on
    ``objective``, by the ``--max-length`` they were fitted with."""
    pattern = explainer_folder(model, layer, corpus, objective=objective)
    found: Dict[int, Path] = {}
    for folder in pattern.parent.glob(pattern.name):
        length = folder.name.split("-len", 1)[1].split("-", 1)[0]
        if (folder / RECORD).is_file() and length.isdigit():
            found[int(length)] = folder
    return found


def _for_explain(
    model: Any, layer: LayerRef, corpus: str, objective: str, preferred: int
) -> Path:
    """The explainer ``explain`` uses: the one fitted with the ``preferred``
    ``--max-length`` when there is one, else the longest (named)."""
    found = fitted_folders(model, layer, corpus, objective)
    if not found or preferred in found:
        return explainer_folder(model, layer, corpus, preferred, objective)
    length = max(found)
    print(
        f"[captum_iba] iba-amortized: the explainer fitted with --max-length "
        f"{length} ({found[length]})"
    )
    return found[length]


def _train_split(corpus: str, data_dir: Optional[str], n: int) -> Any:
    """The first ``n`` instances of ``corpus`` 's training split.

    Raises:
        ~captum_iba.app.errors.CLIError: When the corpus has none.
    """
    try:
        return load_dataset(corpus, "train", data_dir=data_dir, max_examples=n)
    except (ValueError, FileNotFoundError) as err:
        raise CLIError(
            f"iba-amortized is fitted on the corpus's training split, and {corpus!r} "
            f"has none here ({err})"
        ) from None


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


def task_batches(
    model: Any, tokenizer: Any, task: str, prompts: Sequence[str]
) -> List[Any]:
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


def training_batches(
    tokenizer: Any, corpus: str, data_dir: Optional[str], max_length: int
) -> List[Dict[str, torch.Tensor]]:
    """Batches of 16 of the corpus's training split (``TRAIN_INSTANCES``
    instances), with their labels and segment ids.

    Raises:
        ~captum_iba.app.errors.CLIError: When the corpus has no training
            split.
    """
    data = _train_split(corpus, data_dir, TRAIN_INSTANCES)
    batches = []
    for start in range(0, len(data), 16):
        rows = range(start, min(start + 16, len(data)))
        enc = encode_instances(tokenizer, data, rows, max_length)
        batch = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        if data.text_pairs is not None and "token_type_ids" in enc:
            batch["token_type_ids"] = enc["token_type_ids"]
        batch["labels"] = torch.tensor([data.labels[i] for i in rows])
        batches.append(batch)
    return batches


def cached_explainer(
    model: Any,
    tokenizer: Any,
    layer: LayerRef,
    corpus: Optional[str],
    fit: bool,
    data_dir: Optional[str] = None,
    max_length: int = 128,
    objective: str = "distil",
    prompts: Optional[Sequence[str]] = None,
) -> AmortizedExplainer:
    """The cached explainer of ``model`` 's ``layer``; fitted (and cached) on
    ``corpus`` 's training split cut to ``max_length`` word pieces when
    ``fit`` and none is cached for that data setting (an explainer fitted on
    other data is not reused). Without ``fit`` (``explain``): the one fitted
    with the default ``--max-length``, else the longest, named. ``objective``
    is what it is trained on (``--explainer-objective``:
    :data:`~captum_iba.evaluation.amortized.EXPLAINER_OBJECTIVES`). A causal
    LM's is fitted on ``prompts`` (the prompt task ``corpus`` 's,
    :func:`training_prompts`; ``max_length`` 0: not cut) with its choice
    among the task's answer words (:func:`task_batches`).

    Raises:
        ~captum_iba.app.errors.CLIError: When none is cached and ``fit`` is
            False, when the model's corpus is unknown, or when the cached one
            is damaged or stale.
    """
    if corpus is None:
        raise CLIError(
            "iba-amortized: the model's training corpus is not known (use the "
            "default model or one fine-tuned by captum-iba)"
        )
    fitting = _FITTING[kind_of(model).name]
    settings = objective_settings(objective)
    if fit:
        folder = explainer_folder(model, layer, corpus, max_length, objective)
    else:
        folder = _for_explain(model, layer, corpus, objective, fitting.length)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        try:
            if (folder / RECORD).is_file() or not fit:
                forward = kind_of(model).explained(model)
                key = fitting.key(tokenizer)
                return AmortizedExplainer.load(folder, forward, layer.module, **key)
        except FileNotFoundError:
            message = _none_fitted(folder, corpus, objective, fitting.kind)
            raise CLIError(message) from None
        except ValueError as err:
            raise CLIError(f"{err} Remove the folder to fit it again.") from None
        print(f"[captum_iba] fitting the amortized explainer into {folder}")
        if corpus in CONTEXT_TASKS:
            return fit_on_contexts(
                model, tokenizer, layer, corpus, folder, data_dir, objective
            )
        batches = fitting.batches(
            model, tokenizer, corpus, objective, prompts, data_dir, max_length
        )
        return fit_amortized(
            model, layer.module, batches, tokenizer, folder, **settings
        )


def default_objective(task: Optional[str]) -> str:
    """What a causal LM's explainer for ``task`` is trained on when
    ``--explainer-objective`` is not given: :data:`~captum_iba.app.
    context_fit.CONTEXT_OBJECTIVE` for a context task, else
    :data:`LLM_OBJECTIVE`."""
    return CONTEXT_OBJECTIVE if task in CONTEXT_TASKS else LLM_OBJECTIVE


def _classifier_batches(
    model: Any,
    tokenizer: Any,
    corpus: str,
    objective: str,
    prompts: Optional[Sequence[str]],
    data_dir: Optional[str],
    max_length: int,
) -> List[Dict[str, Any]]:
    """A classifier's training batches: ``corpus`` 's training split."""
    return training_batches(tokenizer, corpus, data_dir, max_length)


def _prompt_batches(
    model: Any,
    tokenizer: Any,
    corpus: str,
    objective: str,
    prompts: Optional[Sequence[str]],
    data_dir: Optional[str],
    max_length: int,
) -> List[Any]:
    """A causal LM's training batches: the prompt task's ``prompts`` with
    the model's choice among its answer words."""
    print(
        f"[captum_iba] on {len(prompts or ())} training prompts of the "
        f"{corpus} task with the model's choice among its answer words, "
        f"objective {objective!r}"
    )
    return task_batches(model, tokenizer, corpus, list(prompts or ()))


@dataclass(frozen=True)
class _Fitting:
    """What differs between the kinds of model in their cached explainers.

    Attributes:
        kind (str): The kind of model.
        digested (dict): Fit settings the folder's digest adds.
        length (int): The ``--max-length`` an explainer for ``explain`` is
            preferably taken with (a causal LM's prompts: not cut, 0).
        batches (Callable): The training batches of a corpus.
        default_objective (Callable): A corpus's default objective.
        with_tokenizer (bool): Whether the explainer's key holds the
            tokenizer (a causal LM's prompts are laid out by it).
    """

    kind: str
    digested: Mapping[str, Any]
    length: int
    batches: Callable[..., List[Any]]
    default_objective: Callable[[Optional[str]], str]
    with_tokenizer: bool

    def key(self, tokenizer: Any) -> Dict[str, Any]:
        """The keyword arguments of :meth:`AmortizedExplainer.load` beside
        the model and the layer."""
        return {"tokenizer": tokenizer} if self.with_tokenizer else {}


#: The cached explainers' settings per kind of model.
_FITTING = {
    CLASSIFIER.name: _Fitting(
        CLASSIFIER.name, {}, DEFAULT_MAX_LENGTH, _classifier_batches,
        lambda corpus: "distil", False,
    ),
    CAUSAL_LM.name: _Fitting(
        CAUSAL_LM.name, {"answers": LLM_ANSWERS}, 0, _prompt_batches,
        default_objective, True,
    ),
}  # fmt: skip


def _fit_command(corpus: str, objective: str, kind: str) -> str:
    """The command that fits the explainer of ``corpus`` (a corpus, a prompt
    or context task; ``TASK`` for any prompt task) trained on ``objective``
    for a model of ``kind``, quoted: its ``--explainer-objective`` named
    unless it is the default."""
    default = _FITTING[kind].default_objective(corpus)
    flag = "" if objective == default else f" --explainer-objective {objective}"
    option = "--task" if corpus in CONTEXT_TASKS else "--dataset"
    return f"`captum-iba evaluate {option} {corpus} --methods iba-amortized{flag}`"


def _none_fitted(folder: Path, corpus: str, objective: str, kind: str) -> str:
    """The message when no explainer is cached in ``folder``: the command
    that fits it."""
    return (
        f"no fitted explainer for this model and layer in {folder}: run "
        f"{_fit_command(corpus, objective, kind)} (with the same --model) first"
    )


def lm_objective(
    request: Any, objective: Optional[str] = None, task: Optional[str] = None
) -> str:
    """What a causal LM's explainer for ``task`` is trained on:
    :func:`requested_objective`, else :func:`default_objective`."""
    return requested_objective(request, objective) or default_objective(task)


def requested_objective(request: Any, objective: Optional[str] = None) -> Optional[str]:
    """The objective asked for: ``objective`` (the scorer's, when not
    ``"distil"``), else the request's ``--explainer-objective``; None when
    neither is given."""
    return objective or request.values("iba-amortized").get("explainer_objective")


def cached_lm_explainer(
    model: Any,
    tokenizer: Any,
    layer: LayerRef,
    objective: Optional[str],
    chat: bool,
    task: Optional[str] = None,
) -> AmortizedExplainer:
    """``explain`` 's explainer of a causal LM: the one cached for the model,
    ``layer`` and ``objective`` (None: each task's :func:`default_objective`),
    fitted on the prompt ``task`` 's training prompts or the context
    ``task`` 's search contexts (``--fit-on``; None: the one task whose
    explainer is cached, named); never fitted here.

    Raises:
        ~captum_iba.app.errors.CLIError: When none is cached (for ``task``,
            when given; naming the command that fits one), when several
            tasks' are and ``task`` is None (naming them and ``--fit-on``),
            or when the prompt's chat choice is not the task's.
    """
    from captum_iba.app.llm_tasks import TASKS
    from captum_iba.attr.llm_batch import uses_chat

    if task is None:
        task = _the_cached_task(model, layer, objective)
    chosen = objective or default_objective(task)
    context = task in CONTEXT_TASKS
    what = "search contexts" if context else "training prompts"
    if not fitted_folders(model, layer, task, chosen):
        raise CLIError(
            f"iba-amortized: no explainer fitted on the {task} task's {what} is "
            f"cached for this causal LM and layer (objective {chosen!r}; --fit-on "
            f"{task}): fit it with {_fit_command(task, chosen, CAUSAL_LM.name)} "
            "(with the same --model and --layer)"
        )
    fitted_chat = uses_chat(tokenizer, None) if context else TASKS[task].chat
    if fitted_chat != chat:
        want = "--chat" if fitted_chat else "--no-chat"
        raise CLIError(
            f"iba-amortized: its explainer was fitted on the {task} task's "
            f"prompts {'in' if fitted_chat else 'without'} the chat template: "
            f"give {want}"
        )
    print(
        f"[captum_iba] iba-amortized: the explainer fitted on the {task} task's {what}"
    )
    return cached_explainer(model, tokenizer, layer, task, False, objective=chosen)


def _the_cached_task(model: Any, layer: LayerRef, objective: Optional[str]) -> str:
    """The one prompt or context task whose explainer is cached for
    ``model``, ``layer`` and ``objective`` (None: each task's
    :func:`default_objective`; ``explain`` without ``--fit-on``).

    Raises:
        ~captum_iba.app.errors.CLIError: When none is, naming the command
            that fits one; when several are, naming them and ``--fit-on``.
    """
    from captum_iba.app.llm_tasks import TASKS

    every = (*TASKS, *CONTEXT_TASKS)
    tasks = [
        t
        for t in every
        if fitted_folders(model, layer, t, objective or default_objective(t))
    ]
    if not tasks:
        shown = "" if objective is None else f" (objective {objective!r})"
        task_objective = objective or LLM_OBJECTIVE
        raise CLIError(
            f"no fitted explainer for this causal LM and layer{shown}: fit one on "
            f"a prompt task's training prompts with "
            f"{_fit_command('TASK', task_objective, CAUSAL_LM.name)} (TASK one of "
            f"{', '.join(TASKS)}), or on a context task's search contexts with "
            f"`captum-iba evaluate --task TASK --methods iba-amortized` (TASK one "
            f"of {', '.join(CONTEXT_TASKS)}), with the same --model and --layer"
        )
    if len(tasks) > 1:
        root = default_cache_dir() / "explainers"
        raise CLIError(
            f"iba-amortized: explainers fitted on several tasks "
            f"({', '.join(tasks)}) are cached for this causal LM and layer in "
            f"{root}: give --fit-on TASK to choose one (TASK one of "
            f"{', '.join(tasks)})"
        )
    return tasks[0]
