"""Where a bottleneck sits: one tensor of a layer's output, or its input.

A layer returning a Tensor has one site; a layer returning a tuple has one
site per tensor of the tuple with the batch as first dimension (Captum's
layer methods return one attribution per layer output tensor); with
``attribute_to_layer_input=True`` the site is the hidden-state tensor the
layer is called with (first positional argument or ``hidden_states=``).
This module reads a site's tensor from a recorded forward pass, turns the
token mask into the site's mask, finds the layer stack holding it and, for
``removal="attention"``, the layers above it and the pre-hooks that change
their attention. How ``T`` takes the site's place is the seam's
(:mod:`captum_iba.attr._seam`).
"""

import inspect
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Module, ModuleList
from torch.nn.attention import SDPBackend, sdpa_kernel

from captum_iba._utils.hooks import (
    LayerRecord,
    find_in_stack,
    layer_input,
    tensor_at,
    tensor_positions,
)
from captum_iba._utils.modules import embeddings_of, is_causal
from captum_iba.attr import bottleneck as ib
from captum_iba.attr._causal import fused_attention_modules, kept_sdpa

__all__ = [
    "MASK_PARAMETERS",
    "Site",
    "attention_removal",
    "causal_mask",
    "fused_attention_modules",
    "is_causal",
    "layers_above",
    "read_site",
    "site_mask",
    "sites_of",
    "stack_above",
    "stack_for",
    "with_keep_bias",
]


@dataclass(frozen=True)
class Site:
    """One bottleneck position.

    Attributes:
        layer (Module): The layer.
        name (str): The layer's name, for messages.
        position (int or None): Index in a tuple output (None: the output
            itself, or its first tensor).
        on_input (bool): The layer's input instead of its output.
    """

    layer: Module
    name: str
    position: Optional[int] = None
    on_input: bool = False


def layer_name(forward_func: Any, layer: Module) -> str:
    """``layer 'bert.encoder.layer.3'`` (or the class name) for messages."""
    if isinstance(forward_func, Module):
        for name, module in forward_func.named_modules():
            if module is layer:
                return f"layer '{name}'"
    return f"layer {type(layer).__name__}"


def sites_of(
    forward_func: Any, layer: Module, record: LayerRecord, on_input: bool
) -> List[Site]:
    """The sites of ``layer`` after checking it ran exactly once."""
    name = layer_name(forward_func, layer)
    if record.calls == 0:
        raise RuntimeError(
            f"{name} was not run by forward_func, so no bottleneck can be "
            "inserted after it."
        )
    if record.calls > len(record.outputs):  # one call per replica under DP
        raise RuntimeError(
            f"{name} ran {record.calls} times in one forward pass (shared or "
            "tied module?); a bottleneck needs a layer that runs once."
        )
    if on_input:
        if any(v is None for v in record.inputs.values()):
            raise TypeError(
                f"attribute_to_layer_input=True: {name} was called without a "
                "hidden-state tensor (first positional argument or hidden_states=)."
            )
        return [Site(layer, name, None, True)]
    template = next(iter(record.outputs.values()))
    rows = tensor_at(template, None, name).shape[0]
    return [Site(layer, name, p) for p in tensor_positions(template, rows)]


def read_site(
    site: Site, record: LayerRecord, device_ids: Optional[List[int]]
) -> Tuple[Tensor, Optional[Tensor], Any]:
    """The site's tensor over the batch, the layer's input (for priors that
    need it) and an output template (for the stack replay)."""
    x, x_in = record.gathered(device_ids, site.position)
    if site.on_input:
        x, x_in = x_in, None
    if not torch.isfinite(x).all():
        raise FloatingPointError(f"{site.name} produced non-finite activations.")
    return x, x_in, next(iter(record.outputs.values()))


def site_mask(token_mask: Optional[Tensor], x: Tensor, explicit: bool) -> Tensor:
    """(B, L) bool mask over the site's token axis (``(B,)`` without one).

    A (B, L, *features) tensor has a token axis; a ``(B, C, H, W)`` one is
    masked along dim 1 only when the mask fits it (given explicitly).
    """
    full = torch.ones(x.shape[:2] if x.dim() >= 3 else x.shape[:1], device=x.device)
    if token_mask is None:
        return full.bool()
    if x.dim() >= 3 and tuple(token_mask.shape) == tuple(x.shape[:2]):
        return token_mask.to(x.device).bool()
    if explicit:
        raise ValueError(
            f"token_mask has shape {tuple(token_mask.shape)} but the layer output "
            f"has shape {tuple(x.shape)}: expected (B, L) = {tuple(x.shape[:2])}."
        )
    return full.bool()  # inferred mask does not fit this layer: ignore it


