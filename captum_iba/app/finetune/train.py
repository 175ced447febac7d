"""One fine-tuning run: data, model, optimizer and schedule, the loop, the record.

:func:`fine_tune` reads top to bottom as the run itself: the train and
held-out data (:func:`_resolve_data`), the seeded model (:func:`_load_model`),
AdamW (:func:`_optimizer`), the training loop with its linear schedule over a
fixed number of steps (:func:`_train_loop`; a time guard may stop it with an
error, never silently), the held-out accuracy, then the saved model and its
record with the manifest of its files (:func:`_save`).
"""

import json
import math
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch
from tqdm.auto import tqdm

from captum_iba._utils.io import atomic_write_text
from captum_iba.app.data import (
    HELDOUT_SPLIT,
    TextClassificationData,
    load_dataset,
    stratified_subset,
)
from captum_iba.app.finetune.batches import (
    bucketed_batches,
    collate,
    encode,
    evaluate_accuracy,
)
from captum_iba.app.finetune.recipes import (
    FineTuneOptions,
    PathLike,
    base_short_name,
    resolve_base_model,
    resolve_options,
)
from captum_iba.app.finetune.store import RESULT_FILE, file_manifest, model_folder

# Parameters without weight decay (matched by the end of their names).
_NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


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
        steps (int): Optimizer steps taken (the planned number).
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
    model: Any = field(default=None, repr=False, compare=False)
    tokenizer: Any = field(default=None, repr=False, compare=False)


class FineTuneTimeoutError(RuntimeError):
    """A fine-tune ran past its time guard (``max_seconds``); nothing was saved."""


@dataclass
class _Run:
    """What the training loop did."""

    planned: int
    steps: int = 0
    seen: int = 0
    epochs_done: float = 0.0
    seconds: float = 0.0


def planned_steps(n_train: int, options: FineTuneOptions) -> int:
    """The run's number of optimisation steps: ``steps``, else from ``epochs``.

    Args:
        n_train (int): Training examples.
        options (FineTuneOptions): The run's settings.

    Returns:
        int: ``options.steps`` when given, else ``ceil(epochs x steps per
        epoch)`` (at least 1).
    """
    if options.steps is not None:
        return int(options.steps)
    per_epoch = math.ceil(n_train / options.batch_size)
    return max(1, int(math.ceil(per_epoch * options.epochs)))


def _check_guard(run: _Run, elapsed: float, max_seconds: Optional[float], name: str):
    """Raises :class:`FineTuneTimeoutError` once ``elapsed`` passes the guard."""
    if max_seconds is None or elapsed <= max_seconds:
        return
    eta = elapsed / max(run.steps, 1) * (run.planned - run.steps)
    raise FineTuneTimeoutError(
        f"fine-tuning {name!r} passed its time guard of {max_seconds:.0f} s after "
        f"{run.steps} of {run.planned} steps (about {eta / 60:.0f} more minutes "
        "needed); nothing was saved. The recipe is a number of steps, so the "
        "model is the same on any machine: raise the guard (max_seconds= or "
        "$CAPTUM_IBA_FINETUNE_MAX_S), run when the CPU is less busy, or pass a "
        "fine-tuned model (--model)."
    )


@contextmanager
def _torch_threads(num_threads: Optional[int]) -> Iterator[None]:
    """Sets torch's thread count for the block, if given; restores it after."""
    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        if num_threads is not None:
            torch.set_num_threads(old_threads)


def heldout_data(
    name: str, settings: Dict[str, Any], data_dir: Optional[PathLike] = None
) -> TextClassificationData:
    """The held-out split a fine-tune of corpus ``name`` is evaluated on.

    Args:
        name (str): Corpus name.
        settings (Dict[str, Any]): The run's settings (``max_eval_examples``,
            ``seed``).
        data_dir (str or Path, optional): Data folder.

    Raises:
        FileNotFoundError: When the corpus cannot be found (the message names
            the ways to provide it).
    """
    return load_dataset(
        name,
        HELDOUT_SPLIT.get(name, "validation"),
        data_dir=data_dir,
        max_examples=settings["max_eval_examples"],
        seed=settings["seed"],
    )


def _resolve_data(
    dataset: Union[str, TextClassificationData],
    eval_dataset: Optional[TextClassificationData],
    options: FineTuneOptions,
    data_dir: Optional[PathLike],
) -> Tuple[TextClassificationData, TextClassificationData, str]:
    """The train and held-out data and the corpus name (train capped)."""
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
            held = heldout_data(name, options.as_dict(), data_dir)
        train = load_dataset(
            name,
            "train",
            data_dir=data_dir,
            max_examples=options.max_train_examples,
            seed=options.seed,
        )
    cap = options.max_train_examples
    if cap is not None and len(train) > cap:
        train = train.subset(
            stratified_subset(train.labels, cap, options.seed),
            note=f"Stratified seeded subset of {cap} rows.",
        )
    return train, held, name


