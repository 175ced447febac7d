r"""Noise priors: where :math:`\mu` and :math:`\sigma` of Eq. (2) come from.

The bottleneck replaces part of the layer output :math:`X` by noise
:math:`\epsilon \sim \mathcal{N}(\mu, \sigma^2)` and measures information against
:math:`Q(T) = \mathcal{N}(\mu, \sigma^2)`. Three choices are offered:

* :class:`PaperPrior` (``"paper"``) - the paper's text (Section 3): the
  per-feature mean and standard deviation of the instance's own layer output
  :math:`X`, over its real (non-padding) tokens.
* :class:`~captum_iba.attr.dataset_prior.DatasetPrior` (``"dataset"``) -
  Schulz et al. (2020): per-feature mean and standard deviation of the layer
  output over a data set (:mod:`captum_iba.attr.dataset_prior`).
* :class:`BaselinePrior` (``"baseline"``) - a deletion-like prior (not in the
  paper): :math:`\mu` = the layer's output on ``baselines`` (e.g. the input
  with every removable token replaced by [PAD]), per token and feature, and
  :math:`\sigma` the paper's per-feature standard deviation. The noise then
  moves a token's state towards what the layer computes without the token.
* :class:`ReferencePrior` (``"reference"``) - exactly what the paper's released
  code does: :math:`\mu` = the *input* of the same layer, per token and feature,
  and :math:`\sigma = \sqrt{10^{-5}}` everywhere. Use it to reproduce the paper's
  numbers.

Each prior maps an instance batch to ``(mean, std)`` tensors that broadcast
against the layer output of shape ``(B, L, *features)``. A prior is a complete
plug-in: its class says what it needs and prepares it - :meth:`NoisePrior.create`
builds a ready prior when it is resolved by name (the dataset prior fits
itself on data there), :meth:`NoisePrior.baselines` builds the inputs whose
layer output it takes its mean from. Names are registered in
:data:`captum_iba.registry.PRIORS` (the one list of prior names).
"""

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.common import removable_mask
from captum_iba.attr._prior_base import NoisePrior

# The prior fitted on data lives in its own module; its names stay importable
# from here too (documented there).
from captum_iba.attr.dataset_prior import DatasetPrior, WelfordEstimator  # noqa: F401
from captum_iba.registry import PRIORS

__all__ = [
    "PRIORS",
    "PRIOR_NAMES",
    "BaselinePrior",
    "NoisePrior",
    "PaperPrior",
    "PriorLike",
    "ReferencePrior",
    "resolve_prior",
]

PriorLike = Union[str, "NoisePrior"]


def _expand_mask(token_mask: Tensor, x: Tensor) -> Tensor:
    """(B, L) mask as float, broadcastable to ``x`` of shape (B, L, *features)."""
    return token_mask.to(x.dtype).reshape(token_mask.shape + (1,) * (x.dim() - 2))


def _check_mean_source(source: Optional[Tensor], x: Tensor, needs: str) -> None:
    """A prior's per-element mean must be a tensor of the layer output's shape."""
    if source is None or source.shape != x.shape:
        got = None if source is None else tuple(source.shape)
        raise ValueError(f"{needs}; got {got}.")


