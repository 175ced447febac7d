r"""The options of the degradation test, as one typed, frozen object.

:class:`DegradationOptions` holds every choice of
:func:`~captum_iba.metrics.degradation_test` that does not depend on the data:
the removal levels and how a level becomes a number of tokens, the order, the
removal strategy (:mod:`~captum_iba.metrics.strategies`), which tokens are
never removed, sufficiency, and the batching bounds. Each value is checked once,
when the object is built; a bad one raises an error that names its field. The
presets of :mod:`captum_iba.evaluation.presets` are such objects, and
``dataclasses.replace(options, field=value)`` derives a variant.

:class:`KnownInputs` holds what the caller already knows about the data
(the removable positions, the original logits). :class:`RandomizationOptions`
holds the choices of the model-randomisation check.

Token ids come from a tokenizer once, with :meth:`DegradationOptions.for_tokenizer`
(or :meth:`~DegradationOptions.with_tokenizer` on existing options).
"""

import dataclasses
import math
import numbers
from dataclasses import dataclass, fields
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import numpy as np
from torch import Tensor

from captum_iba._utils.common import tokenizer_ids
from captum_iba.metrics._removal import DEFAULT_TOKENS_PER_BATCH
from captum_iba.metrics.strategies import Deletion, RemovalStrategy, as_removal
from captum_iba.version import __version__

__all__ = [
    "DEFAULT_TOKENS_PER_BATCH",
    "LENGTH_CONVENTIONS",
    "LEVEL_UNITS",
    "ORDERS",
    "PAPER_LEVELS",
    "DegradationOptions",
    "KnownInputs",
    "RandomizationOptions",
    "with_progress",
]

#: The paper's removal levels: k/9 of the length for k = 1..9.
PAPER_LEVELS: Tuple[float, ...] = tuple(k / 9 for k in range(1, 10))

ORDERS = ("morf", "lerf")
LENGTH_CONVENTIONS = ("tokens", "paper")
LEVEL_UNITS = ("fraction", "count")

Level = Union[float, int]


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}")


def _check_flag(name: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, (bool, np.bool_)):
        kind = "True, False or None" if optional else "True or False"
        raise ValueError(f"{name} must be {kind}; got {value!r}")


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def parse_levels(
    levels: Union[Level, Iterable[Level], Tensor], unit: str
) -> List[Level]:
    """The removal levels as a list of floats (fractions) or ints (counts).

    Raises:
        ValueError: Naming ``levels`` or ``level_unit``, on values outside
            [0, 1] (fractions), non-integer or negative counts, or none.
        TypeError: On levels that are not numbers.
    """
    _check_choice("level_unit", unit, LEVEL_UNITS)
    if isinstance(levels, Tensor):
        levels = levels.tolist()
    if isinstance(levels, numbers.Number):
        levels = [levels]
    out: List[Level] = []
    for lv in levels:  # type: ignore[union-attr]
        if isinstance(lv, bool) or not isinstance(lv, numbers.Real):
            raise TypeError(f"levels: removal levels must be numbers; got {lv!r}")
        if unit == "fraction":
            f = float(lv)
            if not (0.0 <= f <= 1.0):  # also rejects NaN
                raise ValueError(
                    f"levels: removal level {lv!r} is outside [0, 1] (use "
                    "level_unit='count' for numbers of tokens)"
                )
            out.append(f)
        else:
            if not math.isfinite(float(lv)) or float(lv) != int(lv) or int(lv) < 0:
                raise ValueError(
                    f"levels: with level_unit='count' levels are non-negative "
                    f"integers; got {lv!r}"
                )
            out.append(int(lv))
    if not out:
        raise ValueError("levels: at least one removal level is needed")
    return out


def _special_ids(value: Any) -> Optional[Tuple[int, ...]]:
    if value is None:
        return None
    if isinstance(value, Tensor):
        value = value.reshape(-1).tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(
            f"special_token_ids must be a collection of ids; got {value!r}"
        )
    bad = [
        v
        for v in value
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0
    ]
    if bad:
        raise ValueError(
            "special_token_ids must hold token ids (non-negative integers); "
            f"got {bad[0]!r}"
        )
    return tuple(sorted({int(v) for v in value}))


