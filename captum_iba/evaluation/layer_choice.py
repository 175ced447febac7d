"""Choosing IBA's layer for a model and a task from a small held-in degradation test.

Which layer the bottleneck goes after matters more than any other setting of
IBA (on MiniLM-L6 fine-tuned on SST-2, moving it from layer index 3 to 4 raised
AOPC by .10 and halved the cost). The best layer depends on the model and the
task, so :func:`choose_layer` measures it: it runs IBA after every candidate
layer at once (one bottleneck per layer: an
:class:`~captum_iba.attr.iba.InformationBottleneckAttribution` built with a
list of layers) on a few labelled instances that the explanations will *not*
be evaluated on, runs the fair degradation test on each layer's token scores
and returns the layer with the best mean score. A layer whose scores rank
nothing (IBA after the last layer of a classifier that reads [CLS] alone, or
every instance's scores flat) is marked and chosen only when no candidate
ranks (issue 31).
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from captum_iba._utils.common import special_token_ids
from captum_iba.attr import InformationBottleneckAttribution, encoder_layers
from captum_iba.attr.text import token_attributions
from captum_iba.evaluation.corpus import CorpusLike, encode
from captum_iba.evaluation.presets import get_preset
from captum_iba.metrics import DegradationResult, degradation_test

__all__ = ["LayerChoice", "choose_layer"]

_METRICS = ("aopc", "first_level_drop", "comprehensiveness")


@dataclass
class LayerChoice:
    """The outcome of :func:`choose_layer`.

    Attributes:
        index (int): The chosen index into ``encoder_layers(model)``.
        layer (nn.Module): That layer.
        metric (str): The score the choice maximised.
        scores (dict): Candidate index -> that score.
        results (dict): Candidate index -> its :class:`DegradationResult`.
        no_ranking (dict): Candidate index -> why its scores rank nothing
            (IBA's own finding, or every instance's scores flat); such a
            layer is chosen only when no candidate ranks.
    """

    index: int
    layer: nn.Module
    metric: str
    scores: Dict[int, float] = field(default_factory=dict)
    results: Dict[int, DegradationResult] = field(default_factory=dict, repr=False)
    no_ranking: Dict[int, str] = field(default_factory=dict)


def _token_scores(
    model: nn.Module,
    layers: List[nn.Module],
    enc: Mapping[str, Any],
    labels: torch.Tensor,
    iba_options: Mapping[str, Any],
    batch_size: int,
    special_token_ids: List[int],
) -> Tuple[List[torch.Tensor], List[str]]:
    """Per-token IBA scores ``(N, L)`` for every layer, batch by batch, and
    per layer why it ranks nothing ("" where it ranks)."""
    iba = InformationBottleneckAttribution(
        model, layers, special_token_ids=special_token_ids
    )
    per_layer: List[List[torch.Tensor]] = [[] for _ in layers]
    reasons = [""] * len(layers)
    flat = [0] * len(layers)
    for s in range(0, labels.shape[0], batch_size):
        sl = slice(s, s + batch_size)
        mask = enc["attention_mask"][sl]
        extra = (mask,) + (
            (enc["token_type_ids"][sl],) if "token_type_ids" in enc else ()
        )
        attrs = iba.attribute(
            enc["input_ids"][sl],
            target=labels[sl],
            additional_forward_args=extra,
            token_mask=mask,
            **dict(iba_options),
        )
        for k, attr in enumerate(attrs):
            per_layer[k].append(token_attributions(attr, mask))
            run = iba.last_run[k]
            reasons[k] = reasons[k] or run.get("no_ranking", "")
            flat[k] += len(run.get("flat_instances", ()))
    n = labels.shape[0]
    for k in range(len(layers)):
        if not reasons[k] and flat[k] == n:
            reasons[k] = f"the scores of all {n} instances are flat"
    return [torch.cat(parts) for parts in per_layer], reasons


def choose_layer(
    model: nn.Module,
    tokenizer: Any,
    data: CorpusLike,
    candidates: Optional[Sequence[int]] = None,
    metric: str = "aopc",
    iba_options: Optional[Mapping[str, Any]] = None,
    max_length: int = 128,
    batch_size: int = 16,
) -> LayerChoice:
    """The encoder layer after which IBA explains ``data`` most faithfully.

    Every candidate gets its own bottleneck in one run; each layer's token
    scores go through the fair degradation test (deletion, levels ``k/9``, the
    gold labels) and the layer with the highest ``metric`` wins (ties: the
    lower layer). Use held-in instances (e.g. a part of the training data or
    of a dev split you do not report on) - a few dozen suffice to separate the
    layers clearly.

    Args:
        model (nn.Module): A Hugging Face sequence classifier (eval mode).
        tokenizer (Any): Its tokenizer.
        data (CorpusLike): Labelled instances (``texts``, ``text_pairs``,
            ``labels``), e.g. ``load_dataset("sst2", "train", max_examples=64)``.
        candidates (Sequence[int], optional): Layer indices to compare.
            Default: every encoder layer.
        metric (str): ``"aopc"`` (default), ``"first_level_drop"`` or
            ``"comprehensiveness"``.
        iba_options (Mapping, optional): Options of
            :meth:`InformationBottleneckAttribution.attribute` (e.g. the
            configuration you will use). Default: its defaults, seed 0.
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per IBA call. Default 16.

    Returns:
        LayerChoice: The chosen index and layer, and every candidate's score.

    Raises:
        ValueError: On an unknown metric, an empty ``data`` or candidates out
            of range.

    Examples::

        >>> held_in = load_dataset("sst2", "train", max_examples=64)
        >>> choice = choose_layer(model, tokenizer, held_in)
        >>> iba = InformationBottleneckAttribution(model, choice.layer)
    """
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {_METRICS}; got {metric!r}")
    if len(data) == 0:
        raise ValueError("choose_layer needs at least one labelled instance")
    all_layers = encoder_layers(model)
    indices = list(range(len(all_layers))) if candidates is None else list(candidates)
    bad = [i for i in indices if not 0 <= i < len(all_layers)]
    if bad or not indices:
        raise ValueError(
            f"candidate layer indices {bad or indices} out of range: valid indices "
            f"are 0..{len(all_layers) - 1}"
        )
    enc = encode(tokenizer, data.texts, data.text_pairs, max_length)
    if data.text_pairs is None:
        enc.pop("token_type_ids", None)
    labels = torch.tensor(list(data.labels))
    options = {"seed": 0, **dict(iba_options or {})}
    layers = [all_layers[i] for i in indices]
    special = special_token_ids(tokenizer)  # kept, as the scorers keep them
    scores, reasons = _token_scores(
        model, layers, enc, labels, options, batch_size, special
    )
    test = get_preset("fair").test.with_tokenizer(tokenizer)
    results = {
        i: degradation_test(
            model,
            enc["input_ids"],
            s,
            target=labels,
            attention_mask=enc["attention_mask"],
            token_type_ids=enc.get("token_type_ids"),
            options=test,
        )
        for i, s in zip(indices, scores)
    }
    values = {i: float(getattr(r, metric)) for i, r in results.items()}
    no_ranking = {i: why for i, why in zip(indices, reasons) if why}
    ranked = [i for i in indices if i not in no_ranking] or indices
    best = max(ranked, key=lambda i: (values[i], -i))
    return LayerChoice(best, all_layers[best], metric, values, results, no_ranking)
