"""The frozen model's passes behind the amortized bottleneck.

One :class:`Passes` object per model and layer runs, for a batch of token ids:

* the **clean pass** (no grad), recording the bottlenecked layer's output
  :math:`X` and the readout layers' hidden states (the explainer's input);
* the **baseline pass** (no grad), for a prior that needs one (``"baseline"``:
  the layer's output on the prior's baselines, the removable tokens replaced
  by [PAD]); the prior plug-in gives the noise statistics
  (:meth:`Passes.layer_of`);
* the **bottlenecked pass**: the model with :math:`T` in the layer's place,
  through the per-sample class's seam (:class:`~captum_iba.attr._seam.Seam`):
  the stack replay when it reproduces the model's output on the first batch
  (checked once), else forward hooks.

Batches from a loader are unpacked by :func:`unpack`.
"""

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.captum_compat import _run_forward
from captum_iba._utils.common import logits_of
from captum_iba._utils.hooks import recorded
from captum_iba.attr import _loop
from captum_iba.attr._inputs import expand_rows
from captum_iba.attr._seam import (
    CleanRun,
    Path,
    Seam,
    Site,
    layer_name,
    sites_of,
    stack_for,
)
from captum_iba.attr.explainer import ExplainerSettings
from captum_iba.attr.priors import NoisePrior

__all__ = ["Batch", "Clean", "Passes", "module_name", "unpack"]


@dataclass
class Batch:
    """One batch: token ids, the forward's further arguments, mask and labels.

    Attributes:
        ids (Tensor): ``(B, L)`` token ids.
        extra (tuple): The forward's further positional arguments (the
            attention mask, then the segment ids when there are any).
        mask (Tensor): ``(B, L)`` bool, True at real tokens.
        labels (Tensor or None): ``(B,)`` gold labels, when the loader has them.
    """

    ids: Tensor
    extra: Tuple[Any, ...]
    mask: Tensor
    labels: Optional[Tensor] = None


def unpack(batch: Any, device: torch.device) -> Batch:
    """A loader's batch as a :class:`Batch`, on ``device``.

    Accepts a :class:`Batch` itself (the explained forward's arguments
    laid out by the caller: a causal LM's prompts, e.g.), a dict
    with ``input_ids``, ``attention_mask`` and optionally ``token_type_ids``
    and ``labels`` (or ``label``), or a tuple/list
    ``(input_ids, attention_mask[, token_type_ids][, labels])`` where the
    labels are the 1-D tensor.

    Raises:
        ValueError: Naming what is missing or of the wrong shape.
    """
    if isinstance(batch, Batch):
        extra = tuple(e.to(device) if isinstance(e, Tensor) else e for e in batch.extra)
        labels = None if batch.labels is None else batch.labels.to(device)
        return Batch(batch.ids.to(device), extra, batch.mask.to(device), labels)
    if isinstance(batch, dict):
        ids, mask = batch.get("input_ids"), batch.get("attention_mask")
        tt = batch.get("token_type_ids")
        labels = batch.get("labels", batch.get("label"))
    elif isinstance(batch, (tuple, list)) and len(batch) >= 2:
        ids, mask, rest = batch[0], batch[1], list(batch[2:])
        tt = next((t for t in rest if isinstance(t, Tensor) and t.dim() == 2), None)
        labels = next((t for t in rest if isinstance(t, Tensor) and t.dim() == 1), None)
    else:
        raise ValueError(
            "each batch must be a dict with input_ids and attention_mask, or a "
            f"tuple (input_ids, attention_mask, ...); got {type(batch).__name__}."
        )
    if not isinstance(ids, Tensor) or ids.dim() != 2:
        raise ValueError("the batch's input_ids must be a (B, L) Tensor.")
    if not isinstance(mask, Tensor) or mask.shape != ids.shape:
        raise ValueError(
            f"the batch's attention_mask must be a Tensor of shape {tuple(ids.shape)}."
        )
    if labels is not None and (
        not isinstance(labels, Tensor) or labels.shape != ids.shape[:1]
    ):
        raise ValueError(f"the batch's labels must be a ({ids.shape[0]},) Tensor.")
    extra = (mask.to(device),) + (() if tt is None else (tt.to(device),))
    labels = None if labels is None else labels.to(device).long()
    return Batch(ids.to(device), extra, mask.to(device).bool(), labels)


