"""One fine-tuning run: data, model, the training loop, the record.

:func:`fine_tune` reads top to bottom as the run itself: the train and
held-out data (:func:`_resolve_data`), the seeded model (:func:`_load_model`),
AdamW and the training loop with its linear schedule over a fixed number of
steps (:mod:`~captum_iba.app.finetune.steps`: :func:`adamw`,
:func:`train_steps`; a time guard may stop it with an error, never silently),
the held-out accuracy, then the saved model and its record with the manifest
of its files (:func:`_save`).
"""

import json
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch

from captum_iba._utils.io import atomic_write_text, writing
from captum_iba.app.data import (
    HELDOUT_SPLIT,
    TextClassificationData,
    load_dataset,
    stratified_subset,
)
from captum_iba.app.finetune.batches import encode, evaluate_accuracy
from captum_iba.app.finetune.recipes import (
    FineTuneOptions,
    PathLike,
    base_short_name,
    resolve_base_model,
    resolve_options,
)
from captum_iba.app.finetune.steps import FineTuneTimeoutError as FineTuneTimeoutError
from captum_iba.app.finetune.steps import TrainingStats, adamw, train_steps
from captum_iba.app.finetune.store import RESULT_FILE, file_manifest, model_folder


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


def _head_note(model: Any, info: Dict[str, Any], base: str, labels: List[str]) -> str:
    """What loading the base model did, in one line: a new head is expected;
    anything else that starts at random, or was dropped, is a warning."""
    prefix = getattr(model, "base_model_prefix", "") + "."
    missing = list(info.get("missing_keys") or [])
    body = [k for k in missing if prefix != "." and k.startswith(prefix)]
    note = (
        f"[captum_iba] A new classification head ({len(labels)} classes: "
        f"{', '.join(labels)}) is put on {base_short_name(base)}; it starts at "
        "random, as expected: the fine-tune trains it."
    )
    odd = body + list(info.get("mismatched_keys") or [])
    if odd:
        note += (
            f" Warning: {len(odd)} weight(s) of the base model were not in its "
            f"checkpoint or did not fit and start at random too, e.g. {odd[0]}."
        )
    return note


def _load_model(
    base: str, label_names: List[str], progress: bool = True
) -> Tuple[Any, Any]:
    """The tokenizer and a classifier with a fresh head of ``label_names``
    (said in one line of our own, instead of transformers' loading report)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from captum_iba.app.models import quiet_transformers

    # transformers' report of the new head reads like an error: it is said
    # in our own words instead (_head_note)
    with quiet_transformers(warnings=False):
        tokenizer = AutoTokenizer.from_pretrained(base)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=len(label_names),
            id2label=dict(enumerate(label_names)),
            label2id={n: i for i, n in enumerate(label_names)},
            output_loading_info=True,
        )
    if progress:
        print(_head_note(model, info, base, label_names), flush=True)
    return tokenizer, model


def _record(
    name: str,
    base: str,
    options: FineTuneOptions,
    train: TextClassificationData,
    held: TextClassificationData,
    accuracy: float,
    run: TrainingStats,
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
    from captum_iba.app.models import quiet_transformers

    with quiet_transformers(), writing(out):  # no bar of transformers' own
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    record["created"] = time.strftime("%Y-%m-%d %H:%M:%S")
    record["files"] = file_manifest(out)
    atomic_write_text(out / RESULT_FILE, json.dumps(record, indent=2) + "\n")


def _summary(
    name: str, run: TrainingStats, held: TextClassificationData, acc: float
) -> str:
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
        tokenizer, model = _load_model(base, list(train.label_names), progress)
        feats = encode(tokenizer, train, opts.max_length)
        optimizer = adamw(model, opts.lr, opts.weight_decay)
        pad_id = tokenizer.pad_token_id or 0
        run = train_steps(
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
