"""The value checks of the declared options, torch-free.

Each check takes a value as the command line gives it (a string) or as
Python code gives it (an int, a float, a name) and returns it in its one
type, or raises :class:`BadValue` saying what was expected. ``BadValue`` is a
``ValueError`` for library code and an ``argparse.ArgumentTypeError`` for the
parser, which then prints the message after the option's name.
"""

import argparse
import math
import numbers
import os
from typing import Any, List, Optional, Union

__all__ = [
    "BF16_ENV_VAR",
    "BadValue",
    "beta_value",
    "cpu_bf16_setting",
    "int_in",
    "layer_value",
    "nonnegative_float",
    "positive_int",
    "seed_int",
]


class BadValue(ValueError, argparse.ArgumentTypeError):
    """A value an option does not take (the message says what it takes)."""


#: ``on``, ``off`` or ``auto``: bf16 on a CPU always, never, or when measured
#: faster than float32 (:mod:`captum_iba.attr._precision`).
BF16_ENV_VAR = "CAPTUM_IBA_CPU_BF16"


def cpu_bf16_setting() -> str:
    """``CAPTUM_IBA_CPU_BF16``'s setting: ``"on"``, ``"off"`` or ``"auto"``
    (unset or empty: ``"auto"``; any case, spaces around ignored).

    Raises:
        BadValue: For any other value, naming the variable and its values
            (the command line asks before any model loads).
    """
    setting = os.environ.get(BF16_ENV_VAR, "auto").strip().lower() or "auto"
    if setting not in ("on", "off", "auto"):
        raise BadValue(
            f"{BF16_ENV_VAR}={setting!r}: use 'on', 'off' or 'auto' (the default)"
        )
    return setting


def int_in(value: Any, low: int, high: Optional[int] = None) -> int:
    """``value`` (an int or its text) as an integer in ``low .. high``."""
    if isinstance(value, bool):
        raise BadValue(f"expected an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        number = int(value)
    else:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise BadValue(f"expected an integer, got {value!r}") from None
    if number < low or (high is not None and number > high):
        span = f"at least {low}" if high is None else f"in {low} .. {high}"
        raise BadValue(f"must be {span}, got {number}")
    return number


def positive_int(value: Any) -> int:
    """An integer >= 1."""
    return int_in(value, 1)


def seed_int(value: Any) -> int:
    """A seed in 0 .. 2**63 - 1 (what torch accepts)."""
    return int_in(value, 0, 2**63 - 1)


def nonnegative_float(value: Any) -> float:
    """A finite number >= 0."""
    if isinstance(value, bool):
        raise BadValue(f"expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadValue(f"expected a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise BadValue(f"must be a finite number >= 0, got {value!r}")
    return number


def share_value(value: Any) -> float:
    """A share in [0, 1)."""
    number = nonnegative_float(value)
    if number >= 1:
        raise BadValue(f"must be below 1 (a share of the tokens), got {value!r}")
    return number


def beta_value(value: Any) -> Union[float, str]:
    """IBA's beta: a finite number >= 0, or ``"auto"`` (Appendix A's rule)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return nonnegative_float(value)
    except BadValue:
        raise BadValue(
            f"must be a finite number >= 0 or 'auto', got {value!r}"
        ) from None


def layer_value(value: Any) -> Union[int, str, Any]:
    """A layer: an index into the model's layer stack (an int >= 0; its upper
    bound is checked against the model) or ``"embeddings"``. Objects (a
    module, a :class:`~captum_iba.attr.text.LayerRef`) pass as they are."""
    if isinstance(value, str) and value.strip().lower() == "embeddings":
        return "embeddings"
    if isinstance(value, (bool, numbers.Real)) and not (
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
    ):
        raise BadValue(
            f"expected a layer index (an int >= 0) or 'embeddings', got {value!r}"
        )
    if isinstance(value, (str, numbers.Integral)):
        try:
            return int_in(value, 0)
        except BadValue:
            raise BadValue(
                f"expected a layer index (an int >= 0) or 'embeddings', got {value!r}"
            ) from None
    return value


def comma_list(value: Any) -> List[Any]:
    """A comma-separated text as its items; a list or tuple as a list; any
    other value as a one-item list."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items:
            raise BadValue(f"expected one or more comma-separated names, got {value!r}")
        return items
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]
