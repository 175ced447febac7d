"""A corpus split as the harness sees it: its protocol, its fixed scoring
order, and its encoding into token ids.

* :class:`CorpusLike` - what the harness needs of a split (texts, pairs,
  labels), e.g. :class:`captum_iba.app.data.TextClassificationData`;
* :func:`corpus_order` - the one fixed order a corpus is scored in;
* :func:`encode` - texts (and pairs) to padded token-id tensors;
  :func:`encode_instances` - some instances of a split;
  :func:`encoded_batches` - a split, batch by batch;
* :func:`fit_dataset_prior` - IBA's dataset prior fitted on a split.
"""

from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterator,
    List,
    Optional,
    Protocol,
    Sequence,
)

from torch import Tensor, nn

if TYPE_CHECKING:  # pragma: no cover
    from captum_iba.attr.dataset_prior import DatasetPrior

__all__ = [
    "CorpusLike",
    "corpus_order",
    "encode",
    "encode_instances",
    "encoded_batches",
    "fit_dataset_prior",
]


class CorpusLike(Protocol):
    """What the harness needs of a corpus split (e.g.
    :class:`captum_iba.app.data.TextClassificationData`)."""

    texts: List[str]
    text_pairs: Optional[List[str]]
    labels: List[int]

    def __len__(self) -> int: ...

    def subset(self, indices: Sequence[int]) -> "CorpusLike": ...


def encode(
    tokenizer: Any,
    texts: Sequence[str],
    text_pairs: Optional[Sequence[str]] = None,
    max_length: int = 128,
) -> Dict[str, Tensor]:
    """Tokenise (pairs too), padded to the longest, truncated to ``max_length``."""
    args = (list(texts),) if text_pairs is None else (list(texts), list(text_pairs))
    return dict(
        tokenizer(
            *args,
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
    )


def corpus_order(data: CorpusLike) -> List[int]:
    """The fixed order a corpus is scored in: by text length in characters,
    shortest first, ties in corpus order (batches then carry little padding).

    Args:
        data (CorpusLike): The instances.

    Returns:
        list[int]: Indices into ``data``.
    """
    return sorted(range(len(data)), key=lambda i: len(data.texts[i]))


def encode_instances(
    tokenizer: Any, data: CorpusLike, indices: Sequence[int], max_length: int = 128
) -> Dict[str, Tensor]:
    """The instances ``indices`` of ``data``, encoded with :func:`encode`
    (padded to their longest); ``token_type_ids`` only for sentence pairs.

    Args:
        tokenizer (Any): The model's tokenizer.
        data (CorpusLike): The split.
        indices (Sequence[int]): Which instances, in this order.
        max_length (int): Truncation length. Default 128.

    Returns:
        dict[str, Tensor]: ``input_ids``, ``attention_mask`` (and
        ``token_type_ids``).
    """
    texts = [data.texts[i] for i in indices]
    pairs = None if data.text_pairs is None else [data.text_pairs[i] for i in indices]
    enc = encode(tokenizer, texts, pairs, max_length)
    keep = ("input_ids", "attention_mask") + (("token_type_ids",) if pairs else ())
    return {k: v for k, v in enc.items() if k in keep}


def encoded_batches(
    tokenizer: Any, data: CorpusLike, max_length: int, batch_size: int
) -> Iterator[Dict[str, Tensor]]:
    """``input_ids`` and ``attention_mask`` of ``data``, ``batch_size``
    instances at a time, in corpus order."""
    for start in range(0, len(data), batch_size):
        stop = min(start + batch_size, len(data))
        enc = encode_instances(tokenizer, data, range(start, stop), max_length)
        yield {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def fit_dataset_prior(
    model: nn.Module,
    tokenizer: Any,
    layer: nn.Module,
    data: CorpusLike,
    max_length: int = 128,
    batch_size: int = 32,
) -> "DatasetPrior":
    """Fit a :class:`~captum_iba.DatasetPrior` on the real tokens of a corpus split.

    Args:
        model (torch.nn.Module): The classifier.
        tokenizer (Any): Its tokenizer.
        layer (torch.nn.Module): The bottlenecked layer.
        data (CorpusLike): Texts to run (e.g. a training subset).
        max_length (int): Truncation length.
        batch_size (int): Texts per forward.

    Returns:
        DatasetPrior: The fitted prior.
    """
    from captum_iba.attr.dataset_prior import DatasetPrior

    return DatasetPrior.fit(
        model, layer, encoded_batches(tokenizer, data, max_length, batch_size)
    )