@dataclass(frozen=True)
class DegradationOptions:
    r"""The options of :func:`~captum_iba.metrics.degradation_test`, checked once.

    Every field has a default (the fair test: deletion, the paper's levels
    ``k/9`` of the removable tokens, most relevant first, special tokens kept).
    Values are checked and normalised when the object is built (levels to a
    tuple, ids to ints, a removal name to a strategy); a bad value raises
    ValueError naming its field. Derive variants with
    ``dataclasses.replace(options, ...)``.

    Args:
        levels (float, int, sequence or Tensor): Removal levels, in the order
            given. Default (or None) the paper's ``k/9`` for ``k = 1..9``
            (:data:`PAPER_LEVELS`); ``level_unit="count"`` needs its own.
        level_unit (str): ``"fraction"`` (levels in [0, 1]) or ``"count"``
            (levels are numbers of tokens, capped at the number of removable
            tokens). Default ``"fraction"``.
        length_convention (str): How a fraction becomes ``k`` (see
            :mod:`~captum_iba.metrics.degradation`): ``"tokens"`` (round half up
            of ``f * n``, ``n`` the removable tokens) or ``"paper"`` (floor of
            ``f`` times the full non-padding length, specials counted, capped at
            ``n``). Default ``"tokens"``.
        order (str): ``"morf"`` (most relevant first, the paper's) or ``"lerf"``
            (least relevant first). Default ``"morf"``.
        removal (RemovalStrategy): How removed tokens leave the input:
            :class:`~captum_iba.metrics.strategies.Deletion` (default),
            :class:`~captum_iba.metrics.strategies.Replacement` or
            :class:`~captum_iba.metrics.strategies.CustomRemoval`. The names
            ``"delete"``, ``"pad"`` (with ``pad_token_id``), a token id or a
            function are converted by
            :func:`~captum_iba.metrics.strategies.as_removal`; ``"mask"`` and
            ``"unk"`` need a tokenizer: :meth:`for_tokenizer`.
        keep_special_tokens (bool): Never remove a special token. Default True.
        special_token_ids (Iterable[int], optional): The special tokens' ids
            (stored sorted, as a tuple). Default None: none known
            (:meth:`for_tokenizer` takes the tokenizer's, UNK and PAD excepted).
        pad_token_id (int, optional): The padding id: padding detection when no
            attention mask is given, and deletion's fill (0 when None).
        compute_sufficiency (bool): Also evaluate "keep only the first k tokens"
            inputs, for :attr:`DegradationResult.sufficiency` (doubles the forward
            passes). Default True.
        max_examples_per_batch (int, optional): Most sequences per forward call.
            Default None: as many as ``max_tokens_per_batch`` allows.
        max_tokens_per_batch (int): When ``max_examples_per_batch`` is None, a
            forward call takes as many sequences (sorted by length) as keep
            sequences x padded width within this bound. Default 2048. Results do
            not depend on the batching (up to float rounding).
        group_by_length (bool, optional): Deletion only: one model call per
            remaining length, so that no sequence is padded. Default None: True
            when deleting without an attention mask or per-token additional
            argument (a model that would otherwise see the padding).
        show_progress (bool): A progress bar over the test's model calls.
            Default False. Not recorded: it changes no result.

    Raises:
        ValueError: Naming the field, on a bad value.
        TypeError: On levels that are not numbers.

    Examples::

        >>> options = DegradationOptions.for_tokenizer(tokenizer, removal="mask")
        >>> counts = dataclasses.replace(options, levels=[1, 2, 5], level_unit="count")
    """

    levels: Tuple[Level, ...] = PAPER_LEVELS
    level_unit: str = "fraction"
    length_convention: str = "tokens"
    order: str = "morf"
    removal: RemovalStrategy = Deletion()
    keep_special_tokens: bool = True
    special_token_ids: Optional[Tuple[int, ...]] = None
    pad_token_id: Optional[int] = None
    compute_sufficiency: bool = True
    max_examples_per_batch: Optional[int] = None
    max_tokens_per_batch: int = DEFAULT_TOKENS_PER_BATCH
    group_by_length: Optional[bool] = None
    show_progress: bool = False

    def __post_init__(self) -> None:
        _check_choice("level_unit", self.level_unit, LEVEL_UNITS)
        if self.levels is None or (
            isinstance(self.levels, tuple) and self.levels == PAPER_LEVELS
        ):
            if self.level_unit == "count":
                raise ValueError("levels: level_unit='count' needs explicit levels")
            self._set("levels", PAPER_LEVELS)
        self._set("levels", tuple(parse_levels(self.levels, self.level_unit)))
        _check_choice("length_convention", self.length_convention, LENGTH_CONVENTIONS)
        _check_choice("order", self.order, ORDERS)
        if self.pad_token_id is not None:
            if (
                isinstance(self.pad_token_id, bool)
                or not isinstance(self.pad_token_id, numbers.Integral)
                or self.pad_token_id < 0
            ):
                raise ValueError(
                    "pad_token_id must be a token id or None; "
                    f"got {self.pad_token_id!r}"
                )
            self._set("pad_token_id", int(self.pad_token_id))
        self._set("removal", as_removal(self.removal, pad_token_id=self.pad_token_id))
        _check_flag("keep_special_tokens", self.keep_special_tokens)
        self._set("keep_special_tokens", bool(self.keep_special_tokens))
        self._set("special_token_ids", _special_ids(self.special_token_ids))
        _check_flag("compute_sufficiency", self.compute_sufficiency)
        self._set("compute_sufficiency", bool(self.compute_sufficiency))
        if self.max_examples_per_batch is not None:
            value = _positive("max_examples_per_batch", self.max_examples_per_batch)
            self._set("max_examples_per_batch", value)
        value = _positive("max_tokens_per_batch", self.max_tokens_per_batch)
        self._set("max_tokens_per_batch", value)
        _check_flag("group_by_length", self.group_by_length, optional=True)
        if self.group_by_length is not None:
            self._set("group_by_length", bool(self.group_by_length))
        _check_flag("show_progress", self.show_progress)
        self._set("show_progress", bool(self.show_progress))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, **fields: Any) -> "DegradationOptions":
        """Options with a tokenizer's ids: where ``special_token_ids`` or
        ``pad_token_id`` is None (or not given), the tokenizer's (its special ids
        less UNK and PAD, which stand for words and padding); a ``removal`` name
        (``"mask"``, ``"pad"``, ``"unk"``) becomes the replacement by that token.

        Args:
            tokenizer (Any): A Hugging Face tokenizer (None: nothing to take).
            **fields: Any field of :class:`DegradationOptions`.

        Returns:
            DegradationOptions: The options.

        Raises:
            ValueError: On a bad field, or a removal token the tokenizer lacks.
        """
        found = tokenizer_ids(tokenizer) if tokenizer is not None else {}
        for name in ("special_token_ids", "pad_token_id"):
            if fields.get(name) is None:
                fields[name] = found.get(name)
        if "removal" in fields:
            fields["removal"] = as_removal(
                fields["removal"], tokenizer, pad_token_id=fields["pad_token_id"]
            )
        return cls(**fields)

    def with_tokenizer(self, tokenizer: Any, **changes: Any) -> "DegradationOptions":
        """These options with ``changes``, then a tokenizer's ids where none is
        set (see :meth:`for_tokenizer`).

        Args:
            tokenizer (Any): A Hugging Face tokenizer (None: nothing to take).
            **changes: Fields to change, as with ``dataclasses.replace``.

        Returns:
            DegradationOptions: New options.
        """
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ValueError(
                f"unknown degradation option(s) {unknown}: the fields are "
                f"{[f.name for f in fields(self)]}"
            )
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return type(self).for_tokenizer(tokenizer, **dict(values, **changes))

    def record(self, **run: Any) -> Dict[str, Any]:
        """The settings a result records.

        Args:
            **run: ``method``, ``target`` (``"given"`` or ``"predicted"``),
                ``num_instances``, ``num_classes``, ``group_by_length``,
                ``seed`` and ``settings`` (the attribution method's).
        """
        record: Dict[str, Any] = {"method": run["method"]}
        record.update(self.removal.record())
        record.update(
            levels=list(self.levels),
            level_unit=self.level_unit,
            length_convention=self.length_convention,
            order=self.order,
            target=run["target"],
            keep_special_tokens=self.keep_special_tokens,
            special_token_ids=list(self.special_token_ids or ()),
            pad_token_id=self.pad_token_id,
            num_instances=run["num_instances"],
            num_classes=run["num_classes"],
            compute_sufficiency=self.compute_sufficiency,
            group_by_length=run["group_by_length"],
            seed=run["seed"],
            captum_iba_version=__version__,
        )
        settings = run["settings"]
        if settings:
            record["attribution"] = dict(settings)
            if run["method"] is None:
                record["method"] = settings.get("method")
        return record