def _load_model(base: str, label_names: List[str]) -> Tuple[Any, Any]:
    """The tokenizer and a classifier with a fresh head of ``label_names``."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={n: i for i, n in enumerate(label_names)},
    )
    return tokenizer, model


def _optimizer(model: Any, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW, without weight decay on biases and norm weights."""
    params = list(model.named_parameters())
    groups = [
        {
            "params": [p for n, p in params if not n.endswith(_NO_DECAY)],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for n, p in params if n.endswith(_NO_DECAY)],
            "weight_decay": 0.0,
        },
    ]
    return torch.optim.AdamW(groups, lr=lr)


def _lr_schedule(
    optimizer: torch.optim.Optimizer, warmup_ratio: float, planned: int, step: int = 0
) -> Any:
    """Linear warm-up then decay to zero at step ``planned``, from ``step`` on."""
    from transformers import get_linear_schedule_with_warmup

    warmup = int(round(warmup_ratio * planned))
    if step == 0:
        return get_linear_schedule_with_warmup(optimizer, warmup, planned)
    return get_linear_schedule_with_warmup(
        optimizer, min(warmup, planned), planned, last_epoch=step - 1
    )


def _train_step(
    model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, batch: Dict
) -> torch.Tensor:
    """One optimizer step (gradient norm clipped to 1); returns the loss."""
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def _train_loop(
    model: Any,
    optimizer: torch.optim.Optimizer,
    feats: List[Dict[str, Any]],
    pad_id: int,
    rng: random.Random,
    options: FineTuneOptions,
    name: str,
    progress: bool,
    max_seconds: Optional[float] = None,
) -> _Run:
    """Trains ``model`` in place for the planned number of steps."""
    batch_size = options.batch_size
    lengths = [len(f["input_ids"]) for f in feats]
    run = _Run(planned=planned_steps(len(feats), options))
    scheduler = _lr_schedule(optimizer, options.warmup_ratio, run.planned)
    model.train()
    train_start = time.time()
    bar = tqdm(
        total=run.planned, desc=f"fine-tune {name}", unit="step", disable=not progress
    )
    while run.steps < run.planned:
        for idx in bucketed_batches(lengths, batch_size, rng):
            if run.steps >= run.planned:
                break
            batch = collate([feats[i] for i in idx], pad_id)
            run.seen += len(idx)
            loss = _train_step(model, optimizer, scheduler, batch)
            run.steps += 1
            bar.update(1)
            if run.steps % 10 == 0:
                bar.set_postfix(
                    loss=f"{loss.item():.3f}",
                    lr=f"{scheduler.get_last_lr()[0]:.1e}",
                )
            _check_guard(run, time.time() - train_start, max_seconds, name)
    bar.close()
    run.seconds = time.time() - train_start
    run.epochs_done = run.steps / math.ceil(len(feats) / batch_size)
    return run


def _record(
    name: str,
    base: str,
    options: FineTuneOptions,
    train: TextClassificationData,
    held: TextClassificationData,
    accuracy: float,
    run: _Run,
    seconds: float,
) -> Dict[str, Any]:
    """The run's record, saved as ``captum_iba_finetune.json`` (less ``created``)."""
    return {
        "dataset": name,
        "base_model": base,
        "base_model_name": base_short_name(base),
        "settings": options.as_dict(),
        "heldout_split": held.split,
        "heldout_accuracy": accuracy,
        "n_train": len(train),
        "n_eval": len(held),
        "label_names": list(train.label_names),
        "steps": run.steps,
        "planned_steps": run.planned,
        "epochs_done": run.epochs_done,
        "examples_seen": run.seen,
        "train_seconds": round(run.seconds, 1),
        "total_seconds": round(seconds, 1),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "train_notes": train.notes,
        "eval_notes": held.notes,
    }


def _save(out: Path, model: Any, tokenizer: Any, record: Dict[str, Any]) -> None:
    """Saves model and tokenizer into ``out``, then the record, stamped now.

    The record, written last and atomically, lists every file with its size
    and SHA-256, so a damaged or incomplete folder is recognised later.
    """
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    record["created"] = time.strftime("%Y-%m-%d %H:%M:%S")
    record["files"] = file_manifest(out)
    atomic_write_text(out / RESULT_FILE, json.dumps(record, indent=2) + "\n")


def _summary(name: str, run: _Run, held: TextClassificationData, acc: float) -> str:
    """The one line printed at the end of a fine-tune."""
    speed = run.seen / run.seconds if run.seconds > 0 else float("nan")
    return (
        f"[captum_iba] fine-tuned {name}: {run.steps} steps ({run.epochs_done:.2f} "
        f"epochs, {run.seen} examples) in {run.seconds:.0f} s ({speed:.0f} "
        f"examples/s); {held.name}/{held.split} accuracy {100 * acc:.2f} % on "
        f"{len(held)} examples"
    )


