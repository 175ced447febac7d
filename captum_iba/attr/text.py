"""Helpers for text models: per-token scores, layer sweeps, Hugging Face layers.

Also the one place where a layer *index* becomes a layer *module*
(:func:`resolve_layer`), with the default index and the range check.
"""

from typing import List, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.modules import layer_stack
from captum_iba.attr.bottleneck import NATS_PER_BIT

__all__ = [
    "LayerRef",
    "default_layer_index",
    "paper_layer_index",
    "encoder_layers",
    "layer_ref",
    "layer_ref_of",
    "layer_token_map",
    "resolve_layer",
    "token_attributions",
]


def token_attributions(
    attributions: Tensor,
    token_mask: Optional[Tensor] = None,
    unit: str = "nats",
) -> Tensor:
    """Reduce element-wise attributions (B, L, *features) to one score per token.

    Sums over the feature dimensions, as the paper does for its heatmaps, so a
    token's IBA score is the information (capacity) that passes the bottleneck
    at that token.

    Args:
        attributions (Tensor): Shape (B, L, *features), e.g. the output of
            :meth:`InformationBottleneckAttribution.attribute`.
        token_mask (Tensor, optional): (B, L), 0 at padding; padding scores
            are set to 0.
        unit (str, optional): ``"nats"`` (as computed) or ``"bits"``.
            Default: ``"nats"``.

    Returns:
        Tensor: (B, L) scores.
    """
    if attributions.dim() < 2:
        raise ValueError(
            f"attributions must be (B, L, ...), got shape {tuple(attributions.shape)}"
        )
    if unit not in ("nats", "bits"):
        raise ValueError(f"unit must be 'nats' or 'bits', got {unit!r}")
    scores = attributions.reshape(attributions.shape[:2] + (-1,)).sum(dim=-1)
    if token_mask is not None:
        if tuple(token_mask.shape) != tuple(scores.shape):
            raise ValueError(
                f"token_mask shape {tuple(token_mask.shape)} does not match the "
                f"tokens {tuple(scores.shape)}"
            )
        scores = scores * token_mask.to(scores.dtype)
    return scores / NATS_PER_BIT if unit == "bits" else scores


def layer_token_map(
    attributions: Sequence[Tensor],
    token_mask: Optional[Tensor] = None,
    unit: str = "nats",
) -> Tensor:
    """Stack per-layer attributions into a (B, n_layers, L) map (Figure 3).

    Args:
        attributions (Sequence[Tensor]): One (B, L, *features) tensor per
            layer, e.g. from an ``InformationBottleneckAttribution`` built
            with a list of layers.
        token_mask (Tensor, optional): (B, L), 0 at padding.
        unit (str, optional): ``"nats"`` or ``"bits"``.

    Returns:
        Tensor: (B, n_layers, L) per-token scores.
    """
    if not attributions:
        raise ValueError("attributions is empty")
    return torch.stack(
        [token_attributions(a, token_mask, unit) for a in attributions], dim=1
    )


def encoder_layers(model: Module) -> List[Module]:
    """The transformer blocks of a Hugging Face encoder, bottom to top.

    Finds the longest ``ModuleList`` of the model (``bert.encoder.layer``,
    ``roberta.encoder.layer``, ``distilbert.transformer.layer``, ...).

    Args:
        model (Module): A Hugging Face model (or any module).

    Returns:
        list[Module]: The blocks, so that ``encoder_layers(model)[8]`` is the
        paper's "layer 9" of BERT-base.
    """
    return layer_stack(model)


def paper_layer_index(model: Module) -> int:
    """The paper's choice scaled to the model's depth: layer 9 of 12 (index 8).

    Kept for reproducing the paper (``captum-iba reproduce`` uses it); on
    MiniLM-L6 it is index 3, which the faithfulness study measured as a poor
    choice (docs/faithfulness.rst).

    Args:
        model (Module): A Hugging Face encoder classifier.

    Returns:
        int: ``int(0.75 * n_layers) - 1`` (8 for BERT-base, 3 for MiniLM-L6).
    """
    return max(0, int(0.75 * len(encoder_layers(model))) - 1)


