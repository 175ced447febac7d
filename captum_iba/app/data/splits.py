"""Deterministic, class-stratified row selections: subsets and two-way splits."""

import random
from collections import defaultdict
from typing import Dict, List, Sequence, Tuple

DEFAULT_SEED = 0

# Fraction of each AG News / BBC class that goes to the ``train`` split.
HELDOUT_TRAIN_FRACTION = 0.75


def _rows_by_class(labels: Sequence[int]) -> Dict[int, List[int]]:
    by_class: Dict[int, List[int]] = defaultdict(list)
    for i, y in enumerate(labels):
        by_class[y].append(i)
    return by_class


def stratified_subset(
    labels: Sequence[int], n: int, seed: int = DEFAULT_SEED
) -> List[int]:
    """Chooses ``n`` row indices, keeping class proportions, deterministically.

    Each class gets ``round(n * share)`` rows (adjusted so the total is
    exactly ``n``); rows within a class are drawn by a ``random.Random(seed)``
    shuffle. The indices are returned sorted, so the subset keeps the
    original row order.

    Args:
        labels (Sequence[int]): Label of each row.
        n (int): Number of rows wanted; if ``n >= len(labels)`` all rows are
            returned.
        seed (int, optional): Seed of the draw.

    Returns:
        List[int]: Sorted row indices.
    """
    total = len(labels)
    if n >= total:
        return list(range(total))
    if n <= 0:
        return []
    by_class = _rows_by_class(labels)
    classes = sorted(by_class)
    exact = {c: n * len(by_class[c]) / total for c in classes}
    quota = {c: int(exact[c]) for c in classes}
    # Hand out the remaining rows by largest fractional part (ties: class id).
    rest = n - sum(quota.values())
    order = sorted(classes, key=lambda c: (-(exact[c] - quota[c]), c))
    for c in order[:rest]:
        quota[c] += 1
    rng = random.Random(seed)
    chosen: List[int] = []
    for c in classes:
        rows = list(by_class[c])
        rng.shuffle(rows)
        chosen.extend(rows[: quota[c]])
    return sorted(chosen)


def stratified_split(
    labels: Sequence[int],
    train_fraction: float = HELDOUT_TRAIN_FRACTION,
    seed: int = DEFAULT_SEED,
) -> Tuple[List[int], List[int]]:
    """Splits rows into two disjoint parts, per class, deterministically.

    Within each class the rows are shuffled with ``random.Random(seed)`` and
    the first ``round(train_fraction * class size)`` go to the first part.

    Args:
        labels (Sequence[int]): Label of each row.
        train_fraction (float, optional): Share of each class in the first part.
        seed (int, optional): Seed of the shuffle.

    Returns:
        Tuple[List[int], List[int]]: Sorted indices of the two parts.
    """
    by_class = _rows_by_class(labels)
    rng = random.Random(seed)
    first: List[int] = []
    second: List[int] = []
    for c in sorted(by_class):
        rows = list(by_class[c])
        rng.shuffle(rows)
        k = int(round(train_fraction * len(rows)))
        first.extend(rows[:k])
        second.extend(rows[k:])
    return sorted(first), sorted(second)


def train_heldout_split(
    labels: Sequence[int], split: str, split_seed: int
) -> List[int]:
    """Rows of ``split`` (``train`` or ``heldout``) in the fixed AG News / BBC split.

    Args:
        labels (Sequence[int]): Label of each row of the whole corpus.
        split (str): ``"train"``; any other value means the held-out part.
        split_seed (int): Seed of :func:`stratified_split`.

    Returns:
        List[int]: Sorted row indices of that part.
    """
    train_idx, held_idx = stratified_split(labels, HELDOUT_TRAIN_FRACTION, split_seed)
    return train_idx if split == "train" else held_idx


def split_percent() -> str:
    """The train/heldout shares as text, e.g. ``"75/25"``, for provenance notes."""
    pct = int(round(HELDOUT_TRAIN_FRACTION * 100))
    return f"{pct}/{100 - pct}"