def fine_tune(
    dataset: Union[str, TextClassificationData],
    base_model: Optional[PathLike] = None,
    output_dir: Optional[PathLike] = None,
    options: Optional[FineTuneOptions] = None,
    eval_dataset: Optional[TextClassificationData] = None,
    data_dir: Optional[PathLike] = None,
    num_threads: Optional[int] = None,
    progress: bool = True,
    max_seconds: Optional[float] = None,
    **settings: Any,
) -> FineTuneResult:
    """Fine-tunes a sequence classifier on one corpus and saves it.

    Training is a plain PyTorch loop: AdamW (no decay on biases and
    LayerNorm), linear warm-up then linear decay to zero at the last step
    (:func:`transformers.get_linear_schedule_with_warmup`), batches of
    similar-length examples with dynamic padding, seeded with
    ``torch.manual_seed(seed)`` and a ``random.Random(seed)`` batch order.
    The run is a fixed number of optimisation steps, so two runs with the
    same settings give the same weights on any machine, however busy.
    A progress bar shows the steps and the ETA; a summary line (steps,
    examples/s, held-out accuracy) ends the run.

    Args:
        dataset (str or TextClassificationData): Corpus name (see
            :func:`captum_iba.app.data.load_dataset`; its ``train`` split is used
            and its held-out split — SST-2 dev, IMDB test, AG News heldout, RTE
            validation, BBC heldout — is evaluated), or training data given
            directly (then ``eval_dataset`` is required).
        base_model (str or Path, optional): Any ``from_pretrained`` name or
            folder. Defaults to :func:`default_base_model` (MiniLM-L6).
        output_dir (str or Path, optional): Where to save. Defaults to a new
            folder under :func:`default_cache_dir`.
        options (FineTuneOptions, optional): The training settings (steps or
            epochs, learning rate, batch size, lengths, seed, subsets, warm-up,
            weight decay). Default: ``FineTuneOptions()``; a corpus' recipe is
            ``FineTuneOptions.recipe(name)``.
        eval_dataset (TextClassificationData, optional): Held-out data to use
            instead of the corpus' held-out split.
        data_dir (str or Path, optional): Data folder for
            :func:`captum_iba.app.data.load_dataset`.
        num_threads (int, optional): If given, ``torch.set_num_threads`` for
            the run (restored afterwards).
        progress (bool, optional): Show tqdm progress bars and the summary.
        max_seconds (float, optional): A time guard for the training loop:
            past it the run stops with :class:`FineTuneTimeoutError` and
            saves nothing (never a silently shorter run). Not a setting of
            the model.
        **settings (Any): Deprecated: the fields of :class:`FineTuneOptions`
            as separate keywords (captum-iba 0.1); they replace those of
            ``options``, with a :class:`DeprecationWarning`.

    Returns:
        FineTuneResult: Path, held-out accuracy, sizes, seconds, settings and
        the model (in ``eval()`` mode) with its tokenizer.

    Raises:
        FineTuneTimeoutError: When training passes ``max_seconds``.
        ValueError: On settings out of range or a corpus without examples.
        TypeError: For ``options`` that is no :class:`FineTuneOptions`, or an
            unknown keyword.
    """
    start_time = time.time()
    opts = resolve_options(options, settings, "fine_tune")
    base = resolve_base_model(base_model)
    with _torch_threads(num_threads):
        train, held, name = _resolve_data(dataset, eval_dataset, opts, data_dir)
        if len(train) == 0 or len(held) == 0:
            raise ValueError(f"No training or held-out examples for {name!r}.")
        out = (
            Path(output_dir)
            if output_dir is not None
            else model_folder(name, base, opts.as_dict())
        )
        torch.manual_seed(opts.seed)
        rng = random.Random(opts.seed)
        tokenizer, model = _load_model(base, list(train.label_names))
        feats = encode(tokenizer, train, opts.max_length)
        optimizer = _optimizer(model, opts.lr, opts.weight_decay)
        pad_id = tokenizer.pad_token_id or 0
        run = _train_loop(
            model, optimizer, feats, pad_id, rng, opts, name, progress, max_seconds
        )
        model.eval()
        accuracy = evaluate_accuracy(
            model, tokenizer, held, opts.max_length, opts.eval_batch_size, progress
        )
        seconds = time.time() - start_time
        record = _record(name, base, opts, train, held, accuracy, run, seconds)
        _save(out, model, tokenizer, record)
    if progress:
        print(_summary(name, run, held, accuracy), flush=True)
    return FineTuneResult(
        path=out,
        accuracy=accuracy,
        n_train=len(train),
        n_eval=len(held),
        seconds=seconds,
        settings=record["settings"],
        steps=run.steps,
        model=model,
        tokenizer=tokenizer,
    )
