"""User errors of the command line, and the one check of comma-separated lists."""

from typing import Iterable, List

__all__ = ["CLIError", "split_choices"]


class CLIError(ValueError):
    """A user error: printed as one line, exit code 2 (a ``ValueError`` for
    library callers, e.g. of :func:`captum_iba.explain`)."""


def split_choices(value: str, allowed: Iterable[str], what: str) -> List[str]:
    """Splits a comma-separated option and checks every item.

    Args:
        value (str): The option's value, e.g. ``"iba,ig"``.
        allowed (Iterable[str]): The accepted items.
        what (str): The item's name for the error, e.g. ``"method"``.

    Returns:
        List[str]: The items, in the given order.

    Raises:
        CLIError: If ``value`` names no item or an unknown one.
    """
    allowed = list(allowed)
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in chosen if v not in allowed]
    if bad or not chosen:
        raise CLIError(f"unknown {what}(s) {bad or [value]}; choose from {allowed}")
    return chosen
