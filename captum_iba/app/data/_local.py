"""Readers of the local corpus files (see :mod:`captum_iba.app.data`).

Every reader checks what it reads: a missing column, a row too short, a label
outside the corpus' label set, an empty or non-text field, a damaged gzip
stream, a quote left open or a file with no rows ends in a
:class:`CorpusError` that names the file and the line.
"""

import csv
import gzip
import io
import json
import os
import re
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence, Union

from captum_iba.app.data._bbc import load_bbc
from captum_iba.app.data.corpora import LABEL_NAMES
from captum_iba.app.data.dataset import TextClassificationData
from captum_iba.app.data.splits import split_percent, train_heldout_split

DATA_ENV_VAR = "CAPTUM_IBA_DATA"
_BR_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
#: How the corpus files are read: UTF-8, a byte-order mark at the start dropped
#: (files saved by some Windows editors begin with one).
ENCODING = "utf-8-sig"
#: Folder names of the local corpora under a data folder.
_CORPUS_FOLDERS = ("sst2", "imdb", "rte", "ag_news", "mnli")


class CorpusError(ValueError):
    """A corpus file that cannot be read as it should; the message names the
    file and, where it applies, the line."""

    def __init__(self, path: Path, problem: str, line: Optional[int] = None):
        where = f"{path}, line {line}" if line else str(path)
        super().__init__(f"{where}: {problem}")
        self.path, self.line = path, line


def _repo_root() -> Path:
    # captum_iba/app/data/_local.py -> the folder above the captum_iba package.
    return Path(__file__).resolve().parents[3]


def user_data_dir() -> Path:
    """The user's data folder: ``<cache>/data`` (``~/.cache/captum_iba/data``).

    Returns:
        Path: ``$CAPTUM_IBA_CACHE/data`` if that variable is set, else
        ``~/.cache/captum_iba/data`` (it may not exist).
    """
    cache = os.environ.get("CAPTUM_IBA_CACHE")
    root = Path(cache).expanduser() if cache else Path.home() / ".cache" / "captum_iba"
    return root / "data"


def data_dir_candidates() -> List[Path]:
    """The local data folders looked in, in order (after ``$CAPTUM_IBA_DATA``).

    Returns:
        List[Path]: The repository's ``../shared/data`` where it exists (a
        development checkout; an installed package has none, and its path is
        never shown), then :func:`user_data_dir`.
    """
    shared = _repo_root().parent / "shared" / "data"
    return ([shared] if shared.is_dir() else []) + [user_data_dir()]


def default_data_dir() -> Path:
    """Returns the folder holding the local corpora.

    The folder is, in order of preference: the value of the environment
    variable ``CAPTUM_IBA_DATA``; then the first of
    :func:`data_dir_candidates` that holds a corpus folder (``../shared/data``
    beside the repository, then ``~/.cache/captum_iba/data``). Nothing is
    looked up relative to the current directory.

    Returns:
        Path: The data folder.

    Raises:
        FileNotFoundError: If ``CAPTUM_IBA_DATA`` names a missing folder, or if
            it is unset and no default folder holds a corpus.
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
    candidates = data_dir_candidates()
    for cand in candidates:
        if any((cand / name).is_dir() for name in _CORPUS_FOLDERS):
            return cand.resolve()
    raise FileNotFoundError(
        f"No data folder found: {DATA_ENV_VAR} is not set and no corpus is in "
        f"{' or '.join(str(c) for c in candidates)}."
    )


def _require(path: Path, name: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found for dataset {name!r}: point the data folder at the "
            "folder holding the corpora (--data-dir on the command line, data_dir= "
            f"in Python, or ${DATA_ENV_VAR})"
        )
    return path


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turns decoding and decompression errors into a :class:`CorpusError`."""
    try:
        yield
    except CorpusError:
        raise
    except UnicodeDecodeError as err:
        raise CorpusError(
            path, f"not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise CorpusError(path, f"damaged or truncated gzip file ({err})") from None


def _label(raw: Any, names: Sequence[str], path: Path, line: int, shift: int = 0):
    """``raw`` as a label id in ``0 .. len(names) - 1`` (``raw - shift``)."""
    if isinstance(raw, bool) or raw is None:
        value = None
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"\s*-?\d+\s*", raw):
        value = int(raw)
    else:
        value = None
    if value is None or not 0 <= value - shift < len(names):
        valid = f"{shift}..{len(names) - 1 + shift}"
        raise CorpusError(
            path, f"label {raw!r} is not one of the label ids {valid}", line
        )
    return value - shift


def _text(raw: Any, path: Path, line: int, column: str) -> str:
    """``raw`` as a non-empty text."""
    if not isinstance(raw, str) or not raw.strip():
        raise CorpusError(path, f"{column} is {raw!r}, expected a non-empty text", line)
    return raw


def _csv_problem(err: csv.Error) -> str:
    return f"CSV error: {err} (a quote left open, or the file cut short?)"


