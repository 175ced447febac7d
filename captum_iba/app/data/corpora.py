"""The corpora the loaders know: names, splits and their aliases, label names."""

from typing import Dict, List, Optional, Tuple

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

#: The corpus of the default model (MiniLM-L6 fine-tuned on it on first use).
DEFAULT_CORPUS = "sst2"

#: The split each corpus is evaluated on after fine-tuning.
HELDOUT_SPLIT: Dict[str, str] = {
    "sst2": "dev",
    "imdb": "test",
    "rte": "validation",
    "ag_news": "heldout",
    "bbc": "heldout",
    "mnli": "validation_matched",
}

LABEL_NAMES: Dict[str, List[str]] = {
    "sst2": ["negative", "positive"],
    "imdb": ["negative", "positive"],
    "rte": ["entailment", "not_entailment"],
    "mnli": ["entailment", "neutral", "contradiction"],
}


#: What each local corpus needs: its files (under the data folder), their
#: format, and where to get them (for the message of a corpus found nowhere).
CORPUS_FILES: Dict[str, Tuple[str, str, str]] = {
    "sst2": (
        "sst2/train.tsv, sst2/dev.tsv",
        "tab-separated, header 'sentence<TAB>label', labels 0 negative, 1 positive",
        "GLUE's SST-2, https://dl.fbaipublicfiles.com/glue/data/SST-2.zip, whose "
        "train.tsv and dev.tsv are in this format",
    ),
    "imdb": (
        "imdb/train.csv.gz, imdb/test.csv.gz",
        "gzip CSV with a header holding the columns text and label (0 negative, "
        "1 positive)",
        "the Large Movie Review Dataset, https://ai.stanford.edu/~amaas/data/"
        "sentiment/, whose one file per review goes into these CSVs",
    ),
    "rte": (
        "rte/train.jsonl, rte/validation.jsonl",
        "JSON lines with sentence1, sentence2 and label (0 entailment, "
        "1 not_entailment)",
        "GLUE's RTE, https://dl.fbaipublicfiles.com/glue/data/RTE.zip, whose TSV "
        "files (labels as words) convert to these",
    ),
    "ag_news": (
        "ag_news/test.csv, ag_news/classes.txt",
        "the original CSV without a header (class 1..4, title, description) and "
        "one class name per line",
        "the ag_news_csv archive of Zhang et al. (2015), as it is",
    ),
}


def canonical_split(name: str, split: str) -> str:
    """The canonical name of a split of a local corpus (``"val"`` -> ``"dev"``).

    Args:
        name (str): A name in :data:`LOCAL_DATASETS`.
        split (str): A split name or one of its aliases, any case.

    Returns:
        str: The canonical split name.

    Raises:
        ValueError: For a split the corpus does not have.
    """
    aliases = _SPLIT_ALIASES[name]
    key = split.lower().strip()
    if key not in aliases:
        valid = sorted(set(aliases.values()))
        raise ValueError(
            f"Unknown split {split!r} for dataset {name!r}; valid splits: {valid} "
            f"(aliases: {sorted(aliases)})."
        )
    return aliases[key]
