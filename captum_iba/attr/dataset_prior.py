r"""The dataset prior (Schulz et al., 2020): per-feature noise statistics of a
layer's output over a data set, estimated once and kept as a safetensors file.

:class:`DatasetPrior` is registered as ``"dataset"``
(:data:`captum_iba.registry.PRIORS`); it is the prior that must be prepared
from data: :meth:`DatasetPrior.create` fits it when a prior is resolved by
name (see :func:`captum_iba.attr.priors.resolve_prior`).
"""

import os
from typing import Any, Callable, Iterable, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Module

from captum_iba._utils.hooks import recorded
from captum_iba._utils.io import atomic_write
from captum_iba.attr._prior_base import NoisePrior

__all__ = ["DatasetPrior", "WelfordEstimator"]


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
    needs_data = True

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
    def create(
        cls,
        forward_func: Optional[Callable[..., Any]] = None,
        layer: Optional[Module] = None,
        data: Any = None,
    ) -> "DatasetPrior":
        """Fits the prior on ``data`` (see :meth:`fit`) when resolved by name.

        Args:
            forward_func (Callable): The model or forward function.
            layer (Module): The bottlenecked layer.
            data (Iterable or Callable): Batches as :meth:`fit` takes them, or
                a function returning them (called only here).

        Raises:
            ValueError: When the model, the layer or the data is missing.
        """
        if forward_func is None or layer is None or data is None:
            raise ValueError(
                "prior='dataset' needs data to fit its statistics on: give the "
                "training data where the prior is resolved (e.g. prior_data= or "
                "--priors dataset with a corpus), or pass "
                "DatasetPrior.fit(model, layer, data_loader) instead of the name."
            )
        batches = data() if callable(data) else data
        return cls.fit(forward_func, layer, batches)

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