def _nonempty(texts: List[str], path: Path) -> None:
    if not texts:
        raise CorpusError(path, "no rows (the file is empty or holds only a header)")


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
    names = LABEL_NAMES["sst2"]
    texts: List[str] = []
    labels: List[int] = []
    with open(path, encoding=ENCODING) as f, _reading(path):
        header = f.readline().rstrip("\n").split("\t")
        if header[:2] != ["sentence", "label"]:
            raise CorpusError(path, "expected the header 'sentence<TAB>label'", 1)
        for number, line in enumerate(f, start=2):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if "\t" not in line:
                raise CorpusError(path, "expected 'sentence<TAB>label'", number)
            sentence, label = line.rsplit("\t", 1)
            texts.append(_text(sentence, path, number, "sentence").strip())
            labels.append(_label(label, names, path, number))
    _nonempty(texts, path)
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
    names = LABEL_NAMES["imdb"]
    texts: List[str] = []
    labels: List[int] = []
    with gzip.open(path, "rt", encoding=ENCODING, newline="") as f, _reading(path):
        reader = csv.DictReader(f, strict=True)
        number = 1
        try:
            if not {"text", "label"} <= set(reader.fieldnames or []):
                raise CorpusError(path, "expected a header with columns label, text", 1)
            number = reader.line_num + 1
            for row in reader:
                if None in row.values() or None in row:
                    raise CorpusError(path, "row with a wrong number of fields", number)
                texts.append(clean_imdb_text(_text(row["text"], path, number, "text")))
                labels.append(_label(row["label"], names, path, number))
                number = reader.line_num + 1
        except csv.Error as err:
            raise CorpusError(path, _csv_problem(err), number) from None
    _nonempty(texts, path)
    notes = "IMDB (Maas et al. 2011) from local CSV; '<br />' tags replaced by spaces."
    return TextClassificationData(
        texts, None, labels, list(LABEL_NAMES["imdb"]), "imdb", split, notes
    )


def _json_rows(path: Path) -> Iterator[Any]:
    """``(line number, object)`` of each non-empty line of a JSON-lines file."""
    with open(path, encoding=ENCODING) as f, _reading(path):
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise CorpusError(path, f"not valid JSON ({err})", number) from None
            if not isinstance(row, dict):
                raise CorpusError(
                    path, f"expected a JSON object, got {type(row).__name__}", number
                )
            yield number, row


def _load_rte(root: Path, split: str) -> TextClassificationData:
    path = _require(root / "rte" / f"{split}.jsonl", "rte")
    names = LABEL_NAMES["rte"]
    texts, pairs, labels = [], [], []
    for number, row in _json_rows(path):
        texts.append(_text(row.get("sentence1"), path, number, "sentence1"))
        pairs.append(_text(row.get("sentence2"), path, number, "sentence2"))
        labels.append(_label(row.get("label"), names, path, number))
    _nonempty(texts, path)
    notes = "RTE (GLUE) from local JSONL; sentence pairs (sentence1, sentence2)."
    if split == "validation":
        notes += " GLUE validation split (test labels are hidden)."
    return TextClassificationData(
        texts, pairs, labels, list(LABEL_NAMES["rte"]), "rte", split, notes
    )


def _load_ag_news_all(root: Path) -> TextClassificationData:
    path = _require(root / "ag_news" / "test.csv", "ag_news")
    classes_path = _require(root / "ag_news" / "classes.txt", "ag_news")
    with _reading(classes_path):
        names = classes_path.read_text(encoding=ENCODING).splitlines()
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise CorpusError(classes_path, "no class names (one per line expected)")
    texts: List[str] = []
    labels: List[int] = []
    with open(path, encoding=ENCODING, newline="") as f, _reading(path):
        reader = csv.reader(f, strict=True)
        first = 1
        try:
            for row in reader:
                number, first = first, reader.line_num + 1
                if not row:
                    continue
                if len(row) < 3:
                    raise CorpusError(
                        path, f"{len(row)} field(s), expected class,title,description",
                        number,
                    )  # fmt: skip
                if any("\n" in cell for cell in row):
                    raise CorpusError(
                        path,
                        f"a quoted field runs from line {number} to line "
                        f"{reader.line_num}: a quote is missing or the file is cut",
                        number,
                    )
                title = _text(row[1], path, number, "title")
                desc = ",".join(row[2:])
                # The original CSV writes line breaks inside fields as a backslash.
                title = title.replace("\\", " ").strip()
                desc = desc.replace("\\", " ").strip()
                texts.append(f"{title}. {desc}")
                labels.append(_label(row[0], names, path, number, shift=1))
        except csv.Error as err:
            raise CorpusError(path, _csv_problem(err), first) from None
    _nonempty(texts, path)
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
        for number, row in _json_rows(path):
            label = row.get("label")
            if isinstance(label, str) and label in names:
                label = names.index(label)
            elif label in (-1, "-1", "-"):
                continue  # GLUE marks pairs without a gold label so
            else:
                label = _label(label, names, path, number)
            first = row.get("premise", row.get("sentence1"))
            second = row.get("hypothesis", row.get("sentence2"))
            texts.append(_text(first, path, number, "premise"))
            pairs.append(_text(second, path, number, "hypothesis"))
            labels.append(label)
    else:
        with open(path, encoding=ENCODING) as f, _reading(path):
            text = f.read()
        reader = csv.DictReader(
            io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE
        )
        for row in reader:
            number = reader.line_num
            gold = row.get("gold_label", row.get("label"))
            if gold not in names:
                continue  # "-": no gold label in GLUE
            first = row.get("sentence1", row.get("premise"))
            second = row.get("sentence2", row.get("hypothesis"))
            texts.append(_text(first, path, number, "sentence1"))
            pairs.append(_text(second, path, number, "sentence2"))
            labels.append(names.index(gold))
    _nonempty(texts, path)
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
