"""The keyword arguments :func:`~captum_iba.metrics.degradation_test` took before
:class:`~captum_iba.metrics.options.DegradationOptions`, converted in one place.

``levels=``, ``removal=``, ``tokenizer=``, ``pad_token_id=`` ... become one
:class:`DegradationOptions` (:func:`legacy_options`), and ``method=``, ``seed=``,
``settings=`` the ``metadata`` mapping, ``show_progress=`` the options'
``show_progress``; the call warns with a
DeprecationWarning naming the new form (:func:`accepts_legacy_keywords`).

:func:`~captum_iba.metrics.cascading_randomization`'s old keywords
(``seed=``, ``stages=`` ...) become one
:class:`~captum_iba.metrics.options.RandomizationOptions` the same way
(:func:`randomization_options`).
"""

import dataclasses
import functools
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeVar

from captum_iba._utils.common import tokenizer_ids
from captum_iba.metrics._removal import DEFAULT_TOKENS_PER_BATCH
from captum_iba.metrics.options import (
    PAPER_LEVELS,
    DegradationOptions,
    RandomizationOptions,
    with_progress,
)
from captum_iba.metrics.strategies import as_removal

__all__ = [
    "LEGACY_OPTION_KEYWORDS",
    "accepts_legacy_keywords",
    "legacy_options",
    "randomization_options",
]

#: Keywords that became fields (or the tokenizer) of :class:`DegradationOptions`.
LEGACY_OPTION_KEYWORDS = (
    "levels",
    "level_unit",
    "length_convention",
    "removal",
    "order",
    "special_token_ids",
    "tokenizer",
    "keep_special_tokens",
    "pad_token_id",
    "mask_token_id",
    "unk_token_id",
    "compute_sufficiency",
    "max_examples_per_batch",
    "max_tokens_per_batch",
    "group_by_length",
)
#: Keywords that became keys of ``metadata`` (``settings`` is ``"attribution"``).
LEGACY_METADATA_KEYWORDS = {
    "method": "method",
    "seed": "seed",
    "settings": "attribution",
}

F = TypeVar("F", bound=Callable[..., Any])


def legacy_options(old: Mapping[str, Any]) -> DegradationOptions:
    """The options the old keyword arguments described (explicit ids win over
    the tokenizer's, as they did).

    Args:
        old (Mapping[str, Any]): Some of :data:`LEGACY_OPTION_KEYWORDS` and
            their values; the others take their old defaults.

    Returns:
        DegradationOptions: The options.
    """
    unknown = sorted(set(old) - set(LEGACY_OPTION_KEYWORDS))
    if unknown:
        raise TypeError(f"not an old keyword of degradation_test: {unknown}")
    tokenizer = old.get("tokenizer")
    found = tokenizer_ids(tokenizer) if tokenizer is not None else {}
    ids = {k: old.get(k) for k in ("pad_token_id", "mask_token_id", "unk_token_id")}
    ids = {k: v if v is not None else found.get(k) for k, v in ids.items()}
    special_token_ids = old.get("special_token_ids")
    if special_token_ids is None:
        special_token_ids = found.get("special_token_ids")
    levels = old.get("levels")
    return DegradationOptions(
        levels=PAPER_LEVELS if levels is None else levels,
        level_unit=old.get("level_unit", "fraction"),
        length_convention=old.get("length_convention", "tokens"),
        order=old.get("order", "morf"),
        removal=as_removal(old.get("removal", "delete"), **ids),
        keep_special_tokens=old.get("keep_special_tokens", True),
        special_token_ids=special_token_ids,
        pad_token_id=ids["pad_token_id"],
        compute_sufficiency=old.get("compute_sufficiency", True),
        max_examples_per_batch=old.get("max_examples_per_batch"),
        max_tokens_per_batch=old.get("max_tokens_per_batch", DEFAULT_TOKENS_PER_BATCH),
        group_by_length=old.get("group_by_length"),
    )


