r"""How the deletion mask reaches the attention: ``removal="attention"``.

Every layer above the bottleneck reads token :math:`t` with weight
:math:`\bar\lambda_t` (Eq. R2): :math:`\ln \bar\lambda_t` is added to every
attention logit towards it. :func:`attention_removal` puts this in place for
the duration of a ``with`` block, on whatever attention a layer has:

* bidirectional attention (encoders), and causal attention outside
  transformers' SDPA function (eager attention): a pre-hook adds the bias to
  the 4-D attention mask the layer is called with (:func:`with_keep_bias`; a
  causal layer called without a mask gets the causal mask with it);
* causal attention of a model running transformers' SDPA function: the same
  weights inside the fused kernel (:func:`kept_sdpa`), without an ``L x L``
  mask.

Why a fused route: as a mask, the bias is an ``(rows, 1, L, L)`` tensor
that needs a gradient, and PyTorch's scaled-dot-product attention then runs
its math kernel, which keeps every layer's ``L x L`` attention weights for
the backward pass: memory quadratic in the prompt (18 GB for SmolLM2 at
4,096 tokens).

The same weights come from the fused (flash) kernel with the causal flag
and no bias, numerator and denominator in one call (:math:`\bar\lambda`
appended to the values as :data:`DENOMINATOR_CHANNELS` channels):

.. math::
    \frac{\sum_t \bar\lambda_t e^{s_{q,t}} v_t}{\sum_t \bar\lambda_t e^{s_{q,t}}}
    = \frac{\operatorname{attn}(q, k, \bar\lambda \odot v)_q}
           {\operatorname{attn}(q, k, \bar\lambda)_q},

since ``attn`` normalises by :math:`\sum_t e^{s_{q,t}}` in both: memory
linear in the prompt, the attention's arithmetic on ``d + 8`` channels
(queries and keys padded with zeros, the scale kept) instead of ``d``, where
two calls of ``d`` had taken twice as long. The values must be
contiguous: given the weights broadcast over the head dimension (a view of
stride 0), PyTorch's CPU attention falls back to its math kernel, whose ``L x
L`` weights made the default's peak memory 2.7x one forward + backward at
1,024 tokens on SmolLM2 (1.2x with the copy). :func:`kept_sdpa`
puts this in place of transformers' ``"sdpa"`` attention function for the
attention modules of the layers above the bottleneck (every other module,
and every other model, runs the original function), for the duration of a
``with`` block. Used for causal layers whose model runs SDPA; the others
(encoders, eager attention) keep the mask.
"""

import inspect
from contextlib import contextmanager, nullcontext
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
)

import torch
from torch import Tensor
from torch.nn import Module
from torch.nn.attention import SDPBackend, sdpa_kernel

from captum_iba._utils.hooks import layer_input
from captum_iba._utils.modules import is_causal
from captum_iba.attr import bottleneck as ib

__all__ = [
    "DENOMINATOR_CHANNELS",
    "MASK_PARAMETERS",
    "attention_removal",
    "causal_mask",
    "fused_attention_modules",
    "kept_attention",
    "kept_sdpa",
    "lean_bias_attention",
    "sdpa_for",
    "with_keep_bias",
]

