"""Tokenised features, padded batches, length buckets, and the accuracy loop."""

import random
import sys
from typing import Any, Dict, List, Sequence

import torch
from tqdm.auto import tqdm

from captum_iba.app.data import TextClassificationData


def on_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (a tqdm bar's carriage-return frames
    read well there only; a file or a pipe gets plain lines)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def encode(
    tokenizer: Any, data: TextClassificationData, max_length: int
) -> List[Dict[str, List[int]]]:
    """Tokenises ``data`` (truncated, unpadded) into one dict per row, with labels."""
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


def collate(features: Sequence[Dict[str, Any]], pad_id: int) -> Dict[str, torch.Tensor]:
    """Pads ``features`` to their longest row and stacks them as tensors."""
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


def bucketed_batches(
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
        progress (bool, optional): Show a tqdm bar (on a terminal only).

    Returns:
        float: Accuracy in ``[0, 1]`` (``nan`` for an empty split).
    """
    if len(data) == 0:
        return float("nan")
    model.eval()
    feats = encode(tokenizer, data, max_length)
    order = sorted(range(len(feats)), key=lambda i: len(feats[i]["input_ids"]))
    pad_id = tokenizer.pad_token_id or 0
    correct = 0
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if progress and not on_terminal(sys.stderr):  # the bar's label, one line
        print(
            f"[captum_iba] accuracy on {data.name} {data.split}: "
            f"{len(batches)} batch(es)",
            file=sys.stderr,
            flush=True,
        )
    for idx in tqdm(
        batches,
        desc=f"accuracy on {data.name} {data.split}",
        unit="batch",
        disable=not progress or not on_terminal(sys.stderr),  # no frames in a log
    ):
        batch = collate([feats[i] for i in idx], pad_id)
        labels = batch.pop("labels")
        logits = model(**batch).logits
        correct += int((logits.argmax(-1) == labels).sum())
    return correct / len(feats)
