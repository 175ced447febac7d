"""Where a bottleneck sits, and the one seam between the optimisation and the
model: how ``T`` takes that site's place.

A site is one tensor of a layer's output, or its input (:class:`Site`). A
layer returning a Tensor has one site; a layer returning a tuple has one
site per tensor of the tuple with the batch as first dimension (Captum's
layer methods return one attribution per layer output tensor); with
``attribute_to_layer_input=True`` the site is the hidden-state tensor the
layer is called with (first positional argument or ``hidden_states=``).
This module reads a site's tensor from a recorded forward pass
(:func:`sites_of`, :func:`read_site`), turns the token mask into the site's
mask (:func:`site_mask`), and finds the layer stack holding it
(:func:`stack_for`) and, for ``removal="attention"``, the layers above it
(:func:`layers_above`).

A :class:`Seam` is built for one site and one batch, and entered as a context
manager; inside, :meth:`Seam.run` runs the model on the noise copies' rows
with the bottleneck output ``T`` in the site's place and returns the scores -
all the optimisation (:func:`captum_iba.attr._loop.optimise`) sees of the
model. Entering installs, in this order, and leaving removes:

1. how ``T`` replaces the site (:attr:`Seam.path`, chosen when the seam is
   built): the stack replay (the layers below the bottleneck skipped), or at
   the model's embeddings their replay (the embeddings not computed), with
   :mod:`._speed`'s exact cuts when they reproduce the model's output, else
   without them, else Captum-style forward hooks (always for a layer's
   input). The replay is checked once against the model's own output on the
   clean input (:meth:`Seam.replay_matches`), on an attribution's first call
   (later calls pass the path chosen, :func:`path_key`);
2. ``precision="bf16"``'s autocast (:func:`._speed.precision_context`);
3. for ``removal="attention"``, the deletion mask in the attention of every
   layer above the site (:func:`._attention.attention_removal`).
"""

import warnings
from contextlib import ExitStack
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    ContextManager,
    FrozenSet,
    List,
    NamedTuple,
    Optional,
    Tuple,
    Union,
)

import torch
from torch import Tensor
from torch.nn import Module, ModuleList

from captum_iba._utils.captum_compat import _run_forward
from captum_iba._utils.common import logits_of, user_stacklevel
from captum_iba._utils.hooks import (
    LayerRecord,
    find_in_stack,
    replaced_by_hook,
    replaced_input_by_hook,
    scatter_for,
    tensor_at,
    tensor_positions,
)
from captum_iba._utils.modules import embeddings_of
from captum_iba.attr import _speed
from captum_iba.attr._attention import attention_removal, lean_bias_attention
from captum_iba.attr._inputs import copies_failed, slice_rows

