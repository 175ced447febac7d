"""Finding the parts of a model: the stack of transformer blocks."""

from typing import List, Optional

from torch.nn import Module, ModuleList

__all__ = ["embeddings_of", "is_causal", "layer_stack"]


def layer_stack(model: Module) -> List[Module]:
    """The longest ``ModuleList`` of ``model``: a transformer's blocks, bottom to top.

    ``bert.encoder.layer``, ``roberta.encoder.layer``,
    ``distilbert.transformer.layer``, ``transformer.h`` (GPT-2), ...

    Args:
        model (Module): A Hugging Face model (or any module).

    Returns:
        list[Module]: The blocks, in the list's order.

    Raises:
        ValueError: When the model holds no non-empty ``ModuleList``.
    """
    best: Optional[ModuleList] = None
    for module in model.modules():
        if isinstance(module, ModuleList) and (best is None or len(module) > len(best)):
            best = module
    if best is None or len(best) == 0:
        raise ValueError(f"No layer list (ModuleList) found in {type(model).__name__}")
    return list(best)


def embeddings_of(model: Module) -> Module:
    """What ``"embeddings"`` means for every method: the model's embedding
    block (``model.base_model.embeddings`` - word, position and segment
    embeddings and their LayerNorm - in BERT-style encoders), else its input
    embeddings (``model.get_input_embeddings()``: ``wte`` of GPT-2,
    ``embed_tokens`` of Llama).

    Args:
        model (Module): A Hugging Face model.

    Returns:
        Module: The module whose output is the token embeddings.

    Raises:
        ValueError: When the model has neither.
    """
    block = getattr(getattr(model, "base_model", None), "embeddings", None)
    if isinstance(block, Module):
        return block
    getter = getattr(model, "get_input_embeddings", None)
    found = getter() if callable(getter) else None
    if isinstance(found, Module):
        return found
    raise ValueError(
        f"layer 'embeddings': {type(model).__name__} has neither "
        "base_model.embeddings nor get_input_embeddings()."
    )


def is_causal(layer: Module) -> bool:
    """Whether ``layer``'s attention is causal (a decoder block: Hugging Face
    marks its attention module ``is_causal = True``), so that a missing
    attention mask stands for the causal mask."""
    return any(getattr(m, "is_causal", False) is True for m in layer.modules())