@dataclass
class Clean:
    """What the clean pass gives: scores, the layer's output and input, the
    readout states and a template of the layer's output."""

    logits: Tensor
    x: Tensor
    states: List[Tensor]
    template: Any
    x_in: Optional[Tensor] = None


class Passes:
    """The passes of one model for one bottlenecked layer.

    Args:
        model (Module): The frozen model (called as ``model(ids, *extra)``).
        layer (Module): The bottlenecked layer.
        readout (list of Module): The layers the explainer reads.
    """

    def __init__(self, model: Module, layer: Module, readout: List[Module]) -> None:
        self.model, self.layer, self.readout = model, layer, list(readout)
        self.site = Site(layer, layer_name(model, layer))
        self.stack = stack_for(model, layer, True, None)
        #: How T replaces the layer, decided (the replay checked) on the first
        #: batch.
        self.path: Optional[Path] = None

    def forward(self, ids: Tensor, extra: Tuple[Any, ...]) -> Tensor:
        """The model's scores."""
        return logits_of(_run_forward(self.model, (ids,), None, extra))

    def clean(self, batch: Batch) -> Clean:
        """The clean pass, recording the layer and the readout layers."""
        watched = list(dict.fromkeys([self.layer] + self.readout))
        with torch.no_grad(), recorded(watched) as records:
            logits = self.forward(batch.ids, batch.extra)
        for module in watched:
            sites_of(self.model, module, records[module], False)
        x, x_in = records[self.layer].gathered(None)
        states = [records[m].gathered(None)[0] for m in self.readout]
        template = next(iter(records[self.layer].outputs.values()))
        return Clean(logits, x, states, template, x_in)

    def layer_of(
        self,
        batch: Batch,
        clean: Clean,
        prior: NoisePrior,
        settings: ExplainerSettings,
        baselines: Optional[Tensor] = None,
    ) -> _loop.Layer:
        """The layer's output with the noise statistics of ``prior`` (a plug-in):
        for a prior that ``needs_baseline``, the layer's output on
        ``baselines`` (default: the prior's own, from the batch's ids and the
        settings' pad and special ids); for one that ``needs_layer_input``,
        the layer's input."""
        base = None
        if prior.needs_baseline:
            if baselines is None:
                baselines = prior.baselines(
                    batch.ids, batch.mask, settings.pad_token_id,
                    settings.special_token_ids,
                )  # fmt: skip
            with torch.no_grad(), recorded([self.layer]) as records:
                self.forward(baselines, batch.extra)
            base = records[self.layer].gathered(None)[0]
        x_in = clean.x_in if prior.needs_layer_input else None
        return _loop.Layer.from_prior(prior, clean.x, batch.mask, x_in, base)

    def seam(self, batch: Batch, clean: Clean, n: int, attention: bool = False) -> Seam:
        """The seam that runs the model on the batch's rows repeated ``n``
        times with ``T`` in the layer's place (enter it, then ``run``); with
        ``attention``, every layer above reads the tokens with the weights
        ``keep`` given to ``run`` (Eq. R2)."""
        rows = (
            (batch.ids.repeat_interleave(n, dim=0),),
            expand_rows(batch.extra, batch.ids.shape[0], n),
        )
        reference = CleanRun(
            (batch.ids,), batch.extra, clean.logits, clean.x, clean.template
        )
        seam = Seam(
            self.model, self.site, reference, rows, n, self.stack, path=self.path,
            attention=attention,
        )  # fmt: skip
        self.path = seam.path
        return seam


def module_name(model: Module, module: Module) -> str:
    """The qualified name of ``module`` inside ``model`` (e.g.
    ``"bert.encoder.layer.4"``), which keys a fitted explainer.

    Raises:
        ValueError: When ``module`` is not part of ``model``.
    """
    for name, found in model.named_modules():
        if found is module:
            return name
    raise ValueError(
        f"the layer {type(module).__name__} is not a module of the model; pass a "
        "layer of the model (e.g. model.bert.encoder.layer[4])."
    )
