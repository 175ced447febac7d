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
with a release's other settings is not taken for today's); the store
itself (:mod:`captum_iba.attr.amortized_store`) refuses an explainer fitted
for other weights, layer or settings. :func:`explainer_folder`,
:func:`fitted_folders` and :func:`cached_in` serve any fit's settings (the
lab's causal LMs, ``captum_iba_lab.amortized_lm``, cache theirs the same
way).
"""

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

import torch
from filelock import FileLock

from captum_iba._utils.digest import weights_digest
from captum_iba.app.data import load_dataset
from captum_iba.app.errors import CLIError
from captum_iba.app.finetune.store import default_cache_dir
from captum_iba.attr.amortized import AmortizedExplainer
from captum_iba.attr.amortized_store import RECORD
from captum_iba.attr.kinds import kind_of
from captum_iba.attr.text import LayerRef
from captum_iba.evaluation.amortized import fit_amortized, objective_settings
from captum_iba.evaluation.corpus import encode_instances

__all__ = [
    "TRAIN_INSTANCES",
    "cached_explainer",
    "cached_in",
    "explainer_folder",
    "fitted_folders",
    "settings_digest",
    "train_split",
]

#: Training instances an explainer is fitted on (the study's fits on RTE, AG
#: News and SST-2's deletion-taught explainer;
#: docs/studies/amortized_training.rst: faithfulness does not grow measurably
#: past 250-500).
TRAIN_INSTANCES = 500


#: The ``--max-length`` an explainer for ``explain`` is preferably taken with
#: (the corpus commands' default).
DEFAULT_MAX_LENGTH = 128


def explainer_folder(
    model: Any,
    layer: LayerRef,
    corpus: str,
    max_length: Optional[int] = None,
    objective: str = "distil",
    settings: Optional[Mapping[str, Any]] = None,
) -> Path:
    """Where the explainer of ``model`` 's ``layer``, fitted on ``corpus`` 's
    training split cut to ``max_length`` word pieces, is cached: one folder
    per data setting and per fit settings (:func:`settings_digest` of
    ``settings``, by default those of the ``objective`` it is trained on), so
    that an explainer fitted on other data or with other settings is never
    reused. ``max_length`` None gives the pattern of every data setting (a
    ``*`` in its place), for :func:`fitted_folders`."""
    where = "embeddings" if layer.index is None else layer.index
    length = "*" if max_length is None else int(max_length)
    digest = settings_digest(
        objective_settings(objective) if settings is None else settings
    )
    name = f"{corpus}-l{where}-len{length}-s{digest}-{weights_digest(model)}"
    return default_cache_dir() / "explainers" / name


def settings_digest(settings: Mapping[str, Any]) -> str:
    """8 hexadecimal digits of an explainer's fit ``settings`` (a classifier's:
    :func:`~captum_iba.evaluation.amortized.objective_settings` of its
    objective, ``AMORTIZED_SETTINGS`` for the default)."""
    text = json.dumps(dict(settings), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def fitted_folders(
    model: Any,
    layer: LayerRef,
    corpus: str,
    objective: str = "distil",
    settings: Optional[Mapping[str, Any]] = None,
) -> Dict[int, Path]:
    """The cached explainers of ``model`` 's ``layer`` on ``corpus`` trained on
    ``objective`` (or with ``settings``: :func:`explainer_folder`), by the
    ``--max-length`` they were fitted with."""
    pattern = explainer_folder(model, layer, corpus, None, objective, settings)
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


def train_split(corpus: str, data_dir: Optional[str], n: int) -> Any:
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


def training_batches(
    tokenizer: Any, corpus: str, data_dir: Optional[str], max_length: int
) -> List[Dict[str, torch.Tensor]]:
    """Batches of 16 of the corpus's training split (``TRAIN_INSTANCES``
    instances), with their labels and segment ids.

    Raises:
        ~captum_iba.app.errors.CLIError: When the corpus has no training
            split.
    """
    data = train_split(corpus, data_dir, TRAIN_INSTANCES)
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
) -> AmortizedExplainer:
    """The cached explainer of the classifier ``model`` 's ``layer``; fitted
    (and cached) on ``corpus`` 's training split cut to ``max_length`` word
    pieces when ``fit`` and none is cached for that data setting (an
    explainer fitted on other data is not reused). Without ``fit``
    (``explain``): the one fitted with the default ``--max-length``, else the
    longest, named. ``objective`` is what it is trained on
    (``--explainer-objective``:
    :data:`~captum_iba.evaluation.amortized.EXPLAINER_OBJECTIVES`).

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
    if fit:
        folder = explainer_folder(model, layer, corpus, max_length, objective)
    else:
        folder = _for_explain(model, layer, corpus, objective, DEFAULT_MAX_LENGTH)

    def fitted() -> AmortizedExplainer:
        batches = training_batches(tokenizer, corpus, data_dir, max_length)
        return fit_amortized(
            model, layer.module, batches, tokenizer, folder,
            **objective_settings(objective),
        )  # fmt: skip

    return cached_in(
        folder, model, layer, fitted if fit else None,
        none_fitted=_none_fitted(folder, corpus, objective),
    )  # fmt: skip


def cached_in(
    folder: Path,
    model: Any,
    layer: LayerRef,
    fit: Optional[Callable[[], AmortizedExplainer]],
    tokenizer: Any = None,
    none_fitted: str = "",
) -> AmortizedExplainer:
    """The explainer cached in ``folder`` for the forward ``model`` 's kind
    explains at ``layer`` (``tokenizer``: part of its key, when given),
    loaded; when none is and ``fit`` is given, ``fit()`` 's (into
    ``folder``), under a file lock so that the processes of a ``torchrun``
    wait for one fit.

    Raises:
        ~captum_iba.app.errors.CLIError: ``none_fitted`` when none is cached
            and there is no ``fit``; when the cached one is damaged or stale.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        try:
            if (folder / RECORD).is_file() or fit is None:
                forward = kind_of(model).explained(model)
                key = {} if tokenizer is None else {"tokenizer": tokenizer}
                return AmortizedExplainer.load(folder, forward, layer.module, **key)
        except FileNotFoundError:
            raise CLIError(none_fitted) from None
        except ValueError as err:
            raise CLIError(f"{err} Remove the folder to fit it again.") from None
        print(f"[captum_iba] fitting the amortized explainer into {folder}")
        return fit()


def _none_fitted(folder: Path, corpus: str, objective: str) -> str:
    """The message when no explainer is cached in ``folder``: the command
    that fits it (its ``--explainer-objective`` named unless the default)."""
    flag = "" if objective == "distil" else f" --explainer-objective {objective}"
    return (
        f"no fitted explainer for this model and layer in {folder}: run "
        f"`captum-iba evaluate --dataset {corpus} --methods iba-amortized{flag}` "
        "(with the same --model) first"
    )
