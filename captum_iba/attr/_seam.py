"""The one seam between the optimisation and the model: how ``T`` takes a
site's place.

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
   clean input (:meth:`Seam.replay_matches`);
2. ``precision="bf16"``'s autocast (:func:`._speed.precision_context`);
3. for ``removal="attention"``, the pre-hooks adding Eq. (R2)'s bias to the
   attention of every layer above the site
   (:func:`._sites.attention_removal`).
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
from torch.nn import Module

from captum_iba._utils.captum_compat import _run_forward
from captum_iba._utils.common import logits_of, user_stacklevel
from captum_iba._utils.hooks import (
    replaced_by_hook,
    replaced_input_by_hook,
    scatter_for,
)
from captum_iba.attr import _speed
from captum_iba.attr._inputs import copies_failed, slice_rows
from captum_iba.attr._sites import Site, attention_removal, layers_above, stack_above

__all__ = ["CleanRun", "Path", "Seam"]

Substitute = Callable[[Callable[[], Tensor]], ContextManager[None]]


class Path(NamedTuple):
    """How ``T`` replaces the site.

    Attributes:
        kind (str): ``"stack"`` (the stack replay), ``"embeddings"`` (the
            replay at the model's embeddings, every layer above them) or
            ``"hooks"``.
        cuts (bool): Whether the replay uses the exact cuts.
    """

    kind: str
    cuts: bool = False


@dataclass(frozen=True)
class CleanRun:
    """The clean forward pass, which the stack replay must reproduce.

    Attributes:
        inputs (tuple of Tensor): The model's inputs, one row per instance.
        extra (tuple): Its further positional arguments.
        output (Tensor): Its scores.
        x (Tensor): The site's tensor in that pass (``T``'s dtype and device).
        template (Any): The layer's output in that pass (the replay's stubs
            return its structure).
    """

    inputs: Tuple[Tensor, ...]
    extra: Tuple[Any, ...]
    output: Tensor
    x: Tensor
    template: Any


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
        self.constant = constant
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
                installed.enter_context(
                    attention_removal(*self.above, self._current_keep)
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
        if path.kind == "stack":
            assert self.stack is not None
            return _speed.stack_replay(
                self.model, self.stack, self.clean.template, path.cuts, site.position
            )
        if path.kind == "embeddings":
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
