"""AT2's package (:mod:`~captum_iba_lab.at2`) on a model: the model
families whose attention it recomputes (:func:`model_type_of`), the model as
its code reads it (:func:`at2_model`: Gemma 3 under transformers 5 through a
view, the model unchanged), texts its recomputed attention cannot follow
refused (:func:`check_window`), and the hooks transformers installs for it
removed afterwards (:func:`model_as_found`).

Gemma 3 (``gemma3_text``, the 270M and 1B text models) is read as the
package's ``gemma3``; its code asks for the rotary embeddings of
transformers 4 (``rotary_emb``, ``rotary_emb_local``), which transformers 5
gives per layer type: the view hands it those two. It recomputes the
attention with a full causal mask, so a text longer than Gemma's sliding
window (512 tokens for the 270M) is refused.
"""

import contextlib
import inspect
from typing import Any, Iterator, Optional

from torch import Tensor

__all__ = [
    "AT2_TYPES",
    "MODEL_TYPES",
    "at2_model",
    "READS_AT2_FEATURES",
    "attention_window",
    "check_window",
    "model_as_found",
    "model_type_of",
]

#: The model families whose attention AT2 recomputes, as transformers names
#: them (``model_type``) -> as the package does.
AT2_TYPES = {
    "llama": "llama",
    "qwen2": "qwen2",
    "phi3": "phi3",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",  # Gemma 3's text-only models (270M, 1B)
}
MODEL_TYPES = tuple(AT2_TYPES)
#: The registered methods whose scores read AT2's features (the response's
#: attention, which its package recomputes with a full causal mask).
READS_AT2_FEATURES = ("at2", "iba-heads")

#: The flag transformers sets on a model whose output-capturing hooks it
#: installed (on the first ``output_hidden_states=True``, which AT2 asks for).
CAPTURE_FLAG = "_output_capturing_hooks_installed"


@contextlib.contextmanager
def model_as_found(model: Any) -> Iterator[None]:
    """Run AT2's code and leave ``model`` as it was: the forward hooks that
    transformers installs for good on the first ``output_hidden_states=True``
    (and its flag saying so) are removed afterwards."""
    before = {
        m: (set(m._forward_hooks), CAPTURE_FLAG in vars(m)) for m in model.modules()
    }
    try:
        yield
    finally:
        for module, (hooks, flagged) in before.items():
            for key in set(module._forward_hooks) - hooks:
                del module._forward_hooks[key]
                module._forward_hooks_with_kwargs.pop(key, None)
                module._forward_hooks_always_called.pop(key, None)
            if not flagged and CAPTURE_FLAG in vars(module):
                delattr(module, CAPTURE_FLAG)


def model_type_of(model: Any) -> str:
    """The model's family as AT2 names it (its attention is recomputed from
    hidden states per family).

    Raises:
        ValueError: For a family AT2 does not know.
    """
    family = str(getattr(model.config, "model_type", ""))
    if family not in AT2_TYPES:
        raise ValueError(
            f"AT2 recomputes the attention of {MODEL_TYPES} models only; this "
            f"model is {family!r}"
        )
    return AT2_TYPES[family]


class _Delegate:
    """An object read as another: what it does not define is the other's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner(*args, **kwargs)


class _Gemma3Body(_Delegate):
    """Gemma 3's decoder as AT2's code reads it (transformers 4): its rotary
    embeddings of full and of sliding attention, without the layer type."""

    def rotary_emb(self, hidden: Tensor, position_ids: Tensor) -> Any:
        return self._inner.rotary_emb(hidden, position_ids, "full_attention")

    def rotary_emb_local(self, hidden: Tensor, position_ids: Tensor) -> Any:
        return self._inner.rotary_emb(hidden, position_ids, "sliding_attention")


def at2_model(model: Any) -> Any:
    """``model`` as AT2's package reads it: Gemma 3 under transformers 5 (a
    rotary embedding per layer type) through a view giving the package the
    two embeddings it asks for (the model itself unchanged); any other model
    as it is."""
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    takes = inspect.signature(rotary.forward).parameters if rotary else {}
    if model_type_of(model) != "gemma3" or "layer_type" not in takes:
        return model
    view = _Delegate(model)
    view.model = _Gemma3Body(model.model)
    return view


def attention_window(config: Any) -> Optional[int]:
    """The sliding window (tokens) past which AT2's features cannot read a
    text: ``config.sliding_window`` where a layer slides
    (``config.layer_types``); None where none does."""
    window = getattr(config, "sliding_window", None)
    sliding = "sliding_attention" in (getattr(config, "layer_types", None) or ())
    return int(window) if sliding and window else None


def check_window(model: Any, tokens: int) -> None:
    """Refuse a text longer than the model's sliding attention window
    (:func:`attention_window`): AT2 recomputes the attention with a full
    causal mask.

    Raises:
        ValueError: For ``tokens`` beyond the window.
    """
    window = attention_window(model.config)
    if window is not None and tokens > window:
        raise ValueError(
            f"the text has {tokens} tokens, more than the model's sliding window "
            f"({window}): AT2's package recomputes the attention with a full "
            "causal mask, which its sliding layers do not have (shorten the context)"
        )
