"""Helpers for text models: per-token scores, layer sweeps, Hugging Face layers.

Also the one place where a layer given in any form (an index, ``"embeddings"``,
a module) becomes a :class:`LayerRef` (:func:`resolve_layer`), with the
default index and the range check.
"""

from typing import List, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.modules import embeddings_of, is_causal, layer_stack
from captum_iba.attr.bottleneck import NATS_PER_BIT

__all__ = [
    "LayerLike",
    "LayerRef",
    "default_layer",
    "default_layer_index",
    "paper_layer_index",
    "encoder_layers",
    "is_decoder",
    "layer_token_map",
    "resolve_layer",
    "stack_name",
    "token_attributions",
]


def token_attributions(
    attributions: Tensor,
    token_mask: Optional[Tensor] = None,
    unit: str = "nats",
    reduction: str = "sum",
) -> Tensor:
    """Reduce element-wise attributions (B, L, *features) to one score per token.

    Sums over the feature dimensions by default, as the paper does for its
    heatmaps, so a token's IBA score is the information (capacity) that
    passes the bottleneck at that token. A mask readout (``config="faithful"``
    or ``"deletion"``: the share of each feature's signal kept, in [0, 1])
    reads best as its mean over the features, ``reduction="mean"``: the
    share of the token's signal kept, in [0, 1] (the scorers' unit).

    Args:
        attributions (Tensor): Shape (B, L, *features), e.g. the output of
            :meth:`InformationBottleneckAttribution.attribute`.
        token_mask (Tensor, optional): (B, L), 0 at the positions to leave
            out (padding; also special tokens, when they are not to be
            shown); their scores are set to 0.
        unit (str, optional): ``"nats"`` (as computed) or ``"bits"``, for
            the capacity. Default: ``"nats"``.
        reduction (str, optional): ``"sum"`` (over the features) or
            ``"mean"``. Default: ``"sum"``.

    Returns:
        Tensor: (B, L) scores.
    """
    if attributions.dim() < 2:
        raise ValueError(
            f"attributions must be (B, L, ...), got shape {tuple(attributions.shape)}"
        )
    if unit not in ("nats", "bits"):
        raise ValueError(f"unit must be 'nats' or 'bits', got {unit!r}")
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    flat = attributions.reshape(attributions.shape[:2] + (-1,))
    scores = flat.sum(dim=-1) if reduction == "sum" else flat.mean(dim=-1)
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
    """The default bottleneck layer: the output of layer ``int(0.75 n)`` (0-based),
    never the last one.

    One layer above the paper's scaled choice (:func:`paper_layer_index`): on
    MiniLM-L6 fine-tuned on SST-2, index 4 gave AOPC .45 against .38 at index
    3, at half the cost (issue #12, docs/faithfulness.rst). The best layer
    depends on the model and task: :func:`captum_iba.evaluation.choose_layer`
    measures it. The last layer is left out: a BERT-style classifier reads
    only its first token ([CLS]), so no other token can change the prediction
    there and IBA's scores rank nothing (issue 31).

    Args:
        model (Module): A Hugging Face encoder classifier.

    Returns:
        int: ``min(int(0.75 * n_layers), n_layers - 2)``, at least 0 (9 for
        BERT-base, 4 for MiniLM-L6, 0 for a model of two layers).
    """
    n = len(encoder_layers(model))
    return max(0, min(int(0.75 * n), n - 2))


def is_decoder(model: Module) -> bool:
    """Whether ``model``'s layer stack is causal (a decoder: GPT-2, Llama,
    any ``...ForCausalLM``), whose default layer is its token embeddings.

    At a decoder's upper layers the explained position has already read the
    prompt into its own hidden state, so a bottleneck on the prompt's
    positions there changes the answer only through the attention of the
    layers left: measured on SmolLM2-135M-Instruct, the faithful
    configuration's scores flatten with depth (docs/llm.rst) and the paper's
    are led by the first token (the attention sink) from layer 1 on.
    """
    try:
        stack = encoder_layers(model)
    except ValueError:
        return False
    return is_causal(stack[0])


def stack_name(model: Module) -> str:
    """``"decoder"`` when ``model``'s layer stack is causal
    (:func:`is_decoder`: a causal LM, or a classifier on GPT-2), else
    ``"encoder"``: how messages name its layers."""
    return "decoder" if is_decoder(model) else "encoder"


def default_layer(model: Module) -> "LayerRef":
    """IBA's layer when none is named: by the layer stack's structure, the
    token embeddings of a decoder (:func:`is_decoder`; a causal LM, or a
    classifier on GPT-2), else :func:`default_layer_index` of an encoder."""
    if is_decoder(model):
        return LayerRef(None, embeddings_of(model))
    return resolve_layer(model, default_layer_index(model))


class LayerRef(NamedTuple):
    """A layer resolved once: the module and, for a layer of the model's layer
    stack, its index.

    The one form in which a layer travels from the entry point (a command
    line's ``--layer``, ``evaluate_corpus(layer=...)``) to the methods that
    use it; :func:`resolve_layer` makes it from any form. ``index`` is the
    0-based index among :func:`encoder_layers` (None for a module outside
    them, such as the embeddings), ``module`` the layer. A tuple, so
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


LayerLike = Union[None, int, str, Module, LayerRef]


def resolve_layer(model: Module, layer: LayerLike = None) -> LayerRef:
    """The one way to name a layer: any form of it as a :class:`LayerRef`.

    Args:
        model (Module): A Hugging Face model (see :func:`encoder_layers`).
        layer (int, str, Module or LayerRef, optional): A 0-based index into
            the model's layer stack; ``"embeddings"`` (the token embeddings,
            below every layer: :func:`~captum_iba._utils.modules.embeddings_of`,
            the same module for every method); a module of the model (its
            index is found when it is in the stack); a ``LayerRef`` (as it
            is); None: :func:`default_layer`.

    Returns:
        LayerRef: ``(index, module)``.

    Raises:
        ValueError: If an index is out of range (the message gives the range),
            or the model has no such layer.
        TypeError: For a value of another type.
    """
    if isinstance(layer, LayerRef):
        return layer
    if isinstance(layer, Module):
        try:
            stack = encoder_layers(model)
        except ValueError:  # no layer stack: a module outside any
            stack = []
        return LayerRef(
            next((i for i, m in enumerate(stack) if m is layer), None), layer
        )
    if layer is None:
        return default_layer(model)
    if layer == "embeddings":
        return LayerRef(None, embeddings_of(model))
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise TypeError(
            "layer must be an index, 'embeddings', a module or a LayerRef; got "
            f"{layer!r}"
        )
    layers = encoder_layers(model)
    if not 0 <= layer < len(layers):
        raise ValueError(
            f"layer index {layer} is out of range: the model has {len(layers)} "
            f"{stack_name(model)} layers, valid indices are 0..{len(layers) - 1}"
        )
    return LayerRef(layer, layers[layer])
