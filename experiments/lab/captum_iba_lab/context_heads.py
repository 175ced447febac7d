"""How the lab teaches ``iba-heads`` (AT2's head weights taught by
one ``iba-deletion`` step, :mod:`captum_iba_lab.at2_taught`) on a
context task's search contexts, and caches them (issue 52;
docs/studies/amortized_llm_contexts.rst, "Reading the response's attention").

:func:`cached_heads` (before the lab, ``captum-iba evaluate --task
context-facts --methods iba-heads``; now ``experiments/teach_at2.py``)
teaches the model's weights on :data:`HEADS_FIT` 's search contexts of the
run's task -
AT2's training examples (``experiments/train_at2.py``'s seed 1000, 3-6
passages), never the report split - when none are cached for the model and
task (under a file lock: a ``torchrun`` 's processes wait for one fit), and
``explain --context ... --method iba-heads`` takes the ones cached. Per
context the store under ``<cache>/at2/taught`` keeps the features and the
teacher's scores as they are done (:func:`collect_taught`, resumable); the
weights go to ``<cache>/at2`` in AT2's format, their file named by the model's
fingerprint, the task, the contexts and the teacher
(:func:`~captum_iba_lab.at2.at2_weights_path`), read back only for a
model of that fingerprint.
"""

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from captum_iba._utils.common import max_positions
from captum_iba._utils.io import cache_root, model_slug

__all__ = [
    "HEADS_FIT",
    "cached_heads",
    "collect_taught",
    "fit_taught_budgets",
    "kept_contexts",
    "taught_store",
]

#: The command line's contexts of ``iba-heads``: ``contexts`` search contexts
#: drawn with ``seed`` (for ``context-facts`` ``passages`` passages each) and
#: ``masks`` random halves of each context's sources in the fit.
HEADS_FIT: Dict[str, Any] = dict(contexts=128, seed=1000, passages=(3, 6), masks=32)


def taught_store(
    root: Path, model_name: str, task: str, seed: int, passages: Sequence[int]
) -> Path:
    """The teaching store of one model, task, seed and passages under
    ``root`` (:func:`collect_taught` 's ``work``)."""
    low, high = passages
    return root / f"{model_slug(model_name)}-{task}-s{seed}-x{low}-{high}"


def collect_taught(model: Any, tok: Any, examples: Sequence[Any], work: Path) -> None:
    """Each example's AT2 features and teacher scores into ``work`` (one file
    a context, by its number; a re-run resumes): its greedy response in the
    layout a context run gives the model, the teacher's ``logit-max`` source
    scores, AT2's features per source, and their CPU-seconds. A context that
    does not fit the model's positions (or a sliding window's, which AT2
    cannot read), or that AT2 reads as other tokens, is kept as skipped."""
    from captum_iba.app.context_tasks import prompt_layout
    from captum_iba.attr.llm_batch import uses_chat
    from captum_iba.evaluation.context_loop import (
        ContextData,
        context_batch,
        method_source_scores,
        too_long,
    )
    from captum_iba_lab.at2_taught import (
        TEACHER_POOLING,
        source_features,
        teacher_scorer,
    )

    chat = uses_chat(tok, None)
    data = ContextData(tuple(examples), prompt_layout(chat))
    scorer = teacher_scorer(model, tok)
    work.mkdir(parents=True, exist_ok=True)
    for i in range(len(data)):
        path = work / f"{i:05d}.npz"
        if path.exists():
            continue
        if too_long(tok, data, i, chat, max_positions(model)) is not None:
            np.savez(path, skipped="too long")
            continue
        began = time.process_time()
        batch = context_batch(model, tok, data, [i], chat)
        made = time.process_time()
        found = method_source_scores(scorer.attribute(batch), batch, [TEACHER_POOLING])
        taught = time.process_time()
        try:
            features = source_features(model, tok, batch, 0, chat)
        except ValueError as err:  # read as other tokens, or past a window
            np.savez(path, skipped=str(err))
            continue
        seconds = [made - began, taught - made, time.process_time() - taught]
        np.savez(
            path, features=features.numpy(), cpu=np.array(seconds),
            teacher=found[TEACHER_POOLING][0].double().numpy(),
        )  # fmt: skip


def kept_contexts(work: Path, pool: int) -> Tuple[List[Any], int]:
    """The contexts kept among ``work`` 's first ``pool`` (those with features
    and teacher scores, in order) and how many of them were skipped."""
    read = [np.load(p) for p in sorted(work.glob("*.npz"))[:pool]]
    kept = [k for k in read if "skipped" not in k]
    return kept, len(read) - len(kept)


