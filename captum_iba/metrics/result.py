r"""What a degradation test returns: :class:`DegradationResult`.

The record of one test: its per-instance state (probabilities, labels, removal
counts), the aggregates people report (each computed by a pure function of
:mod:`~captum_iba.metrics.aggregates`: the curves as properties; the scalars -
Table 1's absolute drop, AOPC, ERASER comprehensiveness and sufficiency,
log-odds, accuracy - as the attributes and summary keys of their
registrations, :data:`~captum_iba.metrics.aggregates.AGGREGATES`), an exact
JSON form, per-instance records, and :meth:`~DegradationResult.concat` to
merge the results of several shards.
:func:`~captum_iba.metrics.aggregates.normalized_drop` is importable from here
too, as before.
"""

import copy
import json
import numbers
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import torch
from torch import Tensor

from captum_iba._utils.io import atomic_write_text, read_json
from captum_iba.metrics import aggregates
from captum_iba.metrics.aggregates import normalized_drop
from captum_iba.version import __version__

__all__ = ["DegradationResult"]

#: The ``format`` field of :meth:`DegradationResult.to_dict`.
_FORMAT = "captum_iba.DegradationResult/1"
#: What a field that may be None needs, for the message of an aggregate that
#: reads it.
_NOT_COMPUTED = {"kept_probs": "the test run with compute_sufficiency=True"}
#: Settings that must agree between results merged by :meth:`DegradationResult.concat`.
_SAME_TEST = (
    "method",
    "removal",
    "replacement_id",
    "level_unit",
    "length_convention",
    "order",
    "target",
    "keep_special_tokens",
)


