"""Finding the parts of a model: the stack of transformer blocks."""

from typing import List, Optional

from torch.nn import Module, ModuleList

__all__ = ["layer_stack"]


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
