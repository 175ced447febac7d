r"""What the model-randomisation sanity check measured, and the rank correlation.

:func:`rank_correlation` is the similarity of Adebayo et al. (2018), Section 3:
Spearman's :math:`\rho` between two attribution maps of one instance, over its
real, non-special tokens, on the signed scores and on their absolute values.
:class:`RandomizationResult` keeps one value per stage of the cascade and per
instance, with the means, 95 % bootstrap intervals, and a JSON round trip.
"""

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from scipy.stats import rankdata
from torch import Tensor

from captum_iba._utils.io import dump_json, read_json
from captum_iba.version import __version__

__all__ = ["VARIANTS", "RandomizationResult", "rank_correlation"]

_FORMAT = "captum_iba.RandomizationResult/1"

#: The two similarities of Adebayo et al.: Spearman's rho of the signed scores
#: and of their absolute values (the same for scores that are never negative,
#: such as IBA's).
VARIANTS = ("spearman", "spearman_abs")


@torch.no_grad()
def rank_correlation(
    reference: Tensor, other: Tensor, compared: Tensor, absolute: bool = False
) -> Tensor:
    """Spearman's rho per instance between two ``(B, L)`` attribution maps.

    Ranks are taken over the positions where ``compared`` is True (ties get
    their average rank); rho is the Pearson correlation of the ranks.

    Args:
        reference (Tensor): ``(B, L)`` scores (e.g. of the trained model).
        other (Tensor): ``(B, L)`` scores (e.g. of a randomised model).
        compared (Tensor): ``(B, L)`` bool, the tokens compared (real,
            non-special).
        absolute (bool): Rank ``|scores|`` instead of the signed scores.
            Default False.

    Returns:
        Tensor: ``(B,)`` float64 in [-1, 1]; NaN for an instance with fewer
        than two compared tokens or whose scores are constant on either side
        (rho is undefined there).

    Raises:
        ValueError: When the shapes differ.
    """
    if reference.shape != other.shape or reference.shape != compared.shape:
        raise ValueError(
            f"shapes differ: reference {tuple(reference.shape)}, other "
            f"{tuple(other.shape)}, compared {tuple(compared.shape)}"
        )
    a = reference.detach().cpu().double().numpy()
    b = other.detach().cpu().double().numpy()
    keep = compared.detach().cpu().bool().numpy()
    if absolute:
        a, b = np.abs(a), np.abs(b)
    out = np.full(a.shape[0], np.nan)
    for i in range(a.shape[0]):
        x, y = a[i][keep[i]], b[i][keep[i]]
        if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        out[i] = np.corrcoef(rankdata(x), rankdata(y))[0, 1]
    return torch.from_numpy(out)