def _convert(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``kwargs`` with the old keywords replaced by ``options`` / ``metadata``."""
    old_options = {k: kwargs.pop(k) for k in LEGACY_OPTION_KEYWORDS if k in kwargs}
    old_meta = {k: kwargs.pop(k) for k in LEGACY_METADATA_KEYWORDS if k in kwargs}
    used = sorted(old_options) + sorted(old_meta)
    new = []
    if old_options:
        if kwargs.get("options") is not None:
            raise TypeError(
                f"degradation_test got options= and the old keyword(s) "
                f"{sorted(old_options)}: put them in the DegradationOptions"
            )
        kwargs["options"] = legacy_options(old_options)
        new.append("options=DegradationOptions.for_tokenizer(tokenizer, ...)")
    if old_meta:
        if kwargs.get("metadata") is not None:
            raise TypeError(
                f"degradation_test got metadata= and the old keyword(s) "
                f"{sorted(old_meta)}: put them in metadata"
            )
        kwargs["metadata"] = {
            LEGACY_METADATA_KEYWORDS[k]: v for k, v in old_meta.items()
        }
        new.append("metadata={'method': ..., 'seed': ..., 'attribution': {...}}")
    warnings.warn(
        f"degradation_test's keyword argument(s) {used} are deprecated since 0.2; "
        "removed in 0.4: pass "
        f"{' and '.join(new)} (see captum_iba.metrics.DegradationOptions)",
        DeprecationWarning,
        stacklevel=4,
    )
    return kwargs


#: Where ``options`` is among :func:`degradation_test`'s positional arguments.
OPTIONS_POSITION = 7


def _fold_progress(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
    """``show_progress=`` (a keyword of 0.2) folded into the options, given
    by keyword or position (a bar shows when either asks for one)."""
    show = kwargs.pop("show_progress")
    warnings.warn(
        "degradation_test's keyword argument show_progress is deprecated since 0.3; "
        "removed in 0.4: pass "
        "options=DegradationOptions(..., show_progress=True)",
        DeprecationWarning,
        stacklevel=4,
    )
    if len(args) > OPTIONS_POSITION:
        given = list(args)
        given[OPTIONS_POSITION] = with_progress(given[OPTIONS_POSITION], show)
        return tuple(given)
    kwargs["options"] = with_progress(kwargs.get("options"), show)
    return args


def accepts_legacy_keywords(func: F) -> F:
    """Let ``func`` (:func:`degradation_test`) take the old keywords, with a
    DeprecationWarning; its signature stays the new one."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(
            k in kwargs
            for k in LEGACY_OPTION_KEYWORDS + tuple(LEGACY_METADATA_KEYWORDS)
        ):
            kwargs = _convert(kwargs)
        if "show_progress" in kwargs:
            args = _fold_progress(args, kwargs)
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def randomization_options(
    options: Optional[RandomizationOptions], old: Dict[str, Any]
) -> RandomizationOptions:
    """``options`` (None: the defaults), or the options the keyword arguments
    of earlier releases describe, with a DeprecationWarning naming the new
    form."""
    fields = {f.name for f in dataclasses.fields(RandomizationOptions)}
    unknown = sorted(set(old) - fields)
    if unknown:
        raise TypeError(
            f"cascading_randomization() got an unexpected keyword argument "
            f"{unknown[0]!r}"
        )
    if not old:
        return RandomizationOptions() if options is None else options
    if options is not None:
        raise TypeError(
            f"cascading_randomization got options= and the old keyword(s) "
            f"{sorted(old)}: put them in the RandomizationOptions"
        )
    spelled = ", ".join(f"{k}=..." for k in sorted(old))
    warnings.warn(
        f"cascading_randomization's keyword argument(s) {sorted(old)} are "
        f"deprecated since 0.3; removed in 0.4: pass "
        f"options=RandomizationOptions({spelled})",
        DeprecationWarning,
        stacklevel=4,  # the caller of log_usage's wrapper
    )
    return RandomizationOptions(**old)
