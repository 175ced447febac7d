"""Reader of the corpora on the Hugging Face hub (needs the optional ``datasets``)."""

from captum_iba.app.data._local import DATA_ENV_VAR, clean_imdb_text
from captum_iba.app.data.corpora import HUB_DATASETS, canonical_split
from captum_iba.app.data.dataset import TextClassificationData

# Hub split of each canonical split name, per local corpus name.
_HUB_SPLITS = {
    "sst2": {"train": "train", "dev": "validation"},
    "imdb": {"train": "train", "test": "test"},
    "rte": {"train": "train", "validation": "validation"},
    "mnli": {
        "train": "train",
        "validation_matched": "validation_matched",
        "validation_mismatched": "validation_mismatched",
    },
    "ag_news": {"train": "train", "heldout": "test", "test": "test"},
}


def load_from_hub(hub_name: str, split: str) -> TextClassificationData:
    """Loads one split of a corpus from the hub with ``datasets.load_dataset``.

    Args:
        hub_name (str): A name in :data:`~captum_iba.app.data.HUB_DATASETS`.
        split (str): A hub split name, or a local split name or alias.

    Returns:
        TextClassificationData: The split, rows with a negative label dropped.

    Raises:
        ImportError: If ``datasets`` is not installed.
    """
    path, config, local = HUB_DATASETS[hub_name]
    try:
        import datasets
    except ImportError as err:
        raise ImportError(
            f"Loading {hub_name!r} from the Hugging Face hub needs the optional "
            "package `datasets` (pip install datasets) and internet access; "
            f"offline, use the local name {local!r} with {DATA_ENV_VAR}."
        ) from err
    hub_split = _HUB_SPLITS[local]
    key = split.lower().strip()
    if key not in hub_split:
        key = canonical_split(local, split)
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


def datasets_available() -> bool:
    """Whether the optional ``datasets`` package can be imported."""
    try:
        import datasets  # noqa: F401
    except ImportError:
        return False
    return True