def stack_for(
    forward_func: Any,
    layer: Module,
    layer_stack: Any,
    device_ids: Optional[List[int]],
) -> Optional[Tuple[Module, int]]:
    """The ``ModuleList``/``Sequential`` holding ``layer`` for the fast path."""
    if layer_stack is False or device_ids is not None:
        return None
    if isinstance(layer_stack, Module):
        found = find_in_stack(layer_stack, layer)
        if found is None:
            raise ValueError("layer_stack does not contain the layer.")
        return found
    if isinstance(forward_func, Module) and not hasattr(forward_func, "device_ids"):
        return find_in_stack(forward_func, layer)
    return None


# ---------------------------------------------------------------------------
# removal="attention": every layer above the bottleneck reads token t with
# weight keep[:, t] (Eq. R2)
# ---------------------------------------------------------------------------

#: Names of a layer's attention-mask parameter, in the order they are tried.
MASK_PARAMETERS = ("attention_mask", "attn_mask", "mask")


def stack_above(forward_func: Any, site: Site) -> Optional[Module]:
    """The model's layer stack when ``site`` is the model's embeddings (as
    :func:`~captum_iba._utils.modules.embeddings_of` finds them: an
    encoder's ``base_model.embeddings``, a decoder's ``embed_tokens`` or
    ``wte``; every layer of the stack lies above them), also when
    ``forward_func`` wraps the model as ``.model``
    (:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`, Captum's LLM
    forward); else None."""
    if site.on_input:
        return None
    model = _model_with_embeddings(forward_func, site.layer)
    if model is None:
        return None
    lists = [m for m in model.modules() if isinstance(m, ModuleList)]
    return max(lists, key=len) if lists else None


def layers_above(
    forward_func: Any, site: Site, stack: Optional[Tuple[Module, int]]
) -> Tuple[Module, List[int]]:
    """The container and indices of the layers above the site, whose
    attention ``removal="attention"`` changes: the rest of the site's stack,
    or every layer of the model's layer stack when the site is the model's
    embeddings (:func:`stack_above`)."""
    if site.on_input:
        raise ValueError(
            "removal='attention' acts on the layers above a layer's output; it "
            "cannot be combined with attribute_to_layer_input=True."
        )
    if stack is not None:
        return stack[0], list(range(stack[1] + 1, len(stack[0])))
    above = stack_above(forward_func, site)
    if above is not None:
        return above, list(range(len(above)))
    raise ValueError(
        f"removal='attention' needs the layers above {site.name}: use a layer of "
        "the model's layer stack (resolve_layer(model, i): e.g. "
        "model.model.layers[i] of Llama, model.transformer.h[i] of GPT-2, "
        "model.bert.encoder.layer[i] of BERT) or its embeddings "
        "(resolve_layer(model, 'embeddings')), with layer_stack=True."
    )


def _model_with_embeddings(forward_func: Any, layer: Module) -> Optional[Module]:
    """``forward_func`` (or the model it wraps as ``.model``) when ``layer``
    is its embeddings; None otherwise."""
    for model in (forward_func, getattr(forward_func, "model", None)):
        if not isinstance(model, Module):
            continue
        try:
            if embeddings_of(model) is layer:
                return model
        except ValueError:
            continue
    return None


def _mask_parameter(layer: Module) -> Tuple[str, int]:
    """The name and position of ``layer``'s attention-mask parameter."""
    params = list(inspect.signature(layer.forward).parameters)
    for name in MASK_PARAMETERS:
        if name in params:
            return name, params.index(name)
    raise ValueError(
        f"removal='attention': {type(layer).__name__}.forward takes none of "
        f"{list(MASK_PARAMETERS)}, so its attention cannot be changed."
    )


