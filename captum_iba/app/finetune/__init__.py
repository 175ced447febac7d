"""A small, reproducible fine-tuning recipe for sequence classifiers.

The recipe is a plain PyTorch loop (AdamW, linear warm-up and decay from
:func:`transformers.get_linear_schedule_with_warmup`, dynamic padding,
length-bucketed batches) meant to give the attribution experiments real,
reasonably accurate classifiers on a CPU in minutes. Fine-tuned models are
cached outside the repository, in ``~/.cache/captum_iba/`` (override with the
environment variable ``CAPTUM_IBA_CACHE``), and reused when the settings match
and every file matches the manifest recorded when it was saved. Recipes are
numbers of optimisation steps, so every machine gets the same model.

Typical use::

    from captum_iba.app.finetune import load_finetuned_model
    model, tokenizer = load_finetuned_model("sst2")  # fine-tunes once, then cached

The modules: :mod:`~captum_iba.app.finetune.recipes` (the settings,
:class:`FineTuneOptions`, built from a corpus recipe with
``FineTuneOptions.recipe("sst2", steps=400)``; the recipes; the
base model), :mod:`~captum_iba.app.finetune.train` (:func:`fine_tune`),
:mod:`~captum_iba.app.finetune.batches` (batching, :func:`evaluate_accuracy`),
:mod:`~captum_iba.app.finetune.store` (cache folders and their key) and
:mod:`~captum_iba.app.finetune.cache` (:func:`get_finetuned_model`).
"""

from captum_iba.app.finetune.batches import evaluate_accuracy
from captum_iba.app.finetune.cache import (
    cached_model_dir,
    get_finetuned_model,
    load_finetuned_model,
    read_result,
)
from captum_iba.app.finetune.recipes import (
    BUDGET_ENV_VAR,
    CACHE_ENV_VAR,
    DEFAULT_SETTINGS,
    MAX_SECONDS_ENV_VAR,
    RECIPES,
    REPRODUCE_OVERRIDES,
    STEPS_ENV_VAR,
    FineTuneOptions,
    default_base_model,
    recipe_settings,
    reproduce_overrides,
)
from captum_iba.app.finetune.store import RESULT_FILE as RESULT_FILE  # not in __all__
from captum_iba.app.finetune.store import default_cache_dir
from captum_iba.app.finetune.train import (
    FineTuneResult,
    FineTuneTimeoutError,
    fine_tune,
)

__all__ = [
    "BUDGET_ENV_VAR",
    "CACHE_ENV_VAR",
    "DEFAULT_SETTINGS",
    "MAX_SECONDS_ENV_VAR",
    "RECIPES",
    "REPRODUCE_OVERRIDES",
    "STEPS_ENV_VAR",
    "FineTuneOptions",
    "FineTuneResult",
    "FineTuneTimeoutError",
    "cached_model_dir",
    "default_base_model",
    "default_cache_dir",
    "evaluate_accuracy",
    "fine_tune",
    "get_finetuned_model",
    "load_finetuned_model",
    "read_result",
    "recipe_settings",
    "reproduce_overrides",
]
