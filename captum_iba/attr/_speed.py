"""What makes IBA's optimisation cheaper without changing what it computes.

The **exact cuts** (on by default, ``cuts=True``), each checked or exact by
construction:

* **frozen weights** (:func:`frozen_parameters`): the model's parameters do not
  require grad during the run (flags restored after), so the forward keeps
  no tensors for weight gradients;
* **embeddings once** (:func:`embeddings_once`): the embedding block's output
  depends only on the token ids, which are the same at every step, so it is
  computed once per chunk and reused;
* **the [CLS] row of the last layer** (:class:`ClsRowLayer`): when the
  classifier reads only token 0 of the last layer (BERT's pooler, RoBERTa's
  and DistilBERT's heads), the last layer computes its attention query and
  feed-forward for that row only; the other rows are NaN, so a head that read
  them would give NaN. The cut is used only when the model's output with it
  matches the full computation on the clean input (the check that the stack
  replay already makes, on an attribution's first call: the path it chose
  is kept, :func:`~captum_iba.attr._seam.path_key`);
* **both terms in one pass** (:func:`~captum_iba.attr._loop.paired_gradient`):
  with ``removal="attention"`` and the complement term (``config="deletion"``)
  the rows of the mask and of its inverse run side by side in one forward and
  backward pass per step, and at the first step (``alpha`` 0 everywhere, both
  masks equal) one set of rows serves both, also when the two terms do not
  fit one pass (:func:`rows_per_pass`) and otherwise run apart; the same
  gradient up to rounding;
* **the clean pass once** (:class:`CleanForms`): the clean forward pass
  serves the objective (``"auto"`` resolved, the output checked), the
  targets (the predicted class of ``target=None``) and the replay check;
  on an attribution's later calls whose paths are kept and whose targets do
  not read the output's values (a given target, or one score per
  instance: the causal-LM scorers), the forward stops once the layers have
  run, which is all the optimisation needs of it (the layers' activations);
  the output's shape and form are checked on the first output the
  optimisation scores (:class:`~captum_iba.attr.objectives.KnownForm`).
  The baselines' forward, whose output is never read, stops there on
  every call;
* **row chunking** (:func:`instances_per_chunk`): without
  ``internal_batch_size``, a forward pass takes as many instances as keep
  instances x noise samples x tokens within :data:`ROW_TOKENS` (the batch
  stays independent, each instance with its own noise and ``alpha``).

* **the bias's attention in explicit math**
  (:func:`~captum_iba.attr._attention.lean_bias_attention`):
  with ``removal="attention"``, a layer whose attention mask carries Eq.
  (R2)'s bias (which needs a gradient) runs its attention as ``softmax(q k^T
  s + mask) v`` in three operations, where PyTorch's scaled-dot-product
  attention takes its math kernel for such a mask and adds a guard for rows
  with every key masked (three passes over the ``L x L`` weights, forward and
  backward); the same values up to rounding. Masks without a gradient keep
  the fused kernels.

And an approximation, off by default (on with ``precision="auto"``, the
default of ``iba-deletion``, where the machine has native bfloat16):
``precision="bf16"`` runs the model's forward and backward under
``torch.autocast`` in bfloat16 with eager attention (the SDPA kernels'
bfloat16 backward is slow on CPUs); ``alpha``, the prior's
statistics, the noise and the capacity stay float32. It pays only on a GPU or
a CPU with native bfloat16: :mod:`captum_iba.attr._precision` decides where it
runs.
"""

import sys
from contextlib import ExitStack, contextmanager
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    Iterator,
    List,
    Optional,
    Tuple,
)

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.hooks import replayed_in_stack
from captum_iba.attr.objectives import KnownForm, Objective

__all__ = [
    "PRECISIONS",
    "CleanForms",
    "ROW_TOKENS",
    "ClsRowLayer",
    "cls_row_cut",
    "embeddings_once",
    "embeddings_replay",
    "frozen_parameters",
    "instances_per_chunk",
    "precision_context",
    "rows_per_pass",
    "stack_cuts",
    "stack_replay",
]