def with_keep_bias(
    mask: Optional[Tensor], keep: Tensor, causal_length: Optional[int] = None
) -> Tensor:
    """The layer's 4-D attention mask (None, boolean, or additive) with
    Eq. (R2)'s bias :math:`\\ln \\bar\\lambda_t` added over the key axis.

    Args:
        mask (Tensor, optional): The mask the layer was called with.
        keep (Tensor): :math:`\\bar\\lambda`, ``(B, L)``.
        causal_length (int, optional): For a causal layer, its number of
            tokens: a missing mask then stands for the causal mask (the
            kernel's causal flag, which an added bias would switch off), so
            the result keeps every query from reading a later token.
    """
    bias = ib.attention_keep_bias(keep)
    if mask is None and causal_length is not None:
        mask = causal_mask(causal_length, keep.device)
    if mask is None:
        return bias
    if mask.dim() != 4:
        raise ValueError(
            "removal='attention' adds a bias to 4-D attention masks (B, heads, "
            f"queries, keys); the layer got a mask of shape {tuple(mask.shape)}."
        )
    if mask.dtype == torch.bool:
        return torch.where(mask, 0.0, torch.finfo(bias.dtype).min) + bias
    return mask + bias.to(mask.dtype)


def causal_mask(length: int, device: torch.device) -> Tensor:
    """``(1, 1, L, L)`` boolean: query ``q`` reads keys ``0..q``."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[
        None, None
    ]


@contextmanager
def attention_removal(
    container: Module, indices: List[int], keep: Callable[[], Optional[Tensor]]
) -> Iterator[None]:
    """Every layer ``container[i]`` (the modules there when entered, e.g. the
    stack replay's cut layers) reads token ``t`` with weight ``keep()[:, t]``
    (Eq. R2); nothing while ``keep()`` is None. A causal layer of a model
    running SDPA gets it inside its fused attention
    (:func:`~captum_iba.attr._causal.kept_sdpa`: no ``L x L`` tensor, memory
    linear in the length); any other layer gets a pre-hook adding the bias
    to the attention mask it is called with. Everything is removed on exit."""
    handles = []
    made: List[Any] = [None, None, None]  # (mask given, keep) -> the biased mask

    def biased(mask: Optional[Tensor], value: Tensor, length: Optional[int]) -> Tensor:
        # every layer of one forward gets the same mask and keep: one copy
        if made[0] is not mask or made[1] is not value:
            made[:] = [mask, value, with_keep_bias(mask, value, length)]
        return made[2]

    def hook_for(layer: Module) -> Callable[..., Any]:
        name, position = _mask_parameter(layer)
        causal = is_causal(layer)

        def hook(module: Module, args: Any, kwargs: Any) -> Any:
            value = keep()
            if value is None:
                return None
            hidden = layer_input(args, kwargs)
            length = hidden.shape[1] if causal and hidden is not None else None
            if len(args) > position:
                new = biased(args[position], value, length)
                return args[:position] + (new,) + args[position + 1 :], kwargs
            new = biased(kwargs.get(name), value, length)
            return args, dict(kwargs, **{name: new})

        return hook

    fused = [m for i in indices for m in fused_attention_modules(container[i])]
    try:
        for i in indices:
            layer = container[i]
            if fused_attention_modules(layer):
                continue
            handles.append(
                layer.register_forward_pre_hook(hook_for(layer), with_kwargs=True)
            )
        with (
            kept_sdpa(fused, keep) if fused else nullcontext(),
            _differentiable_bias_kernels(container) if handles else nullcontext(),
        ):
            yield
    finally:
        made.clear()
        for handle in handles:
            handle.remove()


def _differentiable_bias_kernels(container: Module) -> Any:
    """On CUDA, scaled-dot-product attention restricted to the math kernel:
    the memory-efficient one fails in the backward pass with a bias that
    needs a gradient ("LSE is not correctly aligned", torch 2.11, H100), and
    the flash one takes no bias. Elsewhere (CPU) nothing changes. Only when
    some layer gets the bias as a mask: the fused route
    (:func:`~captum_iba.attr._causal.kept_sdpa`) needs no bias and keeps the
    fused kernels."""
    on_cuda = any(p.is_cuda for p in container.parameters())
    return sdpa_kernel([SDPBackend.MATH]) if on_cuda else nullcontext()