def fit_taught_budgets(
    model: Any,
    work: Path,
    pool: int,
    budgets: Sequence[int],
    extras: Dict[str, Any],
    out: Optional[Path],
) -> List[Dict[str, Any]]:
    """Each budget ``n`` of ``budgets`` fitted on the first ``n`` contexts
    kept of ``work`` 's first ``pool`` (:func:`kept_contexts`) and saved into
    ``out`` (named by :func:`~captum_iba_lab.at2.at2_weights_path`
    with ``extras["model_name"]``, ``extras["task"]`` and the teacher;
    ``extras`` kept in the file); a budget above the contexts kept is
    skipped, said.

    Returns:
        list of dict: Per budget fitted, its file and CPU-seconds (the
        contexts' responses, teacher steps and features, then the fit).
    """
    from captum_iba_lab.at2 import at2_weights_path
    from captum_iba_lab.at2_taught import (
        TEACHER,
        feature_extractor,
        fit_taught,
        save_at2_weights,
    )

    kept, skipped = kept_contexts(work, pool)
    print(f"[captum_iba] {len(kept)} contexts kept, {skipped} skipped", flush=True)
    extractor, done = feature_extractor(model), []
    for n in budgets:
        if n > len(kept):
            print(f"[captum_iba] budget {n} skipped: {len(kept)} contexts kept")
            continue
        began = time.process_time()
        estimator = fit_taught(
            [k["features"] for k in kept[:n]], [k["teacher"] for k in kept[:n]],
            extractor, masks=extras["masks"],
        )  # fmt: skip
        fit = time.process_time() - began
        data = np.sum([k["cpu"] for k in kept[:n]], axis=0)
        path = at2_weights_path(
            extras["model_name"], extras["task"], n, 0, out, TEACHER
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        save_at2_weights(
            estimator.cpu(), model, path, dict(extras, n=n, teacher=TEACHER)
        )
        done.append(dict(
            n=n, task=extras["task"], saved=str(path),
            cpu_seconds=round(float(data.sum()) + fit, 1),
            responses=round(float(data[0]), 1), teacher=round(float(data[1]), 1),
            features=round(float(data[2]), 1), fit=round(fit, 1),
        ))  # fmt: skip
        print(json.dumps(done[-1]), flush=True)
    return done


def cached_heads(
    model: Any, tok: Any, task: str, data_dir: Optional[str] = None,
    fit: Optional[Dict[str, Any]] = None,
) -> Path:  # fmt: skip
    """The file of ``iba-heads`` ' weights taught for ``model`` on ``task`` 's
    search contexts (``fit``, default :data:`HEADS_FIT`), taught and cached
    first when there is none.

    Raises:
        ImportError: Without AT2's package (naming the install command).
        ~captum_iba.app.errors.CLIError: When no search context fits the
            model's positions (or AT2 reads every one as other tokens).
    """
    from filelock import FileLock

    from captum_iba.app.errors import CLIError
    from captum_iba_lab.at2 import (
        find_at2_weights,
        import_at2,
        model_fingerprint,
    )
    from captum_iba_lab.at2_taught import TEACHER
    from captum_iba_lab.context_fit import fit_contexts

    import_at2()  # its package named before any work
    fit = HEADS_FIT if fit is None else fit
    folder = cache_root() / "at2"
    name = f"{model_slug(getattr(model, 'name_or_path', '') or 'model')}"
    name += f"-{model_fingerprint(model)}"
    work = taught_store(folder / "taught", name, task, fit["seed"], fit["passages"])
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(work) + ".lock"):
        try:
            return find_at2_weights(model, folder, teacher=TEACHER, task=task)
        except FileNotFoundError:
            pass
        examples = fit_contexts(task, data_dir, fit)
        print(
            f"[captum_iba] teaching iba-heads on {len(examples)} search contexts "
            f"of the {task} task (the model's greedy responses, one iba-deletion "
            f"step each) into {folder}",
            flush=True,
        )
        collect_taught(model, tok, examples, work)
        extras = dict(
            model_name=name, task=task, seed=fit["seed"], masks=fit["masks"],
            sources=list(fit["passages"]),
        )  # fmt: skip
        kept = len(kept_contexts(work, len(examples))[0])
        if not kept:
            raise CLIError(
                f"iba-heads: none of the {len(examples)} search contexts of {task} "
                "could be taught on (too long for the model, or read by AT2 as "
                f"other tokens; see {work})"
            )
        fit_taught_budgets(model, work, len(examples), [kept], extras, folder)
    return find_at2_weights(model, folder, teacher=TEACHER, task=task)
