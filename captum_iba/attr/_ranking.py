"""When IBA's result can rank no token, said before and after the work.

Two causes are known before any optimisation, where the result is provably
degenerate:

* ``removal="attention"`` after the last layer of the stack: no layer above
  reads the tokens, so the mask changes nothing and every token keeps the
  same weight (:func:`nothing_above`);
* the model's output reads only the first row of the layer's output - the
  last layer of a BERT-style classifier, whose head reads [CLS] alone
  (:func:`reads_first_token_only`, one forward pass with the other rows set
  to NaN, made only for the last layer of a stack): no other token can
  change the prediction.

After the optimisation, every instance's token scores are tested for a
spread (:func:`~captum_iba._utils.ranking.flat_rows`). Each finding is
recorded in ``last_run`` and said in one warning per layer that names the
layer, the likely cause and what to do (:func:`warning`).

A causal LM's answers (:func:`captum_iba.attr.llm.explain_answers`) are
tested for ties instead: an instance most of whose scored tokens tie with
its median score (within :data:`TIE`) gives no ranking (:func:`no_ranking`,
which ``captum_iba.attr.llm`` exports), said in one warning
(:func:`say_if_flat`).
"""

import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.captum_compat import _run_forward
from captum_iba._utils.common import logits_of
from captum_iba._utils.hooks import replaced_by_hook
from captum_iba._utils.ranking import RTOL, flat_rows, spread_said, tied_rows
from captum_iba.attr._seam import Site, layer_name, stack_above, stack_for

__all__ = [
    "TIE",
    "no_ranking",
    "nothing_above",
    "nothing_above_layers",
    "reads_first_token_only",
    "record",
    "say_if_flat",
    "token_flat_rows",
    "warning",
]


def _where(name: str, stack: Tuple[Module, int]) -> str:
    """``layer 'bert.encoder.layer.5' (the last of 0..5)``."""
    return f"{name} (the last of 0..{len(stack[0]) - 1})"


def _lower(stack: Tuple[Module, int]) -> str:
    """The layers to suggest instead: those below the last."""
    last = len(stack[0]) - 1
    return f"an earlier layer (0..{last - 1})" if last > 0 else "an earlier layer"


def nothing_above(name: str, stack: Optional[Tuple[Module, int]]) -> str:
    """Why ``removal="attention"`` after this layer ranks nothing ("" when
    layers above it read the tokens)."""
    if stack is None or stack[1] < len(stack[0]) - 1:
        return ""
    return (
        f"removal='attention' (config='deletion') at {_where(name, stack)}: no "
        "layer above it reads the tokens, so the mask changes nothing and every "
        "token gets the same score. Put it after the token embeddings "
        f"(layer='embeddings', the deletion configuration's default) or "
        f"{_lower(stack)}"
    )


def reads_first_token_only(
    forward_func: Any,
    layer: Module,
    position: Optional[int],
    inputs: Tuple[Tensor, ...],
    extra: Tuple[Any, ...],
    x: Tensor,
) -> bool:
    """Whether the model's output reads only the first row of ``layer`` 's
    output ``x`` ``(B, L, ...)``: it stays finite with rows 1.. set to NaN."""
    if x.dim() < 3 or x.shape[1] < 2 or not x.is_floating_point():
        return False

    def rest_unknown(out: Tensor) -> Tensor:
        probe = out.clone()
        probe[:, 1:] = float("nan")
        return probe

    with torch.no_grad(), replaced_by_hook(layer, rest_unknown, position):
        out = logits_of(_run_forward(forward_func, inputs, None, extra))
    return bool(torch.isfinite(out).all())


def first_token_reason(name: str, stack: Tuple[Module, int]) -> str:
    """Why IBA after a layer whose first row alone is read ranks nothing."""
    return (
        f"IBA at {_where(name, stack)}: the model's output reads only the first "
        "token of this layer's output ([CLS], as BERT's pooler does), so no other "
        "token can change the prediction and their scores are no ranking. Use "
        f"{_lower(stack)}, or the embeddings with config='deletion'"
    )


def token_flat_rows(
    attr: Tensor, mask: Tensor, removable: Optional[Tensor] = None
) -> List[int]:
    """The instances whose token scores (the attribution's mean over the
    features) are flat at the real tokens that are not special."""
    if attr.dim() < 2 or mask.dim() != 2:
        return []
    keep = mask.bool() if removable is None else mask.bool() & removable.bool()
    return flat_rows(attr.to(keep.device), keep)