#: Names of a layer's attention-mask parameter, in the order they are tried.
MASK_PARAMETERS = ("attention_mask", "attn_mask", "mask")


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
    (:func:`kept_sdpa`: no ``L x L`` tensor, memory
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
    (:func:`kept_sdpa`) needs no bias and keeps the
    fused kernels."""
    on_cuda = any(p.is_cuda for p in container.parameters())
    return sdpa_kernel([SDPBackend.MATH]) if on_cuda else nullcontext()


# ---------------------------------------------------------------------------
# causal attention in transformers' SDPA function: the same weights in the
# fused kernel, no L x L mask
# ---------------------------------------------------------------------------

#: The attention implementation this route replaces.
SDPA = "sdpa"


def _interface() -> Any:
    """transformers' mapping of attention functions (None before 4.48)."""
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:  # pragma: no cover - older transformers
        return None
    return ALL_ATTENTION_FUNCTIONS if SDPA in ALL_ATTENTION_FUNCTIONS else None


def fused_attention_modules(layer: Module) -> List[Module]:
    """The causal attention modules of ``layer`` whose model runs transformers'
    SDPA function (empty when there is none, or no such function)."""
    if _interface() is None:
        return []
    return [
        m
        for m in layer.modules()
        if getattr(m, "is_causal", False) is True
        and getattr(getattr(m, "config", None), "_attn_implementation", None) == SDPA
    ]


@contextmanager
def sdpa_for(
    modules: Iterable[Module], replacement: Callable[..., Any]
) -> Iterator[None]:
    """Inside, transformers' ``"sdpa"`` attention function, called for one of
    ``modules`` (their identity is checked), runs ``replacement(original,
    module, query, key, value, attention_mask, **kwargs)``; every other call
    runs the original, which is put back on exit."""
    interface = _interface()
    targets = {id(m) for m in modules}
    previous = getattr(interface, "_local_mapping", {}).get(SDPA)
    original = interface[SDPA]

    def attention(module: Module, *args: Any, **kwargs: Any) -> Any:
        if id(module) in targets:
            return replacement(original, module, *args, **kwargs)
        return original(module, *args, **kwargs)

    interface[SDPA] = attention
    try:
        yield
    finally:
        if previous is None:
            del interface[SDPA]
        else:
            interface[SDPA] = previous


#: Channels of :math:`\bar\lambda` appended to the values (one is read),
#: and of zeros to the queries and keys: PyTorch's fused CPU attention is
#: fast when the three have one size (``benchmarks/bench_kept_attention.py``).
DENOMINATOR_CHANNELS = 8


def _zero_padded(t: Tensor, extra: int) -> Tensor:
    """``t`` with ``extra`` channels of zeros after its last dimension."""
    return torch.cat([t, t.new_zeros(*t.shape[:-1], extra)], -1)


def kept_attention(
    attend: Callable[[Tensor, Tensor, Tensor], Tensor],
    query: Tensor,
    key: Tensor,
    value: Tensor,
    weight: Tensor,
) -> Tensor:
    r"""Eq. (R2)'s attention, token ``t`` read with weight ``weight[..., t, :]``,
    from one call of ``attend(query, key, value)`` (an attention without the
    weights, whose scale does not follow the channels, and whose output keeps
    the channels last): numerator and denominator side by side in the values,
    the queries and keys zero-padded to their size.

    Args:
        attend (Callable): The attention, e.g. scaled-dot-product attention.
        query, key, value (Tensor): ``(rows, heads, L, d)``.
        weight (Tensor): :math:`\bar\lambda` as ``(rows, 1, L, 1)``.

    Returns:
        Tensor: ``attend`` 's output of ``d`` channels, weighted.
    """
    size, extra = value.shape[-1], DENOMINATOR_CHANNELS
    both = torch.cat(  # [lambda v, lambda ...]: one call, contiguous
        [value * weight, weight.expand(*value.shape[:-1], extra)], -1
    )
    out = attend(_zero_padded(query, extra), _zero_padded(key, extra), both)
    return out[..., :size] / out[..., size : size + 1].clamp_min(1e-30)


def kept_sdpa(
    modules: List[Module], keep: Callable[[], Optional[Tensor]]
) -> ContextManager[None]:
    """Inside, the attention of ``modules`` reads token ``t`` with weight
    ``keep()[:, t]`` (Eq. R2, see the module docstring); nothing changes while
    ``keep()`` is None. The original function is put back on exit.

    Args:
        modules (list of Module): Attention modules (their identity is checked).
        keep (Callable): Returns :math:`\\bar\\lambda` ``(rows, L)`` or None.
    """

    def kept(
        original: Callable[..., Any], module: Module, query: Tensor, key: Tensor,
        value: Tensor, attention_mask: Optional[Tensor], **kwargs: Any,
    ) -> Any:  # fmt: skip
        lam = keep()
        if lam is None:
            return original(module, query, key, value, attention_mask, **kwargs)
        weight = lam.to(value.dtype)[:, None, :, None]  # (rows, 1, keys, 1)
        if kwargs.get("scaling") is None:  # the padding must not change it
            kwargs["scaling"] = query.shape[-1] ** -0.5

        def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            return original(module, q, k, v, attention_mask, **kwargs)[0]

        return kept_attention(attend, query, key, value, weight), None

    return sdpa_for(modules, kept)


#: Arguments of transformers' attention functions that change the result
#: beyond ``softmax(q k^T s + mask) v``: :func:`lean_bias_attention` leaves
#: a call that sets one of them to the original function.
_NOT_LEAN = ("position_bias", "softcap", "sinks", "s_aux", "head_mask")


def _lean_applies(
    query: Tensor, key: Tensor, mask: Any, dropout: float, extra: Dict[str, Any]
) -> bool:
    """Whether a call computes ``softmax(q k^T s + mask) v`` with a 4-D
    floating mask that needs a gradient (the bias), as many key heads as
    query heads and no dropout."""
    return (
        isinstance(mask, Tensor)
        and mask.requires_grad
        and mask.is_floating_point()
        and mask.dim() == 4
        and not dropout
        and query.shape[1] == key.shape[1]
        and all(extra.get(name) is None for name in _NOT_LEAN)
    )


def lean_bias_attention(layers: List[Module]) -> ContextManager[None]:
    """Inside, the attention modules of ``layers`` that transformers runs with
    its ``"sdpa"`` function compute ``softmax(q k^T s + mask) v`` in explicit
    math when their mask needs a gradient (Eq. R2's bias, see the module
    docstring); every other call, module and model runs the original
    function. Nothing changes where transformers has no such function; the
    original is put back on exit.

    Args:
        layers (list of Module): The layers whose attention reads the bias.
    """
    if _interface() is None:
        return nullcontext()
    return sdpa_for([m for layer in layers for m in layer.modules()], _lean)


def _lean(
    original: Callable[..., Any], module: Module, query: Tensor, key: Tensor,
    value: Tensor, attention_mask: Optional[Tensor], dropout: float = 0.0,
    scaling: Optional[float] = None, **kwargs: Any,
) -> Any:  # fmt: skip
    """``softmax(q k^T s + mask) v`` where :func:`_lean_applies`, else the
    original function."""
    if not _lean_applies(query, key, attention_mask, dropout, kwargs):
        return original(
            module, query, key, value, attention_mask, dropout=dropout,
            scaling=scaling, **kwargs,
        )  # fmt: skip
    assert attention_mask is not None
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query * scale, key.transpose(-1, -2))
    weights = torch.softmax(scores + attention_mask[..., : key.shape[-2]], -1)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None
