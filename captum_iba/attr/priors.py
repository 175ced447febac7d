r"""Noise priors: where :math:`\mu` and :math:`\sigma` of Eq. (2) come from.

The bottleneck replaces part of the layer output :math:`X` by noise
:math:`\epsilon \sim \mathcal{N}(\mu, \sigma^2)` and measures information against
:math:`Q(T) = \mathcal{N}(\mu, \sigma^2)`. Three choices are offered:

* :class:`PaperPrior` (``"paper"``) - the paper's text (Section 3): the
  per-feature mean and standard deviation of the instance's own layer output
  :math:`X`, over its real (non-padding) tokens.
* :class:`DatasetPrior` (``"dataset"``) - Schulz et al. (2020): per-feature mean
  and standard deviation of the layer output over a data set, estimated with
  Welford's algorithm over the real tokens of a data loader, with a floor on
  :math:`\sigma`. Fit it once with :meth:`DatasetPrior.fit`.
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
against the layer output of shape ``(B, L, *features)``.
"""

import abc
import os
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.hooks import recorded
from captum_iba._utils.io import atomic_write

__all__ = [
    "PRIORS",
    "PRIOR_NAMES",
    "BaselinePrior",
    "DatasetPrior",
    "NoisePrior",
    "PaperPrior",
    "PriorLike",
    "ReferencePrior",
    "WelfordEstimator",
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


class NoisePrior(abc.ABC):
    """Base class of the noise priors.

    Subclasses implement :meth:`statistics`.
    """

    #: Short name used in strings, results and error messages.
    name: str = ""
    #: Whether :meth:`statistics` needs the layer's input.
    needs_layer_input: bool = False
    #: Whether :meth:`statistics` needs the layer's output on ``baselines``
    #: (passed as the keyword ``baseline``).
    needs_baseline: bool = False

    @abc.abstractmethod
    def statistics(
        self, x: Tensor, layer_input: Optional[Tensor], token_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        """Mean and standard deviation of the noise for a batch.

        Args:
            x (Tensor): The layer output, shape (B, L, *features), float32.
            layer_input (Tensor or None): The layer's input, when captured.
            token_mask (Tensor): (B, L) bool, True at real tokens.

        Returns:
            (mean, std): Tensors broadcastable to ``x``; ``std > 0``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


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


class WelfordEstimator:
    """Running per-feature mean and variance (Welford / Chan et al. merge).

    Feed it batches of feature vectors with :meth:`update`; read
    :attr:`mean` and :meth:`std`. Numerically stable for long streams.

    Args:
        num_features (int): Size of the feature vectors.
    """

    def __init__(self, num_features: int) -> None:
        self.count = 0
        self.mean = torch.zeros(num_features, dtype=torch.float64)
        self._m2 = torch.zeros(num_features, dtype=torch.float64)

    def update(self, values: Tensor) -> None:
        """Add rows of ``values`` (N, num_features)."""
        values = values.detach().to(torch.float64).cpu()
        n = values.shape[0]
        if n == 0:
            return
        batch_mean = values.mean(dim=0)
        batch_m2 = ((values - batch_mean) ** 2).sum(dim=0)
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * (n / total)
        self._m2 = self._m2 + batch_m2 + delta**2 * (self.count * n / total)
        self.count = total

    def std(self, floor: float = 0.0) -> Tensor:
        """Population standard deviation per feature, at least ``floor``."""
        if self.count == 0:
            raise ValueError("WelfordEstimator has seen no values.")
        return (self._m2 / self.count).sqrt().clamp_min(floor)


#: The ``format`` metadata of :meth:`DatasetPrior.save`'s files.
_PRIOR_FORMAT = "captum_iba.DatasetPrior/1"


class DatasetPrior(NoisePrior):
    r"""Per-feature :math:`\mu, \sigma` of the layer output over a data set.

    As in Schulz et al. (2020). Build it with :meth:`fit`, or from tensors;
    keep it with :meth:`save` and :meth:`load` (safetensors, no pickle).

    Args:
        mean (Tensor): Per-feature mean, shape ``features``.
        std (Tensor): Per-feature standard deviation (> 0), same shape.
        count (int, optional): How many token vectors were seen.
    """

    name = "dataset"

    def __init__(self, mean: Tensor, std: Tensor, count: int = 0) -> None:
        if not isinstance(mean, Tensor) or not isinstance(std, Tensor):
            raise TypeError("DatasetPrior needs mean and std as Tensors.")
        if mean.shape != std.shape:
            raise ValueError(f"mean and std shapes differ: {mean.shape} vs {std.shape}")
        if not bool(torch.isfinite(mean).all()) or not bool(torch.isfinite(std).all()):
            raise ValueError("DatasetPrior needs finite mean and std (no NaN or inf).")
        if not bool((std > 0).all()):
            raise ValueError("DatasetPrior needs std > 0 everywhere.")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an integer >= 0, got {count!r}")
        self.mean = mean.float()
        self.std = std.float()
        self.count = count

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Saves the prior as a safetensors file (no pickle), atomically.

        Args:
            path (str or PathLike): The file, e.g. ``"prior_layer3.safetensors"``.

        Examples::

            >>> prior = DatasetPrior.fit(model, layer, loader)
            >>> prior.save("prior.safetensors")
            >>> prior = DatasetPrior.load("prior.safetensors")
        """
        from safetensors.torch import save

        data = save(
            {"mean": self.mean.contiguous(), "std": self.std.contiguous()},
            metadata={"format": _PRIOR_FORMAT, "count": str(self.count)},
        )
        with atomic_write(path, "wb") as fh:
            fh.write(data)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "DatasetPrior":
        """Loads a prior saved by :meth:`save`; nothing is unpickled.

        Args:
            path (str or PathLike): The safetensors file.

        Returns:
            DatasetPrior: The prior.

        Raises:
            FileNotFoundError: Naming the file, when there is none.
            ValueError: Naming the file, when it is not a prior saved by
                :meth:`save`, or its statistics are not finite or std <= 0.
        """
        from safetensors import SafetensorError, safe_open

        where = os.fspath(path)
        if not os.path.isfile(where):
            raise FileNotFoundError(f"{where}: no such file")
        try:
            with safe_open(where, "pt") as handle:
                meta = handle.metadata() or {}
                tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        except (OSError, SafetensorError, ValueError) as err:
            raise ValueError(f"{where}: not a safetensors file ({err})") from None
        if meta.get("format") != _PRIOR_FORMAT or set(tensors) != {"mean", "std"}:
            raise ValueError(f"{where}: not a DatasetPrior saved by DatasetPrior.save")
        try:
            return cls(tensors["mean"], tensors["std"], int(meta.get("count", "0")))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None

    def statistics(
        self, x: Tensor, layer_input: Optional[Tensor], token_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        feat = tuple(x.shape[2:]) if x.dim() >= 3 else tuple(x.shape[1:])
        if tuple(self.mean.shape) != feat:
            raise ValueError(
                f"DatasetPrior was fitted on features of shape "
                f"{tuple(self.mean.shape)}, but the layer output has {feat}."
            )
        return self.mean.to(x.device), self.std.to(x.device)

    @classmethod
    def fit(
        cls,
        forward_func: Callable[..., Any],
        layer: Module,
        data: Iterable[Any],
        std_floor: float = 0.01,
        max_batches: Optional[int] = None,
        device: Optional[Union[str, torch.device]] = None,
    ) -> "DatasetPrior":
        """Estimate the prior from the layer's outputs over ``data``.

        Each element of ``data`` is a batch: a ``dict`` (called as
        ``forward_func(**batch)``; its ``"attention_mask"``, when present,
        selects the real tokens), a tuple/list (``forward_func(*batch)``; a
        second element is taken as the attention mask when it has the token
        shape) or a Tensor. Runs under ``torch.no_grad()``.

        Args:
            forward_func (Callable): The model or forward function.
            layer (Module): The layer whose output is bottlenecked.
            data (Iterable): Batches, e.g. a ``DataLoader``.
            std_floor (float, optional): Lower bound on the std. Default: 0.01.
            max_batches (int, optional): Stop after this many batches.
            device (str or torch.device, optional): Move tensors there first.

        Returns:
            DatasetPrior: The fitted prior.
        """
        estimator: Optional[WelfordEstimator] = None
        for i, batch in enumerate(data):
            if max_batches is not None and i >= max_batches:
                break
            batch = _to_device(batch, device)
            with torch.no_grad(), recorded([layer]) as records:
                if isinstance(batch, dict):
                    forward_func(**batch)
                    mask = batch.get("attention_mask")
                elif isinstance(batch, (tuple, list)):
                    forward_func(*batch)
                    mask = batch[1] if len(batch) > 1 else None
                else:
                    forward_func(batch)
                    mask = None
            if records[layer].calls == 0:
                raise RuntimeError("The layer was not run by the forward function.")
            x, _ = records[layer].gathered(None)
            x = x.float()
            if (
                x.dim() >= 3
                and isinstance(mask, Tensor)
                and tuple(mask.shape) == tuple(x.shape[:2])
            ):
                rows = x[mask.bool()]
            else:
                rows = x.reshape(-1, *x.shape[2:]) if x.dim() >= 3 else x
            rows = rows.reshape(rows.shape[0], -1)
            if estimator is None:
                estimator = WelfordEstimator(rows.shape[1])
            estimator.update(rows)
        if estimator is None or estimator.count == 0:
            raise ValueError("DatasetPrior.fit got no data.")
        feat = tuple(x.shape[2:]) if x.dim() >= 3 else tuple(x.shape[1:])
        return cls(
            estimator.mean.float().reshape(feat),
            estimator.std(std_floor).float().reshape(feat),
            count=estimator.count,
        )

    def __repr__(self) -> str:
        return f"DatasetPrior(features={tuple(self.mean.shape)}, count={self.count})"


def _to_device(batch: Any, device: Optional[Union[str, torch.device]]) -> Any:
    if device is None:
        return batch
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


#: The priors known by name: the one list of prior names. ``"dataset"`` needs
#: statistics fitted on data (see :func:`resolve_prior`'s ``fit``).
PRIORS: Dict[str, type] = {
    "paper": PaperPrior,
    "reference": ReferencePrior,
    "dataset": DatasetPrior,
    "baseline": BaselinePrior,
}
PRIOR_NAMES: Tuple[str, ...] = tuple(PRIORS)


def resolve_prior(
    prior: PriorLike, fit: Optional[Callable[[], "DatasetPrior"]] = None
) -> NoisePrior:
    """A :class:`NoisePrior` from its name (one of :data:`PRIOR_NAMES`) or itself.

    Args:
        prior (str or NoisePrior): The prior or its name.
        fit (Callable, optional): Returns a fitted :class:`DatasetPrior`; called
            only for ``"dataset"`` (e.g. ``lambda: DatasetPrior.fit(model,
            layer, loader)``).

    Returns:
        NoisePrior: The prior object.

    Raises:
        ValueError: For an unknown name, or ``"dataset"`` without ``fit``.
    """
    if isinstance(prior, NoisePrior):
        return prior
    if prior == "dataset":
        if fit is None:
            raise ValueError(
                "prior='dataset' needs fitted statistics: pass "
                "DatasetPrior.fit(model, layer, data_loader) instead of the string."
            )
        return fit()
    if isinstance(prior, str) and prior in PRIORS:
        return PRIORS[prior]()
    raise ValueError(
        f"Unknown prior {prior!r}; use one of {list(PRIOR_NAMES)}, or a "
        "NoisePrior instance such as DatasetPrior.fit(...)."
    )