def with_progress(options: Any, show_progress: bool) -> Any:
    """``options`` (None: the defaults) with ``show_progress=True`` when
    ``show_progress`` is set; unchanged otherwise (also when they are not a
    :class:`DegradationOptions`, which the test then refuses).

    Args:
        options (DegradationOptions, optional): The test's options.
        show_progress (bool): Whether to show the test's progress bar.

    Returns:
        DegradationOptions or None: The options.
    """
    if not show_progress or not isinstance(options, (DegradationOptions, type(None))):
        return options
    return dataclasses.replace(options or DegradationOptions(), show_progress=True)


@dataclass(frozen=True)
class KnownInputs:
    """What the caller of :func:`~captum_iba.metrics.degradation_test` already
    knows about its inputs, beyond the options (both are checked by the test).

    Args:
        removable (Tensor, optional): ``(B, L)`` bool: the only positions that
            may be ranked and removed (e.g. a prompt's content, its instruction
            and answer kept:
            :func:`~captum_iba.metrics.prompts.prompt_degradation_test`).
            Levels count these tokens. Default None: every real token that is
            not special.
        original_logits (Tensor, optional): ``(B, C)`` logits of the original
            inputs, from :func:`~captum_iba.metrics.original_logits_of` with the
            same inputs and options (or options of the same
            :data:`~captum_iba.metrics.degradation.FIRST_PASS_FIELDS`): used
            instead of the test's own first pass, with identical results.
            Default None: the test computes them.

    Examples::

        >>> logits = original_logits_of(model, ids, mask, options=options)
        >>> known = KnownInputs(original_logits=logits)
        >>> degradation_test(model, ids, scores, labels, attention_mask=mask,
        ...                  options=options, known=known)
    """

    removable: Optional[Tensor] = None
    original_logits: Optional[Tensor] = None