@dataclass
class RandomizationResult:
    """The cascading model-randomisation check of one attribution method.

    Stage ``s`` is the model with stages ``0..s`` of the cascade re-initialised
    (top first); every value compares the attributions of that model with the
    trained model's, for the same instance and the same target class.

    Attributes:
        stages (list[str]): The stages in cascade order (e.g. ``"head"``,
            ``"layer 5"`` ... ``"layer 0"``, ``"embeddings"``).
        spearman (Tensor): ``(S, B)`` Spearman's rho of the signed scores (NaN
            where undefined, see :func:`rank_correlation`).
        spearman_abs (Tensor): ``(S, B)`` the same on absolute values.
        target (Tensor): ``(B,)`` the class explained, the same at every stage.
        n_tokens (Tensor): ``(B,)`` tokens compared per instance.
        predictions (Tensor): ``(S + 1, B)`` the predicted class, trained model
            first.
        target_probs (Tensor): ``(S + 1, B)`` the softmax probability of
            ``target``, trained model first.
        randomized (list[list[str]]): Per stage, the parameters it
            re-initialised.
        method (str): The attribution method's name.
        settings (dict): How the check ran (seed, stage modules, CPU-seconds,
            ...).
    """

    stages: List[str]
    spearman: Tensor
    spearman_abs: Tensor
    target: Tensor
    n_tokens: Tensor
    predictions: Tensor
    target_probs: Tensor
    randomized: List[List[str]]
    method: str = ""
    settings: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        S, B = len(self.stages), int(self.target.numel())
        for name in VARIANTS:
            if tuple(getattr(self, name).shape) != (S, B):
                raise ValueError(
                    f"{name} has shape {tuple(getattr(self, name).shape)}, expected "
                    f"({S}, {B}) for {S} stages and {B} instances"
                )
        for name in ("predictions", "target_probs"):
            if tuple(getattr(self, name).shape) != (S + 1, B):
                raise ValueError(
                    f"{name} has shape {tuple(getattr(self, name).shape)}, "
                    f"expected ({S + 1}, {B}): the trained model, then each stage"
                )
        if len(self.randomized) != S or self.n_tokens.numel() != B:
            raise ValueError("randomized needs one list per stage, n_tokens one count")

    @property
    def num_instances(self) -> int:
        """int: The number of instances ``B``."""
        return int(self.target.numel())

    def values(self, variant: str = "spearman_abs") -> Tensor:
        """The ``(S, B)`` correlations of ``variant`` (one of :data:`VARIANTS`)."""
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}; got {variant!r}")
        return getattr(self, variant)

    def mean(self, variant: str = "spearman_abs") -> Tensor:
        """``(S,)`` mean correlation per stage over the instances where it is
        defined (NaN for a stage where it is defined for none)."""
        return self.values(variant).nanmean(dim=1)

    def defined(self, variant: str = "spearman_abs") -> Tensor:
        """``(S,)`` how many instances have a defined correlation per stage."""
        return (~self.values(variant).isnan()).sum(dim=1)

    def interval(
        self,
        variant: str = "spearman_abs",
        n_bootstrap: int = 1000,
        level: float = 0.95,
        seed: int = 0,
    ) -> Tensor:
        """Percentile bootstrap interval of each stage's mean (instances resampled).

        Args:
            variant (str): One of :data:`VARIANTS`. Default ``"spearman_abs"``.
            n_bootstrap (int): Resamples. Default 1000.
            level (float): Coverage. Default 0.95.
            seed (int): Seed of the resampling. Default 0.

        Returns:
            Tensor: ``(S, 2)`` lower and upper bounds (NaN where no value is
            defined).
        """
        if n_bootstrap < 1 or not 0 < level < 1:
            raise ValueError("n_bootstrap must be >= 1 and level in (0, 1)")
        rng = np.random.default_rng(seed)
        q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
        out = np.full((len(self.stages), 2), np.nan)
        for s, row in enumerate(self.values(variant).numpy()):
            row = row[~np.isnan(row)]
            if row.size:
                idx = rng.integers(0, row.size, size=(n_bootstrap, row.size))
                out[s] = np.percentile(row[idx].mean(axis=1), q)
        return torch.from_numpy(out)

    def agreement(self) -> Tensor:
        """``(S,)`` share of instances whose predicted class at each stage is
        the trained model's (how far the model has been destroyed)."""
        return (self.predictions[1:] == self.predictions[0]).double().mean(dim=1)

    def summary(self, variant: str = "spearman_abs") -> List[Dict[str, Any]]:
        """One row per stage: mean, interval, defined count, agreement.

        Args:
            variant (str): One of :data:`VARIANTS`. Default ``"spearman_abs"``.

        Returns:
            list[dict]: ``stage``, ``mean``, ``low``, ``high``, ``defined``,
            ``agreement`` and ``target_prob`` (mean probability of the target).
        """
        mean, ci = self.mean(variant), self.interval(variant)
        defined, agree = self.defined(variant), self.agreement()
        probs = self.target_probs[1:].double().mean(dim=1)
        return [
            {
                "stage": name,
                "mean": float(mean[s]),
                "low": float(ci[s, 0]),
                "high": float(ci[s, 1]),
                "defined": int(defined[s]),
                "agreement": float(agree[s]),
                "target_prob": float(probs[s]),
            }
            for s, name in enumerate(self.stages)
        ]

    def to_markdown(self, variant: str = "spearman_abs", digits: int = 3) -> str:
        """A Markdown table of :meth:`summary`."""
        lines = [
            f"| stage | {variant} [95 % CI] | n | prediction kept | p(target) |",
            "|---|---:|---:|---:|---:|",
        ]
        for row in self.summary(variant):
            lines.append(
                f"| {row['stage']} | {row['mean']:.{digits}f} "
                f"[{row['low']:.{digits}f}, {row['high']:.{digits}f}] "
                f"| {row['defined']} | {row['agreement']:.{digits}f} "
                f"| {row['target_prob']:.{digits}f} |"
            )
        return "\n".join(lines)

    # ---- persistence -----------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serialisable dict (NaN written as null)."""
        return {
            "format": _FORMAT,
            "captum_iba_version": __version__,
            "method": self.method,
            "stages": list(self.stages),
            "spearman": _nan_to_none(self.spearman),
            "spearman_abs": _nan_to_none(self.spearman_abs),
            "target": self.target.tolist(),
            "n_tokens": self.n_tokens.tolist(),
            "predictions": self.predictions.tolist(),
            "target_probs": self.target_probs.tolist(),
            "randomized": [list(names) for names in self.randomized],
            "settings": json.loads(json.dumps(self.settings, default=repr)),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RandomizationResult":
        """Rebuild a result from :meth:`to_dict`'s output.

        Raises:
            ValueError: When ``format`` is not this class's, a field is missing
                or not numeric, or the shapes disagree.
        """
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data)
            raise ValueError(f"format is {found!r}, expected {_FORMAT!r}")
        fields = ("stages", "target", "n_tokens", "predictions", "target_probs")
        missing = [k for k in fields + VARIANTS + ("randomized",) if k not in data]
        if missing:
            raise ValueError(f"missing field(s) {missing}")
        try:
            return cls(
                stages=[str(s) for s in data["stages"]],
                spearman=_none_to_nan(data["spearman"], len(data["stages"])),
                spearman_abs=_none_to_nan(data["spearman_abs"], len(data["stages"])),
                target=torch.tensor(data["target"], dtype=torch.long),
                n_tokens=torch.tensor(data["n_tokens"], dtype=torch.long),
                predictions=torch.tensor(data["predictions"], dtype=torch.long),
                target_probs=torch.tensor(data["target_probs"], dtype=torch.float64),
                randomized=[[str(n) for n in names] for names in data["randomized"]],
                method=str(data.get("method", "")),
                settings=dict(data.get("settings") or {}),
            )
        except (TypeError, RuntimeError) as err:
            raise ValueError(f"a field is not numeric: {err}") from None

    def to_json(self, path: Optional[Union[str, os.PathLike]] = None) -> str:
        """Serialise to JSON; also write it atomically to ``path`` when given."""
        return dump_json(self.to_dict(), path)

    @classmethod
    def from_json(cls, source: Union[str, os.PathLike]) -> "RandomizationResult":
        """Load a result from JSON text or from the path of a file holding it.

        Raises:
            FileNotFoundError: Naming the file, when there is none.
            ValueError: Naming the file, for text that is not such a result.
        """
        data, where = read_json(source, "RandomizationResult")
        try:
            return cls.from_dict(data)
        except ValueError as err:
            raise ValueError(f"{where}: not a RandomizationResult: {err}") from None


def _nan_to_none(values: Tensor) -> List[List[Optional[float]]]:
    return [[None if math.isnan(v) else v for v in row] for row in values.tolist()]


def _none_to_nan(rows: Sequence[Sequence[Optional[float]]], stages: int) -> Tensor:
    data = [[math.nan if v is None else float(v) for v in row] for row in rows]
    out = torch.tensor(data, dtype=torch.float64)
    return out.reshape(stages, -1) if out.numel() else out.reshape(stages, 0)
