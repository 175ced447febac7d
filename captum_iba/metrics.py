r"""The degradation test of Jiang et al. (2020), Section 4.1, for token attributions.

The test asks how fast a classifier's confidence in a target class falls when the
tokens an attribution method ranks highest are removed:

1. score every token with an attribution method (IBA, any Captum method, or scores
   computed elsewhere);
2. sort the tokens by score (most relevant first, or least relevant first);
3. remove the first ``k`` tokens, for every removal level ``k``;
4. record the softmax probability of the target class on the degraded input, with
   the original model.

:func:`degradation_test` runs it on token ids (no decoding, no re-tokenising) and
returns a :class:`DegradationResult` that holds the per-instance probabilities and
predicted labels and computes the aggregates people report (the mean curve, the
absolute drop at the first level of Table 1, AOPC, ERASER comprehensiveness and
sufficiency, log-odds, accuracy). :func:`compare` puts several results side by side,
with the normalised drop :math:`\bar d = (\bar p - m) / (o - m)` of Figure 1, where
:math:`m` is the lowest fully degraded mean probability across the methods compared.

How many tokens a level removes (``k``), precisely:

* ``level_unit="fraction"`` and ``length_convention="tokens"`` (the default):
  :math:`k = \lfloor f \cdot n + 1/2 \rfloor` (round half up), where :math:`n` is the
  number of *removable* tokens of the instance: not padding and, when
  ``keep_special_tokens`` is True, not a special token.
* ``level_unit="fraction"`` and ``length_convention="paper"``: the paper's code takes
  the fraction of the *full* length, special tokens counted:
  :math:`k = \min(\lfloor f \cdot n_{full} \rfloor, n)`, :math:`n_{full}` the number
  of non-padding tokens ([CLS] and [SEP] included). The special tokens are still never
  removed, so at :math:`f = 1` every removable token is gone.
* ``level_unit="count"``: :math:`k = \min(c, n)` for a non-negative integer ``c``.

``k`` is recorded per instance and level in :attr:`DegradationResult.n_removed`.
"""

import json
import numbers
import os
import warnings
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import torch
from captum.log import log_usage
from torch import Tensor

from captum_iba._utils.common import logits_of
from captum_iba.version import __version__

__all__ = [
    "PAPER_LEVELS",
    "DegradationResult",
    "Comparison",
    "degradation_test",
    "compare",
]

#: The paper's removal levels: k/9 of the length for k = 1..9.
PAPER_LEVELS: Tuple[float, ...] = tuple(k / 9 for k in range(1, 10))

_REMOVAL_MODES = ("delete", "mask", "pad", "unk")
_ORDERS = ("morf", "lerf")
_LENGTH_CONVENTIONS = ("tokens", "paper")
_LEVEL_UNITS = ("fraction", "count")
# Guards floor() against products like 3/9 * 18 = 5.999999999999999.
_EPS = 1e-9

TargetLike = Union[None, int, Sequence[int], Tensor]


# --------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------


def _mean(x: Tensor) -> float:
    return float(x.double().mean()) if x.numel() else float("nan")


