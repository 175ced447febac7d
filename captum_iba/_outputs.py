"""Reading class scores out of whatever a forward function returns."""

from typing import Any

from torch import Tensor


def logits_of(output: Any) -> Tensor:
    """The class scores (logits) of a forward's output.

    Accepts a Tensor, an object with a ``.logits`` Tensor (a Hugging Face
    ``ModelOutput``), a dict with ``"logits"``, or a tuple/list whose first
    element is the Tensor.

    Args:
        output (Any): What the forward function returned.

    Returns:
        Tensor: The logits.
    """
    if isinstance(output, Tensor):
        return output
    logits = getattr(output, "logits", None)
    if logits is None and isinstance(output, dict):
        logits = output.get("logits")
    if logits is None and isinstance(output, (tuple, list)) and output:
        logits = output[0]
    if isinstance(logits, Tensor):
        return logits
    raise TypeError(
        "forward_func must return class scores (logits) as a Tensor, an object "
        "with a .logits Tensor, or a tuple whose first element they are; got "
        f"{type(output).__name__}."
    )