#: The precisions IBA takes (``"auto"``: the machine's choice,
#: :func:`captum_iba.attr._precision.auto_precision`).
PRECISIONS = ("float32", "bf16", "auto")
#: Default bound of one forward pass (instances x samples x tokens), per device
#: type, when ``internal_batch_size`` is None.
ROW_TOKENS: Dict[str, int] = {"cpu": 8192, "cuda": 262144}


def instances_per_chunk(
    batch: int,
    n_samples: int,
    first_input: Tensor,
    internal_batch_size: Optional[int] = None,
    cuts: bool = True,
) -> int:
    """How many instances go through one forward pass together: the one rule.

    ``internal_batch_size // n_samples`` when ``internal_batch_size`` is given;
    else, with the exact cuts, as many as keep ``instances x n_samples x
    length`` within :data:`ROW_TOKENS` (the length is dim 1 of the first input,
    e.g. token ids ``(B, L)``); else the whole batch.

    Args:
        batch (int): Instances in the batch.
        n_samples (int): Noise copies per instance.
        first_input (Tensor): The first input (its length and device).
        internal_batch_size (int, optional): The most rows per forward pass.
        cuts (bool): Whether the exact cuts are on.

    Returns:
        int: Instances per chunk, at least 1.
    """
    if internal_batch_size is not None:
        return max(1, internal_batch_size // n_samples)
    if not cuts:
        return batch
    length = first_input.shape[1] if first_input.dim() > 1 else 1
    budget = ROW_TOKENS.get(first_input.device.type, ROW_TOKENS["cuda"])
    return max(1, min(batch, budget // max(n_samples * length, 1)))


class CleanForms:
    """What an attribution's clean outputs showed: per objective given, the
    objective resolved on them and their shape after the batch dimension
    (:meth:`remember`), so that a later call may skip the clean output
    (:meth:`later`)."""

    def __init__(self) -> None:
        self._forms: Dict[Tuple[Any, ...], Tuple[Objective, Tuple[int, ...]]] = {}

    @staticmethod
    def _key(objective: Objective) -> Tuple[Any, ...]:
        return (type(objective), objective.name, getattr(objective, "fn", None))

    def remember(self, given: Objective, resolved: Objective, clean: Tensor) -> None:
        """Keep ``resolved`` (the objective ``given`` became on ``clean``)."""
        self._forms[self._key(given)] = (resolved, tuple(clean.shape[1:]))

    def later(
        self, given: Objective, target: Optional[Tensor], batch: int
    ) -> Optional[Tuple[Objective, Optional[Tensor]]]:
        """The objective (checked on its first output) and the targets of a
        ``batch`` without its clean output, or None when that output is needed:
        no earlier output was seen with ``given``, or the targets read its
        values (``target=None`` of class scores: the predicted class)."""
        form = self._forms.get(self._key(given))
        if form is None:
            return None
        resolved, shape = form
        if resolved.reads_output(target, (batch,) + shape):
            return None
        probe = torch.empty((batch,) + shape, device="meta")  # the shape only
        return KnownForm(resolved, shape), resolved.targets(target, probe)


def rows_per_pass(
    first_input: Tensor, internal_batch_size: Optional[int] = None, cuts: bool = True
) -> Optional[int]:
    """The most noise-copy rows one forward and backward pass takes: the
    same rule as :func:`instances_per_chunk`, by rows (so that one long
    instance's ``n_samples`` copies are split over passes).

    Args:
        first_input (Tensor): The first input (its length and device).
        internal_batch_size (int, optional): The most rows per forward pass.
        cuts (bool): Whether the exact cuts are on.

    Returns:
        int or None: Rows per pass; None: all in one pass (``cuts=False``).
    """
    if internal_batch_size is not None:
        return internal_batch_size
    if not cuts:
        return None
    length = first_input.shape[1] if first_input.dim() > 1 else 1
    budget = ROW_TOKENS.get(first_input.device.type, ROW_TOKENS["cuda"])
    return max(1, budget // max(length, 1))


@contextmanager
def frozen_parameters(model: Any) -> Iterator[None]:
    """Parameters of ``model`` (a Module) without ``requires_grad`` inside;
    every flag restored after."""
    params = list(model.parameters()) if isinstance(model, Module) else []
    flags = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)


def _attribute_swap(parent: Module, name: str, module: Module) -> ContextManager[None]:
    @contextmanager
    def swap() -> Iterator[None]:
        original = getattr(parent, name)
        setattr(parent, name, module)
        try:
            yield
        finally:
            setattr(parent, name, original)

    return swap()


class _Once(Module):
    """Runs ``module`` once per set of tensor arguments (compared by identity)
    and returns that output while they stay the same."""

    def __init__(self, module: Module) -> None:
        super().__init__()
        self.inner = module
        self._key: List[Any] = []
        self._out: Any = None

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        key = list(args) + sorted(kwargs.items(), key=lambda kv: kv[0])
        flat = [v[1] if isinstance(v, tuple) else v for v in key]
        old = [v[1] if isinstance(v, tuple) else v for v in self._key]
        same = len(key) == len(self._key) and all(
            a is b
            or (not isinstance(a, Tensor) and not isinstance(b, Tensor) and a == b)
            for a, b in zip(flat, old)
        )
        if not same:
            with torch.no_grad():
                self._out = self.inner(*args, **kwargs)
            self._key = key
        return self._out


def embeddings_once(model: Any) -> ContextManager[None]:
    """``model.base_model.embeddings`` computed once per input (see
    :class:`_Once`); nothing when the model has no such block."""
    base = getattr(model, "base_model", None)
    if isinstance(base, Module) and isinstance(
        getattr(base, "embeddings", None), Module
    ):
        return _attribute_swap(base, "embeddings", _Once(base.embeddings))
    return ExitStack()


def _eager_attention(module: Module) -> Optional[Callable[..., Any]]:
    return getattr(
        sys.modules.get(type(module).__module__), "eager_attention_forward", None
    )


class ClsRowLayer(Module):
    """A BERT-style encoder layer computed for row 0 only (rows 1.. are NaN).

    Keys and values come from every row; the query, the attention output and
    the feed-forward block only from row 0, so row 0 equals the full layer's.

    Args:
        layer (Module): A layer with ``attention.self`` (``query``, ``key``,
            ``value``), ``attention.output``, ``intermediate`` and ``output``
            (BERT, RoBERTa and their copies in transformers).
    """

    def __init__(self, layer: Module) -> None:
        super().__init__()
        self.layer = layer

    @staticmethod
    def supports(layer: Module) -> bool:
        """Whether ``layer`` has the structure this class computes."""
        sa = getattr(getattr(layer, "attention", None), "self", None)
        return (
            all(hasattr(sa, n) for n in ("query", "key", "value", "config"))
            and hasattr(layer.attention, "output")
            and hasattr(layer, "intermediate")
            and hasattr(layer, "output")
            and _eager_attention(sa) is not None
        )

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Optional[Tensor] = None,
        *args: Any,
        **kwargs: Any,
    ) -> Tensor:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        layer, h = self.layer, hidden_states
        sa = layer.attention.self
        B, L, H = h.shape
        d = sa.attention_head_size

        def heads(t: Tensor) -> Tensor:
            return t.view(B, t.shape[1], -1, d).transpose(1, 2)

        mask = attention_mask
        if isinstance(mask, Tensor) and mask.dim() == 4 and mask.shape[-2] == L:
            mask = mask[:, :, :1, :]
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(
            sa.config._attn_implementation, _eager_attention(sa)
        )
        context, _ = attend(
            sa, heads(sa.query(h[:, :1])), heads(sa.key(h)), heads(sa.value(h)), mask,
            dropout=0.0, scaling=sa.scaling,
        )  # fmt: skip
        first = layer.attention.output(context.reshape(B, 1, -1), h[:, :1])
        first = layer.output(layer.intermediate(first), first)
        return torch.cat([first, first.new_full((B, L - 1, H), float("nan"))], 1)


def stack_replay(
    model: Any,
    stack: Tuple[Module, int],
    template: Any,
    cut: bool,
    position: Optional[int] = None,
) -> Callable[[Callable[[], Tensor]], ContextManager[None]]:
    """The stack replay of :func:`~captum_iba._utils.hooks.replayed_in_stack`
    (``position``: the bottlenecked tensor in a tuple output), with the exact
    cuts of :func:`stack_cuts` when ``cut``; the returned factory's ``cuts``
    attribute says which."""

    @contextmanager
    def replay(value: Callable[[], Tensor]) -> Iterator[None]:
        with replayed_in_stack(stack[0], stack[1], template, value, position):
            if not cut:
                yield
                return
            with stack_cuts(model, stack[0], stack[1]):
                yield

    replay.cuts = cut  # type: ignore[attr-defined]
    return replay


def stack_cuts(model: Any, stack: Module, index: int) -> ContextManager[None]:
    """The cuts around the stack replay of ``stack[index]``: embeddings once,
    and the [CLS] row of the last layer when it lies above the bottleneck
    (:func:`cls_row_cut`). The caller checks the model's output against the
    full computation."""
    cuts = ExitStack()
    cuts.enter_context(embeddings_once(model))
    if index < len(stack) - 1:
        cuts.enter_context(cls_row_cut(stack))
    return cuts


def cls_row_cut(stack: Module) -> ContextManager[None]:
    """The last layer of ``stack`` computed for its [CLS] row only
    (:class:`ClsRowLayer`) when it has a BERT-style structure; nothing
    otherwise."""
    last = len(stack) - 1
    if last < 0 or not ClsRowLayer.supports(stack[last]):
        return ExitStack()
    return _attribute_swap(stack, str(last), ClsRowLayer(stack[last]))


class _Constant(Module):
    """Stands in for a module whose output is the bottleneck's: returns
    ``value()`` whatever it is called with."""

    def __init__(self, value: Callable[[], Tensor]) -> None:
        super().__init__()
        self._value = value

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._value()


def embeddings_replay(
    model: Module, embeddings: Module, stack: Module, cut: bool
) -> Callable[[Callable[[], Tensor]], ContextManager[None]]:
    """The replay at the model's embeddings, every layer of ``stack`` above
    them: the embeddings swapped for a stub returning ``value()`` (their
    output is the bottleneck's, nothing to compute) and, when ``cut``, the
    last layer's [CLS] row only (:func:`cls_row_cut`); the factory's ``cuts``
    attribute says which. The caller checks the model's output against the
    full computation."""
    parent, name = _parent_of(model, embeddings)

    @contextmanager
    def replay(value: Callable[[], Tensor]) -> Iterator[None]:
        with _attribute_swap(parent, name, _Constant(value)):
            with cls_row_cut(stack) if cut else ExitStack():
                yield

    replay.cuts = cut  # type: ignore[attr-defined]
    return replay


def _parent_of(model: Module, module: Module) -> Tuple[Module, str]:
    """The module holding ``module`` as an attribute, and the attribute's name."""
    for parent in model.modules():
        for name, child in parent.named_children():
            if child is module:
                return parent, name
    raise ValueError(f"{type(module).__name__} is not a module of the model.")


@contextmanager
def precision_context(
    model: Any, precision: str, device: torch.device
) -> Iterator[None]:
    """``torch.autocast`` in bfloat16 with eager attention for ``"bf16"``
    (the attention implementation is put back after); nothing for
    ``"float32"``."""
    if precision == "float32":
        yield
        return
    config = getattr(model, "config", None)
    old = getattr(config, "_attn_implementation_internal", None)
    try:
        if config is not None and old is not None:
            config._attn_implementation_internal = "eager"
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            yield
    finally:
        if config is not None and old is not None:
            config._attn_implementation_internal = old