@dataclass
class DegradationResult:
    """Per-instance outcome of a degradation test, with the usual aggregates.

    All tensors live on the CPU. ``B`` is the number of instances, ``K`` the number of
    removal levels.

    Attributes:
        levels (list): The removal levels, as given (fractions or counts, see
            ``settings["level_unit"]``).
        target (Tensor): ``(B,)`` long, the class whose probability is tracked.
        original_probs (Tensor): ``(B,)`` float64, target probability on the
            original input (``o`` per instance).
        original_preds (Tensor): ``(B,)`` long, predicted label on the original input.
        original_log_odds (Tensor): ``(B,)`` float64,
            ``log p(target) - log(1 - p(target))`` on the original input.
        probs (Tensor): ``(B, K)`` float64, target probability after removing the
            first ``k`` tokens of the order at each level.
        preds (Tensor): ``(B, K)`` long, predicted label at each level.
        log_odds (Tensor): ``(B, K)`` float64, target log-odds at each level.
        n_tokens (Tensor): ``(B,)`` long, the number of removable tokens ``n``.
        n_removed (Tensor): ``(B, K)`` long, the ``k`` used per instance and level.
        kept_probs (Tensor, optional): ``(B, K)`` float64, target probability when
            ONLY the first ``k`` tokens of the order are kept (every other removable
            token removed); used by :attr:`sufficiency`. None when not computed.
        settings (dict): How the test was run (removal mode, levels, order, target,
            method, seed, and any settings of the attribution method).
    """

    levels: List[Union[float, int]]
    target: Tensor
    original_probs: Tensor
    original_preds: Tensor
    original_log_odds: Tensor
    probs: Tensor
    preds: Tensor
    log_odds: Tensor
    n_tokens: Tensor
    n_removed: Tensor
    kept_probs: Optional[Tensor] = None
    settings: Dict[str, Any] = field(default_factory=dict)

    # ---- sizes -----------------------------------------------------------------------
    @property
    def num_instances(self) -> int:
        """int: Number of instances ``B``."""
        return int(self.probs.shape[0])

    @property
    def num_levels(self) -> int:
        """int: Number of removal levels ``K``."""
        return int(self.probs.shape[1])

    @property
    def method(self) -> Optional[str]:
        """str or None: The attribution method's name, from ``settings``."""
        return self.settings.get("method")

    # ---- curves ----------------------------------------------------------------------
    @property
    def original_probability(self) -> float:
        """float: ``o``, the mean target probability on the original inputs."""
        return _mean(self.original_probs)

    @property
    def curve(self) -> Tensor:
        """Tensor: ``(K,)`` mean target probability at each level."""
        return self.probs.double().mean(0)

    @property
    def full_curve(self) -> Tensor:
        """Tensor: ``(K + 1,)`` the mean curve with ``o`` (level 0) prepended."""
        return torch.cat(
            [self.original_probs.double().mean(0, keepdim=True), self.curve]
        )

    @property
    def drop_curve(self) -> Tensor:
        """Tensor: ``(K,)`` mean drop ``o - p`` at each level (positive = a drop)."""
        return (self.original_probs.double()[:, None] - self.probs.double()).mean(0)

    def absolute_drop(self, level_index: int = 0) -> float:
        """Mean drop of the target probability at one level (Table 1 of the paper).

        Args:
            level_index (int): Index into :attr:`levels`. Default 0, the first level
                (11.1 % with the paper's levels).

        Returns:
            float: ``mean(o) - mean(p_level)``; positive when the probability falls.
        """
        return float(self.drop_curve[level_index])

    @property
    def first_level_drop(self) -> float:
        """float: :meth:`absolute_drop` at the first level (Table 1)."""
        return self.absolute_drop(0)

    def normalized_curve(
        self, m: Optional[float] = None, include_origin: bool = True
    ) -> Tensor:
        """The normalised drop ``d = (p - m) / (o - m)`` of Figure 1.

        Args:
            m (float, optional): The floor. The paper takes the minimum, across all
                methods compared, of the fully degraded mean probability; use
                :func:`compare` for that. Default: this result's own last level.
            include_origin (bool): Prepend level 0 (where ``d = 1``). Default True.

        Returns:
            Tensor: ``(K + 1,)`` or ``(K,)`` float64.
        """
        if m is None:
            m = float(self.curve[-1])
        curve = self.full_curve if include_origin else self.curve
        o = self.original_probability
        denom = o - m
        if abs(denom) < 1e-12:
            return torch.full_like(curve, float("nan"))
        return (curve - m) / denom

    # ---- scalar summaries ------------------------------------------------------------
    @property
    def aopc(self) -> float:
        """float: Area over the perturbation curve (Samek et al., 2017).

        ``1 / (K + 1) * sum_{k=0..K} mean(o - p_k)``, the unperturbed level 0
        (a zero term) included. With most-relevant-first order higher is better.
        """
        return float(self.drop_curve.sum() / (self.num_levels + 1))

    @property
    def comprehensiveness(self) -> float:
        """float: ERASER comprehensiveness (DeYoung et al., 2020), AOPC form.

        Mean over the levels (no level 0) and instances of ``o - p(x without the
        first k tokens)``. Higher is better with most-relevant-first order.
        """
        return _mean(self.original_probs.double()[:, None] - self.probs.double())

    @property
    def sufficiency(self) -> float:
        """float: ERASER sufficiency (DeYoung et al., 2020), AOPC form.

        Mean over the levels and instances of ``o - p(x with only the first k tokens
        kept)``. Lower is better with most-relevant-first order.

        Raises:
            ValueError: If the test ran with ``compute_sufficiency=False``.
        """
        if self.kept_probs is None:
            raise ValueError(
                "sufficiency needs the test run with compute_sufficiency=True"
            )
        return _mean(self.original_probs.double()[:, None] - self.kept_probs.double())

    @property
    def log_odds_curve(self) -> Tensor:
        """Tensor: ``(K,)`` mean change of the target log-odds at each level.

        ``mean(logodds(p_k) - logodds(o))`` with ``logodds(p) = log p - log(1 - p)``
        computed from the logits (Shrikumar et al., 2017; Chen et al., 2019). More
        negative is better with most-relevant-first order.
        """
        return (self.log_odds.double() - self.original_log_odds.double()[:, None]).mean(
            0
        )

    @property
    def log_odds_score(self) -> float:
        """float: :attr:`log_odds_curve` averaged over the levels."""
        return _mean(self.log_odds_curve)

    @property
    def original_accuracy(self) -> float:
        """float: Share of instances predicted as the target on the original input."""
        return _mean((self.original_preds == self.target).double())

    @property
    def accuracy_curve(self) -> Tensor:
        """Tensor: ``(K,)`` share of instances predicted as the target at each level.

        When the target is the gold label this is the accuracy; when it is the
        predicted label (``target=None``) it is the agreement with the original
        prediction.
        """
        return (self.preds == self.target[:, None]).double().mean(0)

    def summary(self) -> Dict[str, Any]:
        """The scalar aggregates, as a plain dict.

        Returns:
            dict: method, n, o, first-level drop, AOPC, comprehensiveness,
            sufficiency (None if not computed), log-odds, original accuracy.
        """
        return {
            "method": self.method,
            "num_instances": self.num_instances,
            "original_probability": self.original_probability,
            "first_level_drop": self.first_level_drop,
            "aopc": self.aopc,
            "comprehensiveness": self.comprehensiveness,
            "sufficiency": None if self.kept_probs is None else self.sufficiency,
            "log_odds": self.log_odds_score,
            "original_accuracy": self.original_accuracy,
        }

    # ---- persistence -----------------------------------------------------------------
    _FLOAT_FIELDS = (
        "original_probs",
        "original_log_odds",
        "probs",
        "log_odds",
        "kept_probs",
    )
    _LONG_FIELDS = ("target", "original_preds", "preds", "n_tokens", "n_removed")

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serialisable dict (tensors become nested lists).

        Returns:
            dict: Every field, plus ``format`` and ``captum_iba_version``.
        """
        out: Dict[str, Any] = {
            "format": "captum_iba.DegradationResult/1",
            "captum_iba_version": __version__,
            "levels": list(self.levels),
            "settings": _jsonable(self.settings),
        }
        for name in self._FLOAT_FIELDS + self._LONG_FIELDS:
            value = getattr(self, name)
            out[name] = None if value is None else value.tolist()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DegradationResult":
        """Rebuild a result from :meth:`to_dict`'s output.

        Args:
            data (Mapping): The dict.

        Returns:
            DegradationResult: The result.
        """
        kwargs: Dict[str, Any] = {
            "levels": list(data["levels"]),
            "settings": dict(data.get("settings") or {}),
        }
        for name in cls._FLOAT_FIELDS:
            value = data.get(name)
            kwargs[name] = (
                None if value is None else torch.tensor(value, dtype=torch.float64)
            )
        for name in cls._LONG_FIELDS:
            kwargs[name] = torch.tensor(data[name], dtype=torch.long)
        for name in ("probs", "preds", "log_odds", "n_removed", "kept_probs"):
            if kwargs.get(name) is not None and kwargs[name].dim() == 1:
                kwargs[name] = kwargs[name].reshape(-1, len(kwargs["levels"]))
        return cls(**kwargs)

    def to_json(self, path: Optional[Union[str, os.PathLike]] = None) -> str:
        """Serialise to JSON (exact: float64 values round-trip).

        Args:
            path (str or PathLike, optional): Also write the JSON to this file.

        Returns:
            str: The JSON text.
        """
        text = json.dumps(self.to_dict())
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text

    @classmethod
    def from_json(cls, source: Union[str, os.PathLike]) -> "DegradationResult":
        """Load a result saved by :meth:`to_json`.

        Args:
            source (str or PathLike): JSON text, or the path of a file holding it.

        Returns:
            DegradationResult: The result.
        """
        if isinstance(source, os.PathLike) or (
            isinstance(source, str) and not source.lstrip().startswith("{")
        ):
            with open(source, encoding="utf-8") as fh:
                source = fh.read()
        return cls.from_dict(json.loads(source))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Tensor):
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return repr(value)


# --------------------------------------------------------------------------------------
# Comparing methods
# --------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """Several degradation results side by side (Figure 1 and Table 1).

    Attributes:
        names (list[str]): The methods, in the order given.
        m (float): The floor of the normalised drop: the lowest last-level mean
            probability across the methods.
        normalized_curves (dict[str, Tensor]): ``(K + 1,)`` normalised drop
            ``(p - m) / (o - m)`` per method, level 0 included.
        rows (list[dict]): One summary row per method (see
            :meth:`DegradationResult.summary`).
        levels (list): The removal levels shared by the results.
    """

    names: List[str]
    m: float
    normalized_curves: Dict[str, Tensor]
    rows: List[Dict[str, Any]]
    levels: List[Union[float, int]]

    def to_markdown(self, digits: int = 3) -> str:
        """A Markdown table: first-level drop, AOPC, comprehensiveness, sufficiency.

        Args:
            digits (int): Decimal places. Default 3.

        Returns:
            str: The table.
        """
        first = self.levels[0] if self.levels else None
        first_txt = (
            f"{100 * first:.1f} %" if isinstance(first, float) else f"{first} tok."
        )
        head = (
            f"| method | n | o | drop @ {first_txt} | AOPC | comprehensiveness "
            "| sufficiency | log-odds |"
        )
        lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]

        def fmt(x: Optional[float]) -> str:
            return "n/a" if x is None else f"{x:.{digits}f}"

        for row in self.rows:
            lines.append(
                f"| {row['method']} | {row['num_instances']} "
                f"| {fmt(row['original_probability'])} "
                f"| {fmt(row['first_level_drop'])} | {fmt(row['aopc'])} "
                f"| {fmt(row['comprehensiveness'])} | {fmt(row['sufficiency'])} "
                f"| {fmt(row['log_odds'])} |"
            )
        return "\n".join(lines)

    def curves_markdown(self, digits: int = 3) -> str:
        """A Markdown table of the normalised curves (one row per method).

        Args:
            digits (int): Decimal places. Default 3.

        Returns:
            str: The table.
        """
        cols = ["0"] + [
            f"{100 * lv:.1f} %" if isinstance(lv, float) else str(lv)
            for lv in self.levels
        ]
        lines = [
            "| method | " + " | ".join(cols) + " |",
            "|---|" + "---:|" * len(cols),
        ]
        for name in self.names:
            vals = " | ".join(f"{v:.{digits}f}" for v in self.normalized_curves[name])
            lines.append(f"| {name} | {vals} |")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()


@log_usage()
def compare(
    results: Mapping[str, DegradationResult], m: Optional[float] = None
) -> Comparison:
    """Compare several methods' degradation results (Figure 1 / Table 1).

    The normalised drop is ``d = (p - m) / (o - m)`` with ``o`` each result's mean
    original probability and ``m`` the minimum, across the methods, of the fully
    degraded (last-level) mean probability, as in the paper.

    Args:
        results (Mapping[str, DegradationResult]): Method name to result. They should
            share instances, targets and levels; a warning is given when the original
            probabilities differ, an error when the levels differ.
        m (float, optional): Override the floor.

    Returns:
        Comparison: Normalised curves, summary rows, and a Markdown table
        (:meth:`Comparison.to_markdown`).

    Raises:
        ValueError: If ``results`` is empty or the results' levels differ.
    """
    if not results:
        raise ValueError("compare needs at least one result")
    names = list(results)
    first = results[names[0]]
    for name in names[1:]:
        res = results[name]
        if list(res.levels) != list(first.levels) or res.settings.get(
            "level_unit"
        ) != first.settings.get("level_unit"):
            raise ValueError(
                f"results '{names[0]}' and '{name}' use different removal levels"
            )
        if res.num_instances != first.num_instances or not torch.allclose(
            res.original_probs, first.original_probs, atol=1e-5
        ):
            warnings.warn(
                f"results '{names[0]}' and '{name}' differ in their original "
                "probabilities: they were not computed on the same instances/targets",
                stacklevel=2,
            )
    if m is None:
        m = min(float(results[n].curve[-1]) for n in names)
    curves = {n: results[n].normalized_curve(m) for n in names}
    rows = []
    for n in names:
        row = results[n].summary()
        row["method"] = n
        rows.append(row)
    return Comparison(
        names=names,
        m=float(m),
        normalized_curves=curves,
        rows=rows,
        levels=list(first.levels),
    )


# --------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------


def _logits_of(out: Any) -> Tensor:
    out = logits_of(out)
    if out.dim() != 2:
        raise ValueError(
            f"forward_func must return logits of shape (B, C); got {tuple(out.shape)}"
        )
    return out


def _parse_levels(
    levels: Optional[Union[float, int, Iterable[Union[float, int]]]], unit: str
) -> List[Union[float, int]]:
    if unit not in _LEVEL_UNITS:
        raise ValueError(f"level_unit must be one of {_LEVEL_UNITS}; got {unit!r}")
    if levels is None:
        if unit == "count":
            raise ValueError("level_unit='count' needs explicit levels")
        return list(PAPER_LEVELS)
    if isinstance(levels, Tensor):
        levels = levels.tolist()
    if isinstance(levels, numbers.Number):
        levels = [levels]
    out: List[Union[float, int]] = []
    for lv in levels:  # type: ignore[union-attr]
        if isinstance(lv, bool) or not isinstance(lv, numbers.Real):
            raise TypeError(f"removal levels must be numbers; got {lv!r}")
        if unit == "fraction":
            f = float(lv)
            if not (0.0 <= f <= 1.0):  # also rejects NaN
                raise ValueError(
                    f"removal level {lv!r} is outside [0, 1] (use level_unit='count' "
                    "for numbers of tokens)"
                )
            out.append(f)
        else:
            if float(lv) != int(lv) or int(lv) < 0:
                raise ValueError(
                    f"with level_unit='count' levels are non-negative integers; got "
                    f"{lv!r}"
                )
            out.append(int(lv))
    if not out:
        raise ValueError("at least one removal level is needed")
    return out


def _format_target(target: TargetLike, batch: int) -> Optional[Tensor]:
    if target is None:
        return None
    if isinstance(target, bool):
        raise TypeError("target must be an int, a sequence of ints or a Tensor")
    if isinstance(target, numbers.Integral):
        return torch.full((batch,), int(target), dtype=torch.long)
    if isinstance(target, Tensor):
        t = target.detach().cpu()
        if t.is_floating_point() and not torch.equal(t, t.round()):
            raise TypeError("target must hold integer class indices")
        t = t.long()
        if t.dim() == 0:
            return t.expand(batch).clone()
        t = t.reshape(-1)
    else:
        try:
            items = list(target)  # type: ignore[arg-type]
        except TypeError as err:
            raise TypeError(
                "target must be None, an int, a sequence of ints or a Tensor"
            ) from err
        if any(
            isinstance(x, bool) or not isinstance(x, numbers.Integral) for x in items
        ):
            raise TypeError(
                "target must hold one integer class index per instance (tuples for "
                "multi-dimensional outputs are not supported)"
            )
        t = torch.tensor(items, dtype=torch.long).reshape(-1)
    if t.numel() != batch:
        raise ValueError(
            f"target has {t.numel()} entries for a batch of {batch} instances"
        )
    return t


def _token_ids_from_tokenizer(tokenizer: Any) -> Dict[str, Any]:
    ids: Dict[str, Any] = {}
    for name in ("pad_token_id", "mask_token_id", "unk_token_id"):
        ids[name] = getattr(tokenizer, name, None)
    specials = set(getattr(tokenizer, "all_special_ids", []) or [])
    # UNK stands for a real word of the text and PAD is never a token: neither is kept.
    specials -= {ids["unk_token_id"], ids["pad_token_id"], None}
    ids["special_token_ids"] = sorted(int(s) for s in specials)
    return ids


def _model_device(forward_func: Any, fallback: torch.device) -> torch.device:
    if isinstance(forward_func, torch.nn.Module):
        for p in forward_func.parameters():
            return p.device
    return fallback


def _removal_rank(scores: Tensor, removable: Tensor, order: str) -> Tensor:
    """Rank of each position in the removal order; non-removable positions get L."""
    B, L = scores.shape
    key = -scores if order == "morf" else scores
    by_score = torch.sort(key, dim=1, stable=True).indices  # ties: earlier first
    non_rem = (~removable).gather(1, by_score).to(torch.uint8)
    by_flag = torch.sort(non_rem, dim=1, stable=True).indices
    order_idx = by_score.gather(1, by_flag)
    rank = torch.empty_like(order_idx)
    rank.scatter_(1, order_idx, torch.arange(L).expand(B, L).contiguous())
    return rank.masked_fill(~removable, L)


def _level_counts(
    levels: Sequence[Union[float, int]],
    unit: str,
    convention: str,
    n_rem: Tensor,
    n_full: Tensor,
) -> Tensor:
    cols = []
    for lv in levels:
        if unit == "count":
            k = torch.full_like(n_rem, int(lv))
        elif convention == "paper":
            k = torch.floor(float(lv) * n_full.double() + _EPS).long()
        else:
            k = torch.floor(float(lv) * n_rem.double() + 0.5 + _EPS).long()
        cols.append(torch.minimum(k, n_rem))
    return torch.stack(cols, 1)


# --------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------


class _Runner:
    """Builds the degraded sequences of a set of jobs and runs the model on them."""

    def __init__(
        self,
        forward_func: Callable[..., Any],
        input_ids: Tensor,
        valid: Tensor,
        removable: Tensor,
        rank: Tensor,
        attention_mask: Optional[Tensor],
        token_type_ids: Optional[Tensor],
        extra_args: Tuple[Any, ...],
        removal: str,
        replacement_id: Optional[int],
        pad_id: int,
        group_by_length: bool,
        device: torch.device,
    ) -> None:
        self.forward_func = forward_func
        self.input_ids = input_ids
        self.valid = valid
        self.removable = removable
        self.rank = rank
        self.attention_mask = attention_mask
        self.token_type_ids = token_type_ids
        B, L = input_ids.shape
        # additional args: "token" = (B, L, ...) follows the tokens; "row" = (B, ...)
        # indexed per instance; "const" passed as is.
        self.extra: List[Tuple[str, Any]] = []
        for a in extra_args:
            if isinstance(a, Tensor) and a.dim() >= 2 and a.shape[:2] == (B, L):
                self.extra.append(("token", a))
            elif isinstance(a, Tensor) and a.dim() >= 1 and a.shape[0] == B:
                self.extra.append(("row", a))
            else:
                self.extra.append(("const", a))
        self.removal = removal
        self.replacement_id = replacement_id
        self.pad_id = pad_id
        self.group_by_length = group_by_length
        self.device = device

    def run(self, rows: Tensor, ks: Tensor, keep_only: Tensor) -> Tensor:
        """Logits (float64, CPU) for jobs (instance row, k, keep-only flag)."""
        rank = self.rank[rows]
        removable = self.removable[rows]
        k = ks[:, None]
        removed = torch.where(keep_only[:, None], removable & (rank >= k), rank < k)
        ids = self.input_ids[rows]
        mask = None if self.attention_mask is None else self.attention_mask[rows]
        tt = None if self.token_type_ids is None else self.token_type_ids[rows]
        token_extra = [a[rows] if kind == "token" else None for kind, a in self.extra]

        if self.removal == "delete":
            keep = self.valid[rows] & ~removed
            lengths = keep.sum(1)
            perm = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices
            L = ids.shape[1]
            tail = torch.arange(L)[None, :] >= lengths[:, None]

            def compact(t: Tensor, fill: int) -> Tensor:
                idx = perm.reshape(perm.shape + (1,) * (t.dim() - 2)).expand_as(t)
                out = t.gather(1, idx)
                tail_t = tail.reshape(tail.shape + (1,) * (t.dim() - 2)).expand_as(out)
                return out.masked_fill(tail_t, fill)

            ids = compact(ids, self.pad_id)
            mask = None if mask is None else compact(mask, 0)
            tt = None if tt is None else compact(tt, 0)
            token_extra = [None if t is None else compact(t, 0) for t in token_extra]
            if self.group_by_length:
                groups = [
                    (lengths == n).nonzero().reshape(-1)
                    for n in torch.unique(lengths).tolist()
                ]
                widths = [max(int(lengths[g[0]]), 1) for g in groups]
            else:
                groups = [torch.arange(len(rows))]
                widths = [max(int(lengths.max()) if len(rows) else 1, 1)]
        else:
            ids = ids.masked_fill(removed, int(self.replacement_id))  # type: ignore
            groups = [torch.arange(len(rows))]
            widths = [ids.shape[1]]

        pieces: List[Tuple[Tensor, Tensor]] = []
        for g, w in zip(groups, widths):
            args: List[Any] = [ids[g, :w]]
            if mask is not None:
                args.append(mask[g, :w])
            if tt is not None:
                args.append(tt[g, :w])
            for (kind, a), t in zip(self.extra, token_extra):
                if kind == "token":
                    args.append(t[g, :w])  # type: ignore[index]
                elif kind == "row":
                    args.append(a[rows[g]])
                else:
                    args.append(a)
            args = [x.to(self.device) if isinstance(x, Tensor) else x for x in args]
            logits = _logits_of(self.forward_func(*args))
            if logits.shape[0] != len(g):
                raise ValueError(
                    f"forward_func returned {logits.shape[0]} rows for a batch of "
                    f"{len(g)}"
                )
            pieces.append((g, logits.detach().to("cpu", torch.float64)))
        C = pieces[0][1].shape[1]
        out = torch.empty(len(rows), C, dtype=torch.float64)
        for g, lg in pieces:
            out[g] = lg
        return out


def _target_stats(logits: Tensor, target: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    logp = torch.log_softmax(logits, dim=1)
    lp_t = logp.gather(1, target[:, None]).squeeze(1)
    others = logp.scatter(1, target[:, None], float("-inf"))
    log_odds = lp_t - torch.logsumexp(others, dim=1)
    return lp_t.exp(), logits.argmax(1), log_odds


@log_usage()
def degradation_test(
    forward_func: Callable[..., Any],
    inputs: Tensor,
    attributions: Tensor,
    target: TargetLike = None,
    additional_forward_args: Optional[Any] = None,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    levels: Optional[Union[float, int, Iterable[Union[float, int]]]] = None,
    level_unit: str = "fraction",
    length_convention: str = "tokens",
    removal: Union[str, int] = "delete",
    order: str = "morf",
    special_token_ids: Optional[Iterable[int]] = None,
    tokenizer: Optional[Any] = None,
    keep_special_tokens: bool = True,
    pad_token_id: Optional[int] = None,
    mask_token_id: Optional[int] = None,
    unk_token_id: Optional[int] = None,
    compute_sufficiency: bool = True,
    max_examples_per_batch: Optional[int] = None,
    group_by_length: Optional[bool] = None,
    method: Optional[str] = None,
    seed: Optional[int] = None,
    settings: Optional[Mapping[str, Any]] = None,
    show_progress: bool = False,
) -> DegradationResult:
    r"""Degradation test (Jiang et al., 2020, Section 4.1) of token attributions.

    Tokens are ranked by their attribution, the first ``k`` of that order are removed
    at each level, and the target-class softmax probability of the original model is
    recorded on every degraded input. Removal works on the token ids: nothing is
    decoded or re-tokenised.

    The model is called as ``forward_func(input_ids, [attention_mask],
    [token_type_ids], *additional_forward_args)``: ``attention_mask`` and
    ``token_type_ids`` are passed positionally when given (so a Hugging Face
    ``...ForSequenceClassification`` model can be the forward function). It must
    return logits ``(N, C)``, a tuple whose first element they are, or an object with
    ``.logits`` (a ``ModelOutput``). Probabilities are the softmax of the logits,
    computed in float64. Everything runs under ``torch.no_grad()`` on the device of
    the model's parameters (``forward_func`` an ``nn.Module``) or of ``inputs``. The
    model is not switched to eval mode: switch dropout off yourself (a warning is
    given for a module in training mode).

    Removal modes:

    * ``"delete"`` (the paper's): removed tokens leave the sequence, which is
      compacted; the attention mask, the segment ids and every other per-token
      tensor of ``additional_forward_args`` (shape ``(B, L, ...)``) follow, and the
      freed tail is padding (``pad_token_id``, mask 0, other tensors 0). Each batch
      is trimmed to its longest remaining sequence. Without any attention mask the
      model would see that padding, so sequences are then grouped by remaining length
      (``group_by_length``) and each group trimmed exactly. An empty remainder is
      evaluated as one padding token (mask 0).
    * ``"mask"``, ``"pad"``, ``"unk"`` or an ``int``: removed tokens are replaced by
      ``[MASK]``, ``[PAD]``, the unknown token or that id; positions, attention mask
      and segment ids are unchanged.

    Special tokens (``special_token_ids``, or the tokenizer's special ids except UNK
    and PAD) are never removed when ``keep_special_tokens`` is True. Padding (attention
    mask 0, or ``pad_token_id`` when no mask is given) is never a token: it is neither
    counted nor removed. Ties between scores are broken by position: the earlier token
    comes first, in both orders.

    Args:
        forward_func (Callable): The model (see above).
        inputs (Tensor): ``input_ids`` ``(B, L)``, integer.
        attributions (Tensor): Per-token scores ``(B, L)`` aligned with ``inputs``,
            from any method. ``(B, L, H)`` (e.g. a layer attribution or IBA's
            capacity) is summed over the last dimension. Only the order matters.
        target (int, sequence, Tensor or None): The class whose probability is
            tracked: one index for all, or one per instance (the gold labels, in the
            paper). None: the class predicted on the original input.
        additional_forward_args (Any, optional): Extra positional arguments, after
            ``attention_mask``/``token_type_ids``; a tuple for several. Tensors of
            shape ``(B, L, ...)`` follow the tokens, tensors ``(B, ...)`` are indexed
            per instance, anything else is passed unchanged.
        attention_mask (Tensor, optional): ``(B, L)``, 1 for tokens, 0 for padding.
        token_type_ids (Tensor, optional): ``(B, L)`` segment ids (sentence pairs).
            Given without an attention mask, a mask is built from ``pad_token_id``
            (all ones when that is unknown).
        levels (float, int or sequence, optional): Removal levels, in the order given.
            Default: the paper's ``k/9`` for ``k = 1..9`` (:data:`PAPER_LEVELS`).
        level_unit (str): ``"fraction"`` (levels in [0, 1]) or ``"count"`` (levels are
            numbers of tokens, capped at the number of removable tokens).
            Default ``"fraction"``.
        length_convention (str): How a fraction becomes ``k`` (see the module
            docstring): ``"tokens"`` (round half up of ``f * n``, ``n`` the removable
            tokens) or ``"paper"`` (floor of ``f`` times the full non-padding length,
            specials counted, capped at ``n``). Default ``"tokens"``.
        removal (str or int): ``"delete"``, ``"mask"``, ``"pad"``, ``"unk"`` or a
            replacement token id. Default ``"delete"``.
        order (str): ``"morf"`` (most relevant first, the paper's) or ``"lerf"``
            (least relevant first). Default ``"morf"``.
        special_token_ids (Iterable[int], optional): Ids never removed.
        tokenizer (optional): A Hugging Face tokenizer to take the special, pad,
            mask and unknown token ids from (explicit arguments win).
        keep_special_tokens (bool): Never remove special tokens. Default True.
        pad_token_id (int, optional): Padding id (deletion's fill, ``"pad"`` mode,
            padding detection without an attention mask). Default 0 for the fill.
        mask_token_id (int, optional): Id for ``removal="mask"``.
        unk_token_id (int, optional): Id for ``removal="unk"``.
        compute_sufficiency (bool): Also evaluate "keep only the first k tokens"
            inputs, for :attr:`DegradationResult.sufficiency` (doubles the forward
            passes). Default True.
        max_examples_per_batch (int, optional): Most sequences per forward call.
            Default None: all sequences of a phase (the originals, then every level)
            in one call. Results do not depend on it (up to float rounding).
        group_by_length (bool, optional): See ``"delete"``. Default None: True when
            deleting without an attention mask or per-token additional argument.
        method (str, optional): Name of the attribution method, recorded.
        seed (int, optional): Recorded in ``settings`` (the test itself is
            deterministic).
        settings (Mapping, optional): The attribution method's settings (e.g. its
            target, steps or samples), recorded under ``settings["attribution"]``.
        show_progress (bool): Show a progress bar. Default False.

    Returns:
        DegradationResult: Per-instance probabilities and labels, the aggregates, and
        ``settings``.

    Raises:
        ValueError: On attributions whose shape does not match the tokens, NaN
            scores, levels outside [0, 1], an unknown removal mode or order, a target
            out of range, or a missing replacement id.
        TypeError: On non-integer token ids or targets.

    Examples::

        >>> result = degradation_test(model, input_ids, attributions, target=labels,
        ...                           attention_mask=attention_mask,
        ...                           tokenizer=tokenizer, method="IG")
        >>> result.first_level_drop, result.aopc
        >>> print(compare({"IG": result, "IBA": iba_result}).to_markdown())
    """
    # ---- validation ------------------------------------------------------------------
    if not isinstance(inputs, Tensor) or inputs.dim() != 2:
        raise ValueError("inputs must be a (B, L) tensor of token ids")
    if inputs.is_floating_point() or inputs.is_complex():
        raise TypeError("inputs must hold integer token ids")
    B, L = inputs.shape
    if B == 0:
        raise ValueError("inputs hold no instance")
    if not isinstance(attributions, Tensor):
        attributions = torch.as_tensor(attributions)
    scores = attributions.detach()
    if scores.dim() == 3 and scores.shape[:2] == (B, L):
        scores = scores.sum(-1)
    if scores.shape != (B, L):
        raise ValueError(
            f"attributions of shape {tuple(attributions.shape)} do not match the "
            f"tokens {tuple(inputs.shape)}: expected (B, L) or (B, L, H)"
        )
    scores = scores.to("cpu", torch.float64)
    if order not in _ORDERS:
        raise ValueError(f"order must be one of {_ORDERS}; got {order!r}")
    if length_convention not in _LENGTH_CONVENTIONS:
        raise ValueError(
            f"length_convention must be one of {_LENGTH_CONVENTIONS}; got "
            f"{length_convention!r}"
        )
    level_list = _parse_levels(levels, level_unit)
    if max_examples_per_batch is not None and int(max_examples_per_batch) < 1:
        raise ValueError("max_examples_per_batch must be a positive integer")

    tok_ids: Dict[str, Any] = (
        _token_ids_from_tokenizer(tokenizer) if tokenizer is not None else {}
    )
    pad_id = pad_token_id if pad_token_id is not None else tok_ids.get("pad_token_id")
    mask_id = (
        mask_token_id if mask_token_id is not None else tok_ids.get("mask_token_id")
    )
    unk_id = unk_token_id if unk_token_id is not None else tok_ids.get("unk_token_id")
    if special_token_ids is None:
        special_token_ids = tok_ids.get("special_token_ids", [])
    specials = sorted({int(s) for s in special_token_ids})  # type: ignore[union-attr]

    replacement_id: Optional[int]
    if isinstance(removal, bool):
        raise ValueError(f"unknown removal mode {removal!r}")
    if isinstance(removal, numbers.Integral):
        replacement_id, removal_name = int(removal), "replace"
    elif removal in _REMOVAL_MODES:
        removal_name = str(removal)
        replacement_id = {
            "delete": None,
            "mask": mask_id,
            "pad": pad_id,
            "unk": unk_id,
        }[removal_name]
        if removal_name != "delete" and replacement_id is None:
            raise ValueError(
                f"removal={removal!r} needs the {removal_name} token id: pass "
                f"{removal_name}_token_id= or a tokenizer"
            )
    else:
        raise ValueError(
            f"unknown removal mode {removal!r}: use one of {_REMOVAL_MODES} or a "
            "token id"
        )

    extra: Tuple[Any, ...]
    if additional_forward_args is None:
        extra = ()
    elif isinstance(additional_forward_args, tuple):
        extra = additional_forward_args
    else:
        extra = (additional_forward_args,)

    ids_cpu = inputs.detach().cpu().long()
    for name, t in (
        ("attention_mask", attention_mask),
        ("token_type_ids", token_type_ids),
    ):
        if t is not None and tuple(t.shape) != (B, L):
            raise ValueError(f"{name} has shape {tuple(t.shape)}; expected {(B, L)}")
    if attention_mask is not None:
        mask_cpu: Optional[Tensor] = attention_mask.detach().cpu()
        valid = mask_cpu.bool()  # type: ignore[union-attr]
    else:
        mask_cpu = None
        valid = (
            ids_cpu != int(pad_id)
            if pad_id is not None
            else torch.ones(B, L, dtype=torch.bool)
        )
    tt_cpu = None if token_type_ids is None else token_type_ids.detach().cpu()
    if tt_cpu is not None and mask_cpu is None:
        mask_cpu = valid.long()
    is_special = torch.isin(ids_cpu, torch.tensor(specials, dtype=torch.long))
    removable = valid & ~is_special if keep_special_tokens else valid.clone()
    if torch.isnan(scores[removable]).any():
        raise ValueError("attributions contain NaN at removable positions")
    scores = torch.nan_to_num(scores, nan=0.0)  # NaN elsewhere is harmless

    n_rem = removable.sum(1)
    n_full = valid.sum(1)
    k_table = _level_counts(level_list, level_unit, length_convention, n_rem, n_full)
    rank = _removal_rank(scores, removable, order)

    device = _model_device(forward_func, inputs.device)
    if isinstance(forward_func, torch.nn.Module) and forward_func.training:
        warnings.warn(
            "the model is in training mode: dropout makes the degradation test "
            "random; call model.eval() first",
            stacklevel=3,
        )
    token_extra_present = any(
        isinstance(a, Tensor) and a.dim() >= 2 and a.shape[:2] == (B, L) for a in extra
    )
    if group_by_length is None:
        group_by_length = (
            removal_name == "delete" and mask_cpu is None and not token_extra_present
        )
    cpu_extra = tuple(
        a.detach().cpu()
        if isinstance(a, Tensor) and a.dim() >= 1 and a.shape[0] == B
        else a
        for a in extra
    )
    runner = _Runner(
        forward_func,
        ids_cpu,
        valid,
        removable,
        rank,
        mask_cpu,
        tt_cpu,
        cpu_extra,
        removal_name,
        replacement_id,
        int(pad_id) if pad_id is not None else 0,
        bool(group_by_length),
        device,
    )

    def run_jobs(rows: Tensor, ks: Tensor, keep_only: Tensor, desc: str) -> Tensor:
        n = len(rows)
        step = n if max_examples_per_batch is None else int(max_examples_per_batch)
        starts = range(0, n, max(step, 1))
        if show_progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=desc)
        # Batch sequences of similar remaining length together (less padding); the
        # results are put back in job order.
        if removal_name == "delete":
            removed = torch.where(keep_only, n_rem[rows] - ks, ks)
            by_len = torch.sort(n_full[rows] - removed, stable=True).indices
        else:
            by_len = torch.arange(n)
        outs = []
        for s in starts:
            sel = by_len[s : s + step]
            outs.append(runner.run(rows[sel], ks[sel], keep_only[sel]))
        out = torch.empty_like(torch.cat(outs, 0))
        out[by_len] = torch.cat(outs, 0)
        return out

    K = len(level_list)
    with torch.no_grad():
        # phase 1: the original inputs (k = 0)
        rows0 = torch.arange(B)
        logits0 = run_jobs(
            rows0,
            torch.zeros(B, dtype=torch.long),
            torch.zeros(B, dtype=torch.bool),
            "original",
        )
        C = logits0.shape[1]
        if C < 2:
            raise ValueError(
                "the degradation test needs a classifier with >= 2 classes"
            )
        tgt = _format_target(target, B)
        target_name = "given"
        if tgt is None:
            tgt = logits0.argmax(1)
            target_name = "predicted"
        if (tgt < 0).any() or (tgt >= C).any():
            bad = tgt[(tgt < 0) | (tgt >= C)][0].item()
            raise ValueError(f"target {bad} is out of range for {C} classes")
        o_probs, o_preds, o_lo = _target_stats(logits0, tgt)

        # phase 2: every level (and the keep-only inputs for sufficiency)
        variants = [False, True] if compute_sufficiency else [False]
        rows = torch.arange(B).repeat_interleave(K * len(variants))
        keep_only = torch.tensor(variants).repeat_interleave(K).repeat(B)
        ks = k_table[:, None, :].expand(B, len(variants), K).reshape(-1)
        logits = run_jobs(rows, ks, keep_only, "levels")
        p, pred, lo = _target_stats(logits, tgt[rows])
        p = p.reshape(B, len(variants), K)
        pred = pred.reshape(B, len(variants), K)
        lo = lo.reshape(B, len(variants), K)

    record: Dict[str, Any] = {
        "method": method,
        "removal": removal_name,
        "replacement_id": replacement_id,
        "levels": list(level_list),
        "level_unit": level_unit,
        "length_convention": length_convention,
        "order": order,
        "target": target_name,
        "keep_special_tokens": keep_special_tokens,
        "special_token_ids": specials,
        "pad_token_id": pad_id,
        "num_instances": B,
        "num_classes": C,
        "compute_sufficiency": compute_sufficiency,
        "group_by_length": bool(group_by_length),
        "seed": seed,
        "captum_iba_version": __version__,
    }
    if settings:
        record["attribution"] = dict(settings)
        if method is None:
            record["method"] = settings.get("method")
    return DegradationResult(
        levels=list(level_list),
        target=tgt.clone(),
        original_probs=o_probs,
        original_preds=o_preds,
        original_log_odds=o_lo,
        probs=p[:, 0].contiguous(),
        preds=pred[:, 0].contiguous(),
        log_odds=lo[:, 0].contiguous(),
        n_tokens=n_rem,
        n_removed=k_table,
        kept_probs=p[:, 1].contiguous() if compute_sufficiency else None,
        settings=record,
    )
