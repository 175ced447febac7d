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
base model), :mod:`~captum_iba.app.finetune.train` (:func:`fine_tune`) and its loop
:mod:`~captum_iba.app.finetune.steps`,
:mod:`~captum_iba.app.finetune.batches` (batching, :func:`evaluate_accuracy`),
:mod:`~captum_iba.app.finetune.store` (cache folders and their key) and
:mod:`~captum_iba.app.finetune.cache` (:func:`get_finetuned_model`).
"""

from captum_iba._utils.lazy import exports, lazy_names

#: The public names, each with its module (imported on first use: reading a
#: fine-tune record does not load the training loop).
_NAMES = exports(
    batches=["evaluate_accuracy"],
    cache=[
        "cached_model_dir",
        "get_finetuned_model",
        "load_finetuned_model",
        "read_result",
    ],
    recipes=[
        "BUDGET_ENV_VAR",
        "CACHE_ENV_VAR",
        "DEFAULT_SETTINGS",
        "MAX_SECONDS_ENV_VAR",
        "RECIPES",
        "REPRODUCE_OVERRIDES",
        "STEPS_ENV_VAR",
        "FineTuneOptions",
        "default_base_model",
        "recipe_settings",
        "reproduce_overrides",
    ],
    store=["RESULT_FILE", "default_cache_dir"],
    steps=["FineTuneTimeoutError"],
    train=["FineTuneResult", "fine_tune"],
)
__all__ = sorted(n for n in _NAMES if n != "RESULT_FILE")
__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())