class PaperPrior(NoisePrior):
    r"""The paper's text: :math:`\mu_X, \sigma_X` of the instance's own layer output.

    The statistics are taken per instance, over the layer output's positions,
    by the output's rank:

    * ``(B, L, features)`` (a transformer layer): per feature, over the
      instance's real tokens (the paper); padding takes no part;
    * ``(B, C, *spatial)`` with two or more spatial dims (a conv layer): per
      channel, over the spatial positions;
    * ``(B, features)`` (a linear layer): one mean and std per instance, over
      its features.

    The standard deviation is the population one, floored.

    Args:
        std_floor (float, optional): Lower bound on :math:`\sigma` (a feature
            constant over the sentence would otherwise give zero). Default: 0.01.
    """

    name = "paper"

    def __init__(self, std_floor: float = 0.01) -> None:
        if not std_floor > 0:
            raise ValueError(f"std_floor must be > 0, got {std_floor}")
        self.std_floor = std_floor

    def statistics(
        self, x: Tensor, layer_input: Optional[Tensor], token_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        if x.dim() < 2:
            raise ValueError(
                "The 'paper' prior needs a layer output with positions or features "
                f"beyond the batch; got shape {tuple(x.shape)}."
            )
        if x.dim() == 2 or x.dim() >= 4:
            dims = (1,) if x.dim() == 2 else tuple(range(2, x.dim()))
            mean = x.mean(dim=dims, keepdim=True)
            var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
            return mean, var.sqrt().clamp_min(self.std_floor)
        m = _expand_mask(token_mask, x)
        count = m.sum(dim=1, keepdim=True)
        mean = (x * m).sum(dim=1, keepdim=True) / count
        var = (((x - mean) * m) ** 2).sum(dim=1, keepdim=True) / count
        return mean, var.sqrt().clamp_min(self.std_floor)

    def __repr__(self) -> str:
        return f"PaperPrior(std_floor={self.std_floor})"


class ReferencePrior(NoisePrior):
    r"""What the paper's released code does.

    :math:`\mu` = the layer's input (Hugging Face ``hidden_states[l]`` for the
    output of layer ``l``), per token and feature, and :math:`\sigma = \sqrt{v}`
    with ``v = 1e-5`` everywhere (a running estimator fed one sample, floored).
    The bottleneck then computes
    :math:`\lambda X_{out} + (1 - \lambda)(X_{in} + 0.0032\, z)`.

    Args:
        variance (float, optional): :math:`\sigma^2`. Default: 1e-5.
    """

    name = "reference"
    needs_layer_input = True

    def __init__(self, variance: float = 1e-5) -> None:
        if not variance > 0:
            raise ValueError(f"variance must be > 0, got {variance}")
        self.variance = variance

    def statistics(
        self, x: Tensor, layer_input: Optional[Tensor], token_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        _check_mean_source(
            layer_input,
            x,
            "The 'reference' prior uses the layer's input as the noise mean, so "
            "the layer must take a hidden-state tensor of its output's shape "
            f"{tuple(x.shape)} as its first argument",
        )
        std = torch.full((1,) * x.dim(), self.variance**0.5, device=x.device)
        return layer_input.to(x.dtype), std

    def __repr__(self) -> str:
        return f"ReferencePrior(variance={self.variance})"


class BaselinePrior(NoisePrior):
    r"""A deletion-like prior: :math:`\mu` = the layer's output on baselines.

    :math:`\mu_{l,h}` is the layer's output at token :math:`l`, feature
    :math:`h` when the model is run on ``baselines`` (an argument of
    :meth:`~captum_iba.InformationBottleneckAttribution.attribute`, e.g. the
    token ids with every removable token replaced by [PAD], as fair IG's
    baseline), and :math:`\sigma_h` the per-feature standard deviation of the
    instance's own output over its real tokens (as :class:`PaperPrior`).
    Replacing a token's state by noise then moves it towards what the layer
    computes when the token is removed, which is what the degradation test
    does to it. Not in the paper.

    Args:
        std_floor (float, optional): Lower bound on :math:`\sigma`.
            Default: 0.01.
    """

    name = "baseline"
    needs_baseline = True

    def __init__(self, std_floor: float = 0.01) -> None:
        self._paper = PaperPrior(std_floor)

    def baselines(
        self,
        input_ids: Tensor,
        token_mask: Optional[Tensor],
        pad_token_id: Optional[int],
        special_token_ids: Sequence[int] = (),
    ) -> Optional[Tensor]:
        """What deletion leaves: every real token that is not special replaced
        by ``pad_token_id`` (special tokens and padding kept).

        Args:
            input_ids (Tensor): ``(B, L)`` token ids.
            token_mask (Tensor, optional): ``(B, L)``, 1 at real tokens.
            pad_token_id (int): The padding id.
            special_token_ids (Sequence[int]): Ids never replaced.

        Raises:
            ValueError: When the padding id is unknown or the ids are not
                ``(B, L)`` integers.
        """
        if pad_token_id is None:
            raise ValueError(
                "prior='baseline' replaces the removable tokens by padding: the "
                "pad token id is unknown, pass pad_token_id= or baselines=."
            )
        if input_ids.dim() != 2 or input_ids.is_floating_point():
            raise ValueError(
                "prior='baseline' builds its baselines from (B, L) token ids; got "
                f"{input_ids.dtype} of shape {tuple(input_ids.shape)}: pass "
                "baselines= instead."
            )
        removable = removable_mask(input_ids, token_mask, special_token_ids)
        return input_ids.masked_fill(removable, int(pad_token_id))

    def statistics(
        self,
        x: Tensor,
        layer_input: Optional[Tensor],
        token_mask: Tensor,
        baseline: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Tensor]:
        _check_mean_source(
            baseline,
            x,
            "prior='baseline' takes its mean from the layer's output on "
            "`baselines`: pass baselines= (inputs of the same shape) to "
            f"attribute; the layer output has shape {tuple(x.shape)}",
        )
        return baseline.to(x.dtype), self._paper.statistics(x, None, token_mask)[1]

    def __repr__(self) -> str:
        return f"BaselinePrior(std_floor={self._paper.std_floor})"


#: The names of the registered priors (:data:`captum_iba.registry.PRIORS`).
PRIOR_NAMES: Tuple[str, ...] = tuple(PRIORS.names())


def resolve_prior(
    prior: PriorLike,
    forward_func: Optional[Callable[..., Any]] = None,
    layer: Optional[Module] = None,
    data: Any = None,
) -> NoisePrior:
    """A :class:`NoisePrior` from its registered name (any case) or itself.

    Args:
        prior (str or NoisePrior): The prior or its name
            (:data:`captum_iba.registry.PRIORS`).
        forward_func (Callable, optional): The model, for priors prepared from
            data (``needs_data``).
        layer (Module, optional): The bottlenecked layer, likewise.
        data (Iterable or Callable, optional): Batches to fit on, or a
            function returning them (called only for a prior that needs data).

    Returns:
        NoisePrior: The prior object.

    Raises:
        ValueError: For an unknown name, or a prior that needs data without it.
    """
    if isinstance(prior, NoisePrior):
        return prior
    if not isinstance(prior, str) or prior not in PRIORS:
        raise ValueError(
            f"Unknown prior {prior!r}; use one of {list(PRIORS.names())}, or a "
            "NoisePrior instance such as DatasetPrior.fit(...)."
        )
    return PRIORS.load(prior).create(forward_func, layer, data)