@dataclass
class DegradationResult:
    """Per-instance outcome of a degradation test, with the usual aggregates.

    All tensors live on the CPU. ``B`` is the number of instances, ``K`` the number of
    removal levels.

    Every registered scalar aggregate
    (:data:`~captum_iba.metrics.aggregates.AGGREGATES`) is an attribute, a float:
    ``original_probability`` (``o``), ``first_level_drop`` (Table 1), ``aopc``,
    ``comprehensiveness``, ``sufficiency`` (a ValueError without ``kept_probs``),
    ``log_odds_score``, ``original_accuracy``, and any added with
    :func:`~captum_iba.metrics.aggregates.register_aggregate`; :meth:`summary`
    holds them all.

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

    # ---- curves (each an aggregate of captum_iba.metrics.aggregates) -----------------
    @property
    def curve(self) -> Tensor:
        """Tensor: ``(K,)`` mean target probability at each level."""
        return aggregates.mean_curve(self.probs)

    @property
    def full_curve(self) -> Tensor:
        """Tensor: ``(K + 1,)`` the mean curve with ``o`` (level 0) prepended."""
        return aggregates.full_curve(self.original_probs, self.probs)

    @property
    def drop_curve(self) -> Tensor:
        """Tensor: ``(K,)`` mean drop ``o - p`` at each level (positive = a drop)."""
        return aggregates.drop_curve(self.original_probs, self.probs)

    def absolute_drop(self, level_index: int = 0) -> float:
        """Mean drop of the target probability at one level (Table 1 of the paper).

        Args:
            level_index (int): Index into :attr:`levels`. Default 0, the first level
                (11.1 % with the paper's levels).

        Returns:
            float: ``mean(o) - mean(p_level)``; positive when the probability falls.
        """
        return aggregates.absolute_drop(self.original_probs, self.probs, level_index)

    def normalized_curve(
        self, m: Optional[float] = None, include_origin: bool = True
    ) -> Tensor:
        """The normalised drop ``d = (p - m) / (o - m)`` of Figure 1.

        Args:
            m (float, optional): The floor. The paper takes the minimum, across all
                methods compared, of the fully degraded mean probability; use
                :func:`~captum_iba.metrics.compare` for that. Default: this
                result's own last level (see :func:`normalized_drop`).
            include_origin (bool): Prepend level 0 (where ``d = 1``). Default True.

        Returns:
            Tensor: ``(K + 1,)`` or ``(K,)`` float64.
        """
        curve = self.full_curve if include_origin else self.curve
        (drop,), _ = normalized_drop([curve], m, [self.original_probability])
        return drop

    @property
    def log_odds_curve(self) -> Tensor:
        """Tensor: ``(K,)`` mean change of the target log-odds at each level.

        ``mean(logodds(p_k) - logodds(o))`` with ``logodds(p) = log p - log(1 - p)``
        computed from the logits (Shrikumar et al., 2017; Chen et al., 2019). More
        negative is better with most-relevant-first order.
        """
        return aggregates.log_odds_curve(self.original_log_odds, self.log_odds)

    @property
    def accuracy_curve(self) -> Tensor:
        """Tensor: ``(K,)`` share of instances predicted as the target at each level.

        When the target is the gold label this is the accuracy; when it is the
        predicted label (``target=None``) it is the agreement with the original
        prediction.
        """
        return aggregates.accuracy_curve(self.preds, self.target)

    # ---- the scalar aggregates (registered in captum_iba.metrics.aggregates) ---------
    def summary(self) -> Dict[str, Any]:
        """The scalar aggregates, as a plain dict.

        Returns:
            dict: ``method``, ``num_instances``, then every registered
            aggregate (:data:`~captum_iba.metrics.aggregates.AGGREGATES`) by
            its name: ``original_probability`` (``o``), ``first_level_drop``,
            ``aopc``, ``comprehensiveness``, ``sufficiency`` (None if not
            computed), ``log_odds``, ``original_accuracy``, and any added with
            :func:`~captum_iba.metrics.aggregates.register_aggregate`.
        """
        out: Dict[str, Any] = {
            "method": self.method,
            "num_instances": self.num_instances,
        }
        for entry in aggregates.registered():
            out[entry.name] = aggregates.value_of(entry, self)
        return out

    def __getattr__(self, name: str) -> Any:
        """A registered aggregate as an attribute (``result.aopc``)."""
        entry = next(
            (e for e in aggregates.registered() if e.facts["attribute"] == name),
            None,
        )
        if entry is None:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r}"
            )
        value = aggregates.value_of(entry, self)
        if value is None:
            missing = [f for f in entry.facts["fields"] if getattr(self, f) is None]
            hint = _NOT_COMPUTED.get(missing[0], f"{missing[0]}, not computed")
            raise ValueError(f"{name} needs {hint}")
        return value

    def __dir__(self) -> List[str]:
        attributes = [e.facts["attribute"] for e in aggregates.registered()]
        return sorted(set(super().__dir__()) | set(attributes))

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
            "format": _FORMAT,
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

        Raises:
            ValueError: When ``format`` is not this class's, a field is missing
                or not numeric, or the fields' shapes disagree (``levels`` with
                ``probs``, every per-instance field with ``target``).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if data.get("format") != _FORMAT:
            raise ValueError(
                f"format is {data.get('format')!r}, expected {_FORMAT!r} (not a "
                "file written by DegradationResult.to_json)"
            )
        missing = [k for k in ("levels",) + cls._LONG_FIELDS if data.get(k) is None]
        missing += [k for k in ("original_probs", "probs") if data.get(k) is None]
        if missing:
            raise ValueError(f"missing field(s) {missing}")
        try:
            kwargs: Dict[str, Any] = {
                "levels": [float(v) for v in data["levels"]],
                "settings": dict(data.get("settings") or {}),
            }
            for name in cls._FLOAT_FIELDS:
                value = data.get(name)
                kwargs[name] = (
                    None if value is None else torch.tensor(value, dtype=torch.float64)
                )
            for name in cls._LONG_FIELDS:
                kwargs[name] = torch.tensor(data[name], dtype=torch.long)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"a field is not numeric: {err}") from None
        n_levels, n = len(kwargs["levels"]), kwargs["target"].numel()
        for name in ("probs", "preds", "log_odds", "n_removed", "kept_probs"):
            if kwargs.get(name) is not None and kwargs[name].dim() == 1:
                kwargs[name] = kwargs[name].reshape(-1, max(n_levels, 1))
            if kwargs.get(name) is not None and tuple(kwargs[name].shape) != (
                n,
                n_levels,
            ):
                raise ValueError(
                    f"{name} has shape {tuple(kwargs[name].shape)}, expected "
                    f"({n}, {n_levels}) for {n} instances and {n_levels} levels"
                )
        for name in ("original_probs", "original_log_odds", "original_preds"):
            if kwargs.get(name) is not None and kwargs[name].numel() != n:
                raise ValueError(f"{name} has {kwargs[name].numel()} values for {n}")
        return cls(**kwargs)

    def instance_records(self) -> List[Dict[str, Any]]:
        """One JSON-serialisable dict per instance, with every per-instance field
        (``target``, ``original_probs``, ``probs`` ..., ``kept_probs`` when
        computed): the rows a corpus run stores per instance.

        Returns:
            list[dict]: ``B`` dicts; floats round-trip exactly through JSON.
        """
        names = [
            n
            for n in self._FLOAT_FIELDS + self._LONG_FIELDS
            if getattr(self, n) is not None
        ]
        columns = {n: getattr(self, n).tolist() for n in names}
        return [{n: columns[n][i] for n in names} for i in range(self.num_instances)]

    @classmethod
    def from_instance_records(
        cls,
        records: Sequence[Mapping[str, Any]],
        levels: Sequence[Union[float, int]],
        settings: Optional[Mapping[str, Any]] = None,
    ) -> "DegradationResult":
        """Rebuild a result from :meth:`instance_records` (of one or several
        results, concatenated in the order given).

        Args:
            records (Sequence[Mapping]): Per-instance dicts.
            levels (Sequence): The removal levels they share.
            settings (Mapping, optional): The settings of the result;
                ``num_instances`` is set to ``len(records)``.

        Returns:
            DegradationResult: The result.

        Raises:
            ValueError: If there is no record.
        """
        if not records:
            raise ValueError("no instance record given")
        data: Dict[str, Any] = {"format": _FORMAT, "levels": list(levels)}
        data["settings"] = dict(settings or {}, num_instances=len(records))
        for name in cls._FLOAT_FIELDS + cls._LONG_FIELDS:
            present = records[0].get(name) is not None
            data[name] = [r[name] for r in records] if present else None
        return cls.from_dict(data)

    @classmethod
    def concat(cls, results: Sequence["DegradationResult"]) -> "DegradationResult":
        """One result over the instances of several (shards or batches of one test):
        the per-instance tensors concatenated in the order given; every aggregate
        is then computed over all of them.

        Args:
            results (Sequence[DegradationResult]): Results of the same test on
                different instances.

        Returns:
            DegradationResult: The merged result, with the first result's
            settings (``num_instances`` set to the total).

        Raises:
            ValueError: If ``results`` is empty, or the results differ in their
                levels, in having sufficiency, or in a setting that defines the
                test (method, removal, unit, convention, order, target, special
                tokens).
        """
        if not results:
            raise ValueError("no result given to concatenate")
        first = results[0]
        for i, other in enumerate(results[1:], 1):
            _check_same_test(first, other, i)
        names = [
            n
            for n in cls._FLOAT_FIELDS + cls._LONG_FIELDS
            if getattr(first, n) is not None
        ]
        tensors = {n: torch.cat([getattr(r, n) for r in results]) for n in names}
        settings = copy.deepcopy(first.settings)
        if "num_instances" in settings:
            settings["num_instances"] = sum(r.num_instances for r in results)
        return cls(levels=list(first.levels), settings=settings, **tensors)

    def to_json(self, path: Optional[Union[str, os.PathLike]] = None) -> str:
        """Serialise to JSON (exact: float64 values round-trip).

        Args:
            path (str or PathLike, optional): Also write the JSON to this file,
                atomically (a temporary file beside it, then a rename).

        Returns:
            str: The JSON text.
        """
        text = json.dumps(self.to_dict())
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, source: Union[str, os.PathLike]) -> "DegradationResult":
        """Load a result saved by :meth:`to_json`.

        Args:
            source (str or PathLike): JSON text, or the path of a file holding it.

        Returns:
            DegradationResult: The result.

        Raises:
            FileNotFoundError: Naming the file, when there is none.
            ValueError: Naming the file (when ``source`` is one), for text that
                is not JSON or not a result (see :meth:`from_dict`).
        """
        data, where = read_json(source, "DegradationResult")
        try:
            return cls.from_dict(data)
        except ValueError as err:
            raise ValueError(f"{where}: not a DegradationResult: {err}") from None


def _check_same_test(
    first: DegradationResult, other: DegradationResult, i: int
) -> None:
    """Raise ValueError unless result ``i`` (``other``) may be merged with result 0."""
    if list(other.levels) != list(first.levels):
        raise ValueError(
            f"result {i} has levels {list(other.levels)}, result 0 {list(first.levels)}"
        )
    if (other.kept_probs is None) != (first.kept_probs is None):
        raise ValueError(
            f"results 0 and {i} differ in compute_sufficiency: only one has kept_probs"
        )
    for key in _SAME_TEST:
        if key in first.settings and key in other.settings:
            if first.settings[key] != other.settings[key]:
                raise ValueError(
                    f"results 0 and {i} differ in settings[{key!r}]: "
                    f"{first.settings[key]!r} and {other.settings[key]!r}"
                )


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
