"""Readers of the local corpus files (see :mod:`captum_iba.app.data`)."""

import csv
import gzip
import io
import json
import os
import re
from pathlib import Path
from typing import List, Optional, Union

from captum_iba.app.data._bbc import load_bbc
from captum_iba.app.data.corpora import LABEL_NAMES
from captum_iba.app.data.dataset import TextClassificationData
from captum_iba.app.data.splits import split_percent, train_heldout_split

DATA_ENV_VAR = "CAPTUM_IBA_DATA"
_BR_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)


def _repo_root() -> Path:
    # captum_iba/app/data/_local.py -> the folder above the captum_iba package.
    return Path(__file__).resolve().parents[3]


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


def _require(path: Path, name: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found for dataset {name!r}. Set {DATA_ENV_VAR} or pass "
            "data_dir= to the folder holding the corpora."
        )
    return path


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
        texts, None, labels, list(LABEL_NAMES["sst2"]), "sst2", split, notes
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
        texts, None, labels, list(LABEL_NAMES["imdb"]), "imdb", split, notes
    )


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
        texts, pairs, labels, list(LABEL_NAMES["rte"]), "rte", split, notes
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
    idx = train_heldout_split(full.labels, split, split_seed)
    notes = (
        "AG News (Zhang et al. 2015): only the official test.csv (7,600 rows) is "
        "available offline, so 'train' and 'heldout' are a fixed stratified "
        f"{split_percent()} per-class split of test.csv (seed {split_seed}); "
        "labels 0..3 = classes 1..4; text = title + '. ' + description "
        "(backslashes -> spaces)."
    )
    out = full.subset(idx)
    out.split = split
    out.notes = notes
    return out


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
    names = list(LABEL_NAMES["mnli"])
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


def load_local(
    key: str, canon: str, data_dir: Optional[Union[str, Path]], split_seed: int
) -> TextClassificationData:
    """Loads one split of a local corpus (BBC from its optional package).

    Args:
        key (str): Corpus name, one of :data:`~captum_iba.app.data.LOCAL_DATASETS`.
        canon (str): Canonical split name.
        data_dir (str or Path, optional): Data folder; defaults to
            :func:`default_data_dir` (for MNLI, a missing default folder gives
            MNLI's own offline message).
        split_seed (int): Seed of the AG News / BBC train/heldout split.

    Returns:
        TextClassificationData: The split.
    """
    if key == "bbc":
        return load_bbc(canon, split_seed)
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
