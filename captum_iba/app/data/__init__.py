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

The modules: :mod:`~captum_iba.app.data.load` (:func:`load_dataset`, the entry
point), :mod:`~captum_iba.app.data.corpora` (names, splits, label names),
:mod:`~captum_iba.app.data.dataset` (:class:`TextClassificationData`),
:mod:`~captum_iba.app.data.splits` (stratified subsets and splits), and the
readers ``_local`` (files), ``_bbc`` (BBC News) and ``_hub`` (``datasets``).
"""

from captum_iba._utils.lazy import exports, lazy_names

#: The public names, each with its module (imported on first use).
_NAMES = exports(
    _local=["DATA_ENV_VAR", "clean_imdb_text", "default_data_dir"],
    corpora=["HELDOUT_SPLIT", "HUB_DATASETS", "LOCAL_DATASETS"],
    dataset=["TextClassificationData"],
    load=["load_dataset"],
    splits=["stratified_split", "stratified_subset"],
)
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())
