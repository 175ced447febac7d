"""Reading and replacing a layer's output: the hooks behind the Captum adapter.

Two ways of putting the bottleneck output ``T`` in place of a layer's output:

* :func:`replaced_by_hook` - Captum's way (as in ``LayerIntegratedGradients``):
  a forward hook that returns the replacement. Works for any module, and with
  ``DataParallel`` (each replica takes its device's chunk), but every step
  re-runs the layers below the bottleneck.
* :func:`replayed_in_stack` - when the layer is element ``i`` of a
  ``ModuleList``/``Sequential`` that the model runs in order (a Hugging Face
  encoder's ``layer`` list), elements ``0..i`` are swapped for stubs that
  return ``T`` at once, so a step costs only the layers above the bottleneck.
  The caller checks once per batch that this reproduces the model's output.

Both restore the model in ``finally`` blocks: no hook and no stub is left
behind, even when the forward raises. :func:`evaluation_mode` switches dropout
off and puts every ``training`` flag back; :func:`scatter_for` picks a
``DataParallel`` replica's rows of a replacement.
"""

import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.nn import Module, ModuleList, Sequential

from captum_iba._utils.captum_compat import _sort_key_list


def first_tensor(output: Any, layer_name: str = "layer") -> Tensor:
    """The tensor the bottleneck acts on: the output itself, or its first element.

    Hugging Face layers return a Tensor (transformers 5.x) or a tuple whose
    first element is the hidden states, possibly followed by ``None`` s (4.x).

    Args:
        output (Any): What the layer returned.
        layer_name (str): Used in the error message.

    Returns:
        Tensor: The hidden states.
    """
    if isinstance(output, Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        return output[0]
    raise TypeError(
        f"{layer_name} returned {type(output).__name__}; the bottleneck needs a "
        "Tensor or a tuple/list whose first element is a Tensor."
    )


def tensor_positions(output: Any, batch: Optional[int] = None) -> List[Optional[int]]:
    """Where a layer's output holds tensors a bottleneck can act on.

    Args:
        output (Any): What the layer returned.
        batch (int, optional): Keep only tensors with this many rows.

    Returns:
        list: ``[None]`` for a Tensor output; the indices of the Tensor
        elements (with the batch as first dimension) of a tuple/list.
    """
    if isinstance(output, Tensor) or not isinstance(output, (tuple, list)):
        return [None]
    found = [
        i
        for i, item in enumerate(output)
        if isinstance(item, Tensor)
        and item.dim() > 0
        and (batch is None or item.shape[0] == batch)
    ]
    return found or [None]


def tensor_at(
    output: Any, position: Optional[int], layer_name: str = "layer"
) -> Tensor:
    """The tensor at ``position`` of a tuple output (None: the first tensor)."""
    if position is None:
        return first_tensor(output, layer_name)
    return output[position]


def replace_at(output: Any, position: Optional[int], value: Tensor) -> Any:
    """``output`` with its tensor at ``position`` (None: the first) replaced by
    ``value``.

    Other tensors of a tuple output whose batch size differs from ``value`` 's
    by a whole factor (the noise copies) are repeated to match.
    """
    if isinstance(output, Tensor):
        return value.to(output.dtype)
    position = 0 if position is None else position
    target = output[position]
    rows = value.shape[0]
    items = []
    for i, item in enumerate(output):
        if i == position:
            item = value.to(target.dtype)
        elif (
            isinstance(item, Tensor)
            and item.dim() > 0
            and item.shape[0] == target.shape[0]
            and rows != target.shape[0]
        ):
            item = item.repeat_interleave(rows // target.shape[0], dim=0)
        items.append(item)
    return type(output)(items)


def layer_input(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Tensor]:
    """The hidden states a layer was called with (first positional argument, or
    the ``hidden_states`` keyword of Hugging Face layers)."""
    if args and isinstance(args[0], Tensor):
        return args[0]
    value = kwargs.get("hidden_states")
    return value if isinstance(value, Tensor) else None


@dataclass
class LayerRecord:
    """What one forward pass showed of a layer (per device under DataParallel)."""

    outputs: Dict[torch.device, Any] = field(default_factory=dict)
    inputs: Dict[torch.device, Optional[Tensor]] = field(default_factory=dict)
    calls: int = 0

    def gathered(
        self, device_ids: Optional[List[int]], position: Optional[int] = None
    ) -> Tuple[Tensor, Any]:
        """The tensor at ``position`` of the output (None: the first) over the
        whole batch, and the layer input."""
        keys = _sort_key_list(list(self.outputs), device_ids)
        out = torch.cat([tensor_at(self.outputs[k], position) for k in keys])
        ins = [self.inputs[k] for k in keys]
        inp = None if any(i is None for i in ins) else torch.cat(ins)  # type: ignore
        return out, inp


@contextmanager
def recorded(
    layers: Sequence[Module], stop: bool = False
) -> Iterator[Dict[Module, LayerRecord]]:
    """Record the inputs, outputs and number of calls of ``layers`` in a forward.

    Args:
        layers (Sequence[Module]): The modules to watch.
        stop (bool, optional): End the forward once every layer has run
            (what lies above them does not run; the ``with`` block ends there
            without an error, and the calls counted are the first of each).
            Single device only: under ``DataParallel`` the replicas run in
            threads.

    Yields:
        Dict[Module, LayerRecord]: Filled in as the forward runs.
    """
    records = {layer: LayerRecord() for layer in layers}
    lock = threading.Lock()

    def make_hook(layer: Module) -> Callable[..., None]:
        def hook(module: Module, args: Any, kwargs: Any, output: Any) -> None:
            device = first_tensor(output).device
            with lock:
                rec = records[layer]
                rec.calls += 1
                rec.outputs[device] = output
                rec.inputs[device] = layer_input(args, kwargs)
                done = stop and all(r.calls for r in records.values())
            if done:
                raise _LayersRecorded

        return hook

    handles = [
        layer.register_forward_hook(make_hook(layer), with_kwargs=True)
        for layer in layers
    ]
    try:
        yield records
    except _LayersRecorded:
        pass
    finally:
        for handle in handles:
            handle.remove()


class _LayersRecorded(BaseException):
    """Ends a forward of :func:`recorded` (``stop=True``) once every layer ran;
    a ``BaseException``, as ``GeneratorExit`` is, so that a model's ``except
    Exception`` does not take it for an error."""


@contextmanager
def replaced_by_hook(
    layer: Module,
    replacement: Callable[[Tensor], Tensor],
    position: Optional[int] = None,
) -> Iterator[None]:
    """Replace ``layer`` 's output tensor at ``position`` (None: the first) by
    ``replacement(original_tensor)``.

    Args:
        layer (Module): The module whose output is replaced.
        replacement (Callable): Maps the layer's (per-device) output tensor to
            the tensor to use instead, of the same shape and device.
        position (int, optional): Index of the tensor in a tuple output.
    """

    def hook(module: Module, args: Any, output: Any) -> Any:
        return replace_at(output, position, replacement(tensor_at(output, position)))

    handle = layer.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def replaced_input_by_hook(
    layer: Module, replacement: Callable[[Tensor], Tensor]
) -> Iterator[None]:
    """Replace the hidden states ``layer`` is called with (its first positional
    argument, or the ``hidden_states`` keyword of Hugging Face layers) by
    ``replacement(original)``.

    Args:
        layer (Module): The module whose input is replaced.
        replacement (Callable): Maps the (per-device) input tensor to the
            tensor to use instead, of the same shape and device.
    """

    def hook(module: Module, args: Any, kwargs: Any) -> Any:
        if args and isinstance(args[0], Tensor):
            return (replacement(args[0]), *args[1:]), kwargs
        if isinstance(kwargs.get("hidden_states"), Tensor):
            new = dict(kwargs, hidden_states=replacement(kwargs["hidden_states"]))
            return args, new
        raise TypeError(
            f"{type(module).__name__} was called without a hidden-state tensor "
            "(first positional argument or hidden_states=)."
        )

    handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class _Replay(Module):
    """Stands in for a layer of a stack: returns the bottleneck output at once."""

    def __init__(
        self, template: Any, value: Callable[[], Tensor], position: Optional[int]
    ) -> None:
        super().__init__()
        self._template = template
        self._value = value
        self._position = position

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return replace_at(self._template, self._position, self._value())


def find_in_stack(root: Module, layer: Module) -> Optional[Tuple[Module, int]]:
    """Find the ``ModuleList``/``Sequential`` of ``root`` holding ``layer``.

    Args:
        root (Module): The model.
        layer (Module): The layer to find.

    Returns:
        (stack, index) or None when ``layer`` is no element of such a container.
    """
    for module in root.modules():
        if isinstance(module, (ModuleList, Sequential)):
            for index, child in enumerate(module):
                if child is layer:
                    return module, index
    return None


@contextmanager
def replayed_in_stack(
    stack: Module,
    index: int,
    template: Any,
    value: Callable[[], Tensor],
    position: Optional[int] = None,
) -> Iterator[None]:
    """Swap ``stack[0..index]`` for stubs returning ``value()`` (restored after).

    Args:
        stack (Module): A ``ModuleList`` or ``Sequential``.
        index (int): Position of the bottlenecked layer in ``stack``.
        template (Any): An output of the real layer (its structure is kept).
        value (Callable): Returns the tensor to emit, called once per stub call.
        position (int, optional): Index of the bottlenecked tensor in a tuple
            output (None: the first).
    """
    originals = [stack[j] for j in range(index + 1)]
    try:
        for j in range(index + 1):
            stack[j] = _Replay(template, value, position)
        yield
    finally:
        for j, original in enumerate(originals):
            stack[j] = original


@contextmanager
def evaluation_mode(
    forward_func: Callable[..., Any], layers: Sequence[Module]
) -> Iterator[None]:
    """Run with dropout off; put every ``training`` flag back afterwards."""
    if not isinstance(forward_func, Module):
        if any(layer.training for layer in layers):
            warnings.warn(
                "The layer is in training mode (dropout active) and forward_func is "
                "not a Module that could be switched to eval(): call model.eval() "
                "for deterministic attributions.",
                stacklevel=3,
            )
        yield
        return
    flags = [(m, m.training) for m in forward_func.modules()]
    forward_func.eval()
    try:
        yield
    finally:
        for module, flag in flags:
            module.training = flag


def scatter_for(value: Tensor, out: Tensor, device_ids: Optional[List[int]]) -> Tensor:
    """The rows of ``value`` that the replica on ``out.device`` computes."""
    if value.shape[0] == out.shape[0]:
        return value.to(out.device)
    if device_ids is None:
        raise RuntimeError(
            "The layer saw a partial batch (DataParallel?) but no device_ids were "
            "given; pass device_ids to InformationBottleneckAttribution."
        )
    from torch.nn.parallel.scatter_gather import scatter

    for chunk in scatter(value, device_ids):
        if chunk.device == out.device:
            return chunk
    raise RuntimeError(f"No chunk of the bottleneck output for device {out.device}.")