__all__ = [
    "CleanRun",
    "Path",
    "Seam",
    "Site",
    "layer_name",
    "layers_above",
    "read_site",
    "site_groups",
    "site_mask",
    "sites_of",
    "stack_above",
    "stack_for",
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


def site_groups(groups: Optional[Tensor], x: Tensor, name: str) -> Optional[Tensor]:
    """``feature_mask``'s groups on the site's token axis.

    Raises:
        ValueError: When the site has no ``(B, L)`` token axis of that shape.
    """
    if groups is None:
        return None
    if x.dim() < 3 or tuple(groups.shape) != tuple(x.shape[:2]):
        raise ValueError(
            f"feature_mask has shape {tuple(groups.shape)} but the output of "
            f"{name} has shape {tuple(x.shape)}: expected (B, L) = "
            f"{tuple(x.shape[:2])}."
        )
    return groups.to(x.device).long()


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


# ---------------------------------------------------------------------------
# The seam: T in the site's place
# ---------------------------------------------------------------------------


Substitute = Callable[[Callable[[], Tensor]], ContextManager[None]]


class Path(NamedTuple):
    """How ``T`` replaces the site.

    Attributes:
        route (str): ``"stack"`` (the stack replay), ``"embeddings"`` (the
            replay at the model's embeddings, every layer above them) or
            ``"hooks"``.
        cuts (bool): Whether the replay uses the exact cuts.
    """

    route: str
    cuts: bool = False


@dataclass(frozen=True)
class CleanRun:
    """The clean forward pass, which the stack replay must reproduce.

    Attributes:
        inputs (tuple of Tensor): The model's inputs, one row per instance.
        extra (tuple): Its further positional arguments.
        output (Tensor or None): Its scores (None where the call skipped
            them: the path is then known, :class:`~captum_iba.attr._speed.CleanForms`).
        x (Tensor): The site's tensor in that pass (``T``'s dtype and device).
        template (Any): The layer's output in that pass (the replay's stubs
            return its structure).
    """

    inputs: Tuple[Tensor, ...]
    extra: Tuple[Any, ...]
    output: Optional[Tensor]
    x: Tensor
    template: Any


def path_key(
    site: Site,
    stack: Optional[Tuple[Module, int]],
    device_ids: Optional[List[int]],
    cuts: bool,
) -> Tuple[Any, ...]:
    """What :meth:`Seam._choose` 's path depends on: the site (its layer,
    output position, input or output), the stack holding it, the devices and
    the cuts. Whether a replay reproduces the model's output is a matter of
    the model's structure (what runs above the site, what the head reads),
    not of the inputs: an attribution checks once, keeps the path under this
    key and passes it on (``Seam(path=...)``), a forward pass a call saved,
    as the amortized fit does from batch to batch."""
    held = None if stack is None else (id(stack[0]), stack[1])
    devices = None if device_ids is None else tuple(device_ids)
    return (id(site.layer), site.position, site.on_input, held, devices, cuts)


class Seam:
    """The model with ``T`` in a site's place, for the optimisation.

    Args:
        model (Callable): The forward function.
        site (Site): Where the bottleneck sits.
        clean (CleanRun): The clean pass (for the replay check, ``T``'s dtype).
        rows (tuple): The inputs and further arguments of the ``B * n`` rows
            of the noise copies.
        n (int): Noise copies per instance.
        stack (tuple, optional): The ``(ModuleList, index)`` holding the
            layer, for the stack replay; None: hooks.
        device_ids (list of int, optional): ``DataParallel`` 's devices (the
            hooks give each replica its rows of ``T``).
        cuts (bool): Try the replay with the exact cuts first.
        path (Path, optional): A path already chosen (e.g. on an earlier
            batch); not checked again.
        attention (bool): ``removal="attention"``: every layer above the site
            reads token ``t`` with weight ``keep[:, t]``.
        precision (str): ``"float32"`` or ``"bf16"`` (autocast inside).
        constant (frozenset of int): Positions of the further arguments that
            are constants (never sliced with the rows).
    """

    def __init__(
        self,
        model: Callable[..., Any],
        site: Site,
        clean: CleanRun,
        rows: Tuple[Tuple[Tensor, ...], Tuple[Any, ...]],
        n: int,
        stack: Optional[Tuple[Module, int]] = None,
        device_ids: Optional[List[int]] = None,
        cuts: bool = True,
        path: Optional[Path] = None,
        attention: bool = False,
        precision: str = "float32",
        constant: FrozenSet[int] = frozenset(),
    ) -> None:
        self.model, self.site, self.clean, self.rows, self.n = (
            model, site, clean, rows, n,
        )  # fmt: skip
        self.constant, self.cuts = constant, cuts
        self.stack, self.device_ids, self.precision = stack, device_ids, precision
        #: How T replaces the site.
        self.path: Path = self._choose(cuts) if path is None else path
        self.above = layers_above(model, site, stack) if attention else None
        self._t: Optional[Tensor] = None
        self._keep: Optional[Tensor] = None
        self._installed: Optional[ExitStack] = None

    def run(
        self,
        t: Tensor,
        keep: Optional[Tensor] = None,
        rows: Optional[Union[slice, Tensor]] = None,
    ) -> Tensor:
        """The scores of the rows (all, or the slice or indices ``rows`` of
        them: a pass may take a row twice) with
        ``t`` (cast to the site's dtype) in the site's place and, when
        ``keep`` is given, every layer above reading token ``t`` with weight
        ``keep[:, t]`` (Eq. R2)."""
        self._t = t.to(self.clean.x.dtype)
        if keep is not None:
            self._keep = keep
        inputs, extra = self.rows
        if rows is not None:
            count = inputs[0].shape[0]
            inputs = tuple(x[rows] for x in inputs)
            extra = slice_rows(extra, rows, count, self.constant)
        with copies_failed(self.clean.x.shape[0], self.n):
            out = _run_forward(self.model, inputs, None, extra)
        return logits_of(out)

    def __enter__(self) -> "Seam":
        with ExitStack() as installed:
            installed.enter_context(self._substitute(self.path)(self._current_t))
            installed.enter_context(
                _speed.precision_context(
                    self.model, self.precision, self.clean.x.device
                )
            )
            if self.above is not None:
                container, indices = self.above
                if self.cuts:
                    layers = [container[i] for i in indices]
                    installed.enter_context(lean_bias_attention(layers))
                installed.enter_context(
                    attention_removal(container, indices, self._current_keep)
                )
            self._installed = installed.pop_all()
        return self

    def __exit__(self, *exc: Any) -> None:
        installed, self._installed = self._installed, None
        self._t = self._keep = None
        if installed is not None:
            installed.__exit__(*exc)

    def replay_matches(self, path: Path) -> bool:
        """Whether the model's output with ``path`` 's replay of ``T = X``
        matches the clean output (within 1e-4, relative and of the largest
        score; 2e-2 for a bfloat16 layer)."""
        clean = self.clean
        assert clean.output is not None, "the clean output is skipped only with a path"
        with torch.no_grad(), self._substitute(path)(lambda: clean.x):
            out = logits_of(_run_forward(self.model, clean.inputs, None, clean.extra))
        tol = 1e-4 if clean.x.dtype == torch.float32 else 2e-2
        scale = clean.output.abs().max().clamp_min(1.0)
        return torch.allclose(out, clean.output, rtol=tol, atol=tol * scale)

    def _choose(self, cuts: bool) -> Path:
        """The stack replay (with the exact cuts first when ``cuts``) when it
        reproduces the model's output; at the model's embeddings, their
        replay likewise (no warning when it does not: hooks serve as well
        there); else hooks."""
        if self.stack is not None and not self.site.on_input:
            for cut in (True, False) if cuts else (False,):
                if self.replay_matches(Path("stack", cut)):
                    return Path("stack", cut)
            warnings.warn(
                f"{self.site.name}: re-running only the layers above the bottleneck "
                "did not reproduce the model output; using forward hooks (slower) "
                "instead.",
                stacklevel=user_stacklevel(),
            )
        elif self.device_ids is None and stack_above(self.model, self.site):
            for cut in (True, False) if cuts else (False,):
                if self.replay_matches(Path("embeddings", cut)):
                    return Path("embeddings", cut)
        return Path("hooks")

    def _substitute(self, path: Path) -> Substitute:
        """The context that puts ``value()`` in the site's place along ``path``."""
        site, device_ids = self.site, self.device_ids
        if path.route == "stack":
            assert self.stack is not None
            return _speed.stack_replay(
                self.model, self.stack, self.clean.template, path.cuts, site.position
            )
        if path.route == "embeddings":
            above = stack_above(self.model, site)
            return _speed.embeddings_replay(self.model, site.layer, above, path.cuts)
        if site.on_input:
            return lambda value: replaced_input_by_hook(
                site.layer, lambda inp: scatter_for(value(), inp, device_ids)
            )
        return lambda value: replaced_by_hook(
            site.layer, lambda out: scatter_for(value(), out, device_ids), site.position
        )

    def _current_t(self) -> Tensor:
        assert self._t is not None, "Seam.run sets T before the model reads it"
        return self._t

    def _current_keep(self) -> Optional[Tensor]:
        return self._keep
