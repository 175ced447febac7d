r"""Eq. (R2) in a decoder's fused attention, without an ``L x L`` mask.

``removal="attention"`` adds :math:`\ln \bar\lambda_t` to every attention
logit towards token :math:`t` (:func:`~captum_iba.attr._sites.with_keep_bias`).
As a mask this is an ``(rows, 1, L, L)`` tensor that needs a gradient, and
PyTorch's scaled-dot-product attention then runs its math kernel, which keeps
every layer's ``L x L`` attention weights for the backward pass: memory
quadratic in the prompt (18 GB for SmolLM2 at 4,096 tokens).

The same weights come from two calls of the fused (flash) kernel with the
causal flag and no bias:

.. math::
    \frac{\sum_t \bar\lambda_t e^{s_{q,t}} v_t}{\sum_t \bar\lambda_t e^{s_{q,t}}}
    = \frac{\operatorname{attn}(q, k, \bar\lambda \odot v)_q}
           {\operatorname{attn}(q, k, \bar\lambda)_q},

since ``attn`` normalises by :math:`\sum_t e^{s_{q,t}}` in both: memory
linear in the prompt, twice the attention's arithmetic. Both values must be
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

from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional

from torch import Tensor
from torch.nn import Module

__all__ = ["fused_attention_modules", "kept_sdpa"]

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
def kept_sdpa(
    modules: List[Module], keep: Callable[[], Optional[Tensor]]
) -> Iterator[None]:
    """Inside, the attention of ``modules`` reads token ``t`` with weight
    ``keep()[:, t]`` (Eq. R2, see the module docstring); nothing changes while
    ``keep()`` is None. The original function is put back on exit.

    Args:
        modules (list of Module): Attention modules (their identity is checked).
        keep (Callable): Returns :math:`\\bar\\lambda` ``(rows, L)`` or None.
    """
    interface = _interface()
    targets = {id(m) for m in modules}
    local = getattr(interface, "_local_mapping", {})
    previous = local.get(SDPA)
    original = interface[SDPA]

    def attention(
        module: Module,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attention_mask: Optional[Tensor],
        **kwargs: Any,
    ) -> Any:
        lam = keep() if id(module) in targets else None
        if lam is None:
            return original(module, query, key, value, attention_mask, **kwargs)
        weight = lam.to(value.dtype)[:, None, :, None]  # (rows, 1, keys, 1)
        num, _ = original(module, query, key, value * weight, attention_mask, **kwargs)
        den, _ = original(
            module, query, key, weight.expand_as(value).contiguous(), attention_mask,
            **kwargs,
        )  # fmt: skip
        return num / den.clamp_min(1e-30), None

    interface[SDPA] = attention
    try:
        yield
    finally:
        if previous is None:
            del interface[SDPA]
        else:
            interface[SDPA] = previous