def warning(name: str, reason: str, flat: Sequence[int], batch: int) -> str:
    """One warning for one layer: no ranking (``reason``) and the flat
    instances (indices into the batch)."""
    said = f"No ranking: {reason}" if reason else f"No ranking: IBA at {name}"
    if flat:
        shown = list(flat[:10]) + (["..."] if len(flat) > 10 else [])
        said += (
            f"; the scores of {len(flat)} of {batch} instance(s) {shown} are flat "
            f"({spread_said()})"
        )
    if not reason:
        said += (
            ": the bottleneck changes the prediction too little to tell the tokens "
            "apart (a layer the output barely reads, or a beta or prior that "
            "keeps everything). Try an earlier layer, or the embeddings with "
            "config='deletion'"
        )
    return said + "."


def nothing_above_layers(
    forward_func: Any,
    layer: Union[Module, List[Module]],
    options: Any,
    layer_stack: Any,
    device_ids: Optional[List[int]],
) -> List[str]:
    """Per layer, why ``removal="attention"`` there ranks nothing ("" where it
    does), before any forward pass.

    Raises:
        ValueError: For one layer (not a list: a layer sweep notes it).
    """
    layers = layer if isinstance(layer, list) else [layer]
    out = []
    for module in layers:
        reason = ""
        if options.removal == "attention" and not options.attribute_to_layer_input:
            stack = stack_for(forward_func, module, layer_stack, device_ids)
            reason = nothing_above(layer_name(forward_func, module), stack)
        if reason and not isinstance(layer, list):
            raise ValueError(reason + ".")
        out.append(reason)
    return out


def record(
    forward_func: Any,
    layers: List[Module],
    last_run: List[Dict[str, Any]],
    reasons: List[str],
    flats: List[List[int]],
    batch: int,
) -> None:
    """Records in ``last_run`` which layers and instances rank nothing
    (``no_ranking``, ``flat_instances``), and says it in one warning per
    layer (at the caller of ``attribute``)."""
    for k, info in enumerate(last_run):
        info.update(no_ranking=reasons[k], flat_instances=flats[k])
        if reasons[k] or flats[k]:
            name = layer_name(forward_func, layers[k])
            warnings.warn(
                warning(name, reasons[k], flats[k], batch), UserWarning, stacklevel=4
            )


#: Scores within this share of the median score are ties
#: (:data:`captum_iba._utils.ranking.RTOL`).
TIE = RTOL


def no_ranking(scores: Tensor, scored: Tensor) -> Tensor:
    """``(B,)`` bool: more than half of an instance's scored tokens tie with
    its median score (within :data:`TIE` of it): their order is the noise's,
    not a ranking - e.g. IBA's mask that barely moved from where it started
    (:func:`captum_iba._utils.ranking.tied_rows`).

    Args:
        scores (Tensor): ``(B, W)`` scores.
        scored (Tensor): ``(B, W)`` bool, the tokens ranked.
    """
    out = torch.zeros(scores.shape[0], dtype=torch.bool)
    out[tied_rows(scores, scored)] = True
    return out


def say_if_flat(flat: Tensor, iba: Any, options: Any) -> None:
    """One warning naming the instances whose scores give no ranking
    (:func:`no_ranking`) of a causal LM's answers explained by ``iba`` (an
    :class:`~captum_iba.attr.iba.InformationBottleneckAttribution`), and what
    to try instead."""
    if not flat.any():
        return
    rows = flat.nonzero().flatten().tolist()
    layer = layer_name(iba.forward_func, iba._layers[0])
    site = Site(iba._layers[0], layer, None, False)
    at_embeddings = stack_above(iba.forward_func, site)
    advice = (
        # issue 90, item 16: the deletion configuration already ran
        "the deletion configuration already ran: sources or tokens with the "
        "same text, or that the answer does not use, tie; give distinct "
        "sources, or compare another method"
        if options.removal == "attention"
        else "use config='deletion' (the default for causal LMs, docs/llm.rst)"
        + (
            ", or mask='token' (one weight per token: the noise of the "
            "features' gradients averages out)"
            if options.removal == "noise" and options.mask == "feature"
            else ""
        )
        if at_embeddings is not None
        else "bottleneck the token embeddings (layer='embeddings', the default) "
        "or use config='deletion' (docs/llm.rst)"
    )
    # mask="source": one weight per source, judged one per source
    what = "sources" if options.mask == "source" else "prompt tokens"
    warnings.warn(
        f"IBA at {layer} gives no ranking for instance(s) {rows}: most {what} "
        "have the same score (within 0.1 % of the median), so their "
        f"order is noise. On a decoder, {advice}.",
        UserWarning,
        stacklevel=3,
    )