@dataclass(frozen=True)
class RandomizationOptions:
    """The rarely changed choices of
    :func:`~captum_iba.metrics.cascading_randomization`, as one frozen object
    (values are used as given; the check validates them).

    Args:
        special_token_ids (Sequence[int], optional): Token ids left out of the
            correlation; overrides the tokenizer's. Default None: the
            tokenizer's (none without one).
        stages (Sequence, optional): ``(name, [module names])`` pairs in
            cascade order (for models
            :func:`~captum_iba.metrics.randomization.cascade_stages` cannot
            split). Default None: those stages.
        reinit (Callable, optional): Re-initialisation of one module (see
            :func:`~captum_iba.metrics.randomization.reinitialize`). Default
            None: the model's own.
        seed (int): Seed of the new weights (stage ``k`` uses ``seed + k``).
            Default 0.
        max_examples_per_batch (int, optional): Instances per call of the
            explanation function and per forward. Default None: all at once.
        show_progress (bool): A tqdm bar over the stages. Default False.

    Examples::

        >>> options = RandomizationOptions(seed=1, max_examples_per_batch=8)
        >>> cascading_randomization(explain, model, ids, attention_mask=mask,
        ...                         tokenizer=tokenizer, options=options)
    """

    special_token_ids: Optional[Sequence[int]] = None
    stages: Optional[Sequence[Tuple[str, Sequence[str]]]] = None
    reinit: Optional[Callable[[Any], None]] = None
    seed: int = 0
    max_examples_per_batch: Optional[int] = None
    show_progress: bool = False
