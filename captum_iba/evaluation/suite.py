"""Running the degradation comparison on a corpus: models, encoding, methods.

The glue behind ``captum-iba evaluate`` and the experiment scripts: load a
fine-tuned classifier, encode a corpus split, build the compared methods
(:func:`captum_iba.baselines.make_scorers`, plus IBA with one or more noise
priors) and run :func:`captum_iba.baselines.run_degradation_suite`.
"""

from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba.baselines import IBAScorer, make_scorers, run_degradation_suite
from captum_iba.metrics import DegradationResult
from captum_iba.priors import DatasetPrior, NoisePrior
from captum_iba.text import encoder_layers

#: Method names accepted by :func:`evaluate_corpus`.
METHODS = ("random", "IG", "LIME", "LIME-text", "IBA")
#: Noise priors accepted by name (``"dataset"`` is fitted on the training split).
PRIOR_NAMES = ("paper", "reference", "dataset")


def load_classifier(
    path: Union[str, Path], device: Optional[Union[str, torch.device]] = None
) -> Tuple[Any, Any]:
    """A sequence classifier and its tokenizer, from a folder or hub name.

    Args:
        path (str or Path): Anything ``from_pretrained`` accepts.
        device (str or torch.device, optional): Where to put the model.

    Returns:
        (model, tokenizer): The model in ``eval()`` mode.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path))
    if device is not None:
        model = model.to(device)
    return model.eval(), tokenizer


def default_layer_index(model: torch.nn.Module) -> int:
    """The paper's choice scaled to the model's depth: layer 9 of 12 (index 8).

    Args:
        model (torch.nn.Module): A Hugging Face encoder classifier.

    Returns:
        int: ``int(0.75 * n_layers) - 1`` (8 for BERT-base, 3 for MiniLM-L6).
    """
    return max(0, int(0.75 * len(encoder_layers(model))) - 1)


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


def _batches(
    tokenizer: Any, data: Any, max_length: int, batch_size: int
) -> Iterator[Dict[str, Tensor]]:
    for start in range(0, len(data), batch_size):
        stop = start + batch_size
        pairs = None if data.text_pairs is None else data.text_pairs[start:stop]
        enc = encode(tokenizer, data.texts[start:stop], pairs, max_length)
        yield {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def fit_dataset_prior(
    model: torch.nn.Module,
    tokenizer: Any,
    layer: torch.nn.Module,
    data: Any,
    max_length: int = 128,
    batch_size: int = 32,
) -> DatasetPrior:
    """Fit a :class:`DatasetPrior` on the real tokens of a corpus split.

    Args:
        model (torch.nn.Module): The classifier.
        tokenizer (Any): Its tokenizer.
        layer (torch.nn.Module): The bottlenecked layer.
        data (TextClassificationData): Texts to run (e.g. a training subset).
        max_length (int): Truncation length.
        batch_size (int): Texts per forward.

    Returns:
        DatasetPrior: The fitted prior.
    """
    return DatasetPrior.fit(
        model, layer, _batches(tokenizer, data, max_length, batch_size)
    )


def evaluate_corpus(
    model: torch.nn.Module,
    tokenizer: Any,
    data: Any,
    methods: Sequence[str] = ("random", "IG", "LIME", "IBA"),
    setting: str = "fair",
    priors: Sequence[Union[str, NoisePrior]] = ("paper",),
    layer_index: Optional[int] = None,
    prior_data: Any = None,
    max_length: int = 128,
    batch_size: int = 16,
    seed: int = 0,
    iba_options: Optional[Mapping[str, Any]] = None,
    scorer_options: Optional[Mapping[str, Any]] = None,
    show_progress: bool = True,
) -> Dict[str, DegradationResult]:
    """Degradation test of several methods on one corpus split.

    Instances are sorted by length (shortest first) so that batches carry
    little padding; the aggregates do not depend on the order.

    Args:
        model (torch.nn.Module): A fine-tuned classifier in eval mode.
        tokenizer (Any): Its tokenizer.
        data (TextClassificationData): The instances (texts, pairs, labels).
        methods (Sequence[str]): Among :data:`METHODS`.
        setting (str): ``"fair"`` or ``"paper"`` (see :mod:`captum_iba.baselines`).
        priors (Sequence): IBA's priors: names in :data:`PRIOR_NAMES` or
            :class:`NoisePrior` objects; one IBA run per prior, named
            ``"IBA (prior)"`` when there are several.
        layer_index (int, optional): Encoder layer after which the bottleneck
            goes. Default: :func:`default_layer_index`.
        prior_data (TextClassificationData, optional): Texts to fit the
            ``"dataset"`` prior on (e.g. a training subset).
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per attribution call. Default 16.
        seed (int): Seed of random, LIME and IBA. Default 0.
        iba_options (Mapping, optional): More IBA options (beta, steps, ...).
        scorer_options (Mapping, optional): More arguments of
            :func:`~captum_iba.baselines.make_scorers` (``ig_steps``,
            ``lime_samples``, ``lime_max_length``, ...).
        show_progress (bool): tqdm bars. Default True.

    Returns:
        dict[str, DegradationResult]: Method name -> result (with settings).
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"Unknown method(s) {unknown}; choose from {list(METHODS)}.")
    order = sorted(range(len(data)), key=lambda i: len(data.texts[i]))
    data = data.subset(order)
    enc = encode(tokenizer, data.texts, data.text_pairs, max_length)
    layers = encoder_layers(model)
    index = default_layer_index(model) if layer_index is None else layer_index
    if not 0 <= index < len(layers):
        raise ValueError(
            f"layer index {index} out of range: the model has {len(layers)} layers."
        )
    scorers = make_scorers(
        model,
        tokenizer,
        setting=setting,
        methods=[m for m in methods if m != "IBA"],
        seed=seed,
        **dict(scorer_options or {}),
    )
    if "IBA" in methods:
        for prior in priors:
            if prior == "dataset":
                if prior_data is None:
                    raise ValueError("The 'dataset' prior needs prior_data.")
                prior = fit_dataset_prior(
                    model, tokenizer, layers[index], prior_data, max_length
                )
            name = "IBA" if len(priors) == 1 else f"IBA ({_prior_name(prior)})"
            scorers[name] = IBAScorer(
                model,
                layers[index],
                prior=prior,
                seed=seed,
                tokenizer=tokenizer,
                setting=setting,
                name=name,
                **dict(iba_options or {}),
            )
            scorers[name].settings["layer_index"] = index
    return run_degradation_suite(
        model,
        scorers,
        enc["input_ids"],
        torch.tensor(data.labels),
        attention_mask=enc["attention_mask"],
        token_type_ids=enc.get("token_type_ids") if data.text_pairs else None,
        tokenizer=tokenizer,
        setting=setting,
        batch_size=batch_size,
        show_progress=show_progress,
    )


def _prior_name(prior: Union[str, NoisePrior]) -> str:
    return prior if isinstance(prior, str) else prior.name