def default_layer_index(model: Module) -> int:
    """The default bottleneck layer: the output of layer ``int(0.75 n)`` (0-based).

    One layer above the paper's scaled choice (:func:`paper_layer_index`): on
    MiniLM-L6 fine-tuned on SST-2, index 4 gave AOPC .45 against .38 at index
    3, at half the cost (issue #12, docs/faithfulness.rst). The best layer
    depends on the model and task: :func:`captum_iba.evaluation.choose_layer`
    measures it.

    Args:
        model (Module): A Hugging Face encoder classifier.

    Returns:
        int: ``min(int(0.75 * n_layers), n_layers - 1)`` (9 for BERT-base, 4
        for MiniLM-L6).
    """
    n = len(encoder_layers(model))
    return max(0, min(int(0.75 * n), n - 1))


class LayerRef(NamedTuple):
    """A layer resolved once: the module and, for an encoder layer, its index.

    The one form in which a layer travels from the entry point (a command
    line's ``--layer``, ``evaluate_corpus(layer=...)``) to the methods that
    use it: ``index`` is the 0-based index among :func:`encoder_layers` (None
    for a layer given as a module), ``module`` the layer. A tuple, so
    ``index, layer = resolve_layer(model)`` works.
    """

    index: Optional[int]
    module: Module

    @property
    def label(self) -> str:
        """``"layer 4"`` (or the module's class name when it has no index)."""
        return (
            type(self.module).__name__ if self.index is None else f"layer {self.index}"
        )


def as_layer_ref(layer: Union["LayerRef", Module]) -> "LayerRef":
    """A :class:`LayerRef` from itself or a bare module (no index)."""
    if isinstance(layer, LayerRef):
        return layer
    if not isinstance(layer, Module):
        raise TypeError(
            f"layer must be a torch.nn.Module or a LayerRef, got {type(layer).__name__}"
        )
    return LayerRef(None, layer)


def layer_ref(model: Module, layer: Union[str, "LayerRef", Module]) -> "LayerRef":
    """A scorer's ``layer`` argument as a :class:`LayerRef`: ``"embeddings"``
    (a registry entry's) through :func:`resolve_layer`, else
    :func:`as_layer_ref`."""
    if isinstance(layer, str):
        return resolve_layer(model, layer)
    return as_layer_ref(layer)


def layer_ref_of(model: Module, module: Module) -> "LayerRef":
    """``module`` with its index in the model's encoder layers (None for a
    module outside them: the embeddings).

    Raises:
        ValueError: When the model holds no layer stack.
    """
    layers = encoder_layers(model)
    index = next((i for i, m in enumerate(layers) if m is module), None)
    return LayerRef(index, module)


def resolve_layer(model: Module, index: Union[None, int, str] = None) -> LayerRef:
    """The encoder layer at ``index`` (default :func:`default_layer_index`),
    or the embeddings' output for ``"embeddings"``.

    Args:
        model (Module): A Hugging Face model (see :func:`encoder_layers`).
        index (int or str, optional): 0-based index into the encoder's layers,
            or ``"embeddings"`` (``model.base_model.embeddings``, index None:
            below every layer, as ``config="deletion"`` uses it).

    Returns:
        LayerRef: ``(index, layer)``: the index used and the layer module.

    Raises:
        ValueError: If ``index`` is out of range; the message gives the range.
    """
    if index == "embeddings":
        embeddings = getattr(getattr(model, "base_model", None), "embeddings", None)
        if not isinstance(embeddings, Module):
            raise ValueError(
                f"layer 'embeddings': {type(model).__name__} has no "
                "base_model.embeddings module."
            )
        return LayerRef(None, embeddings)
    layers = encoder_layers(model)
    chosen = default_layer_index(model) if index is None else index
    if isinstance(chosen, bool) or not isinstance(chosen, int):
        raise ValueError(f"layer index must be an int or 'embeddings', got {chosen!r}")
    if not 0 <= chosen < len(layers):
        raise ValueError(
            f"layer index {chosen} is out of range: the model has {len(layers)} "
            f"encoder layers, valid indices are 0..{len(layers) - 1}"
        )
    return LayerRef(chosen, layers[chosen])
