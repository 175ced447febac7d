"""Loading classifiers with Hugging Face ``from_pretrained``."""

from pathlib import Path
from typing import Any, Optional, Tuple, Union

import torch

__all__ = ["load_classifier"]


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
