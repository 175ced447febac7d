"""A package's public names, imported on first use (PEP 562).

A package lists its names once, each with the module that defines it
(:func:`exports`); :func:`lazy_names` gives the package its ``__getattr__``
and ``__dir__``, so that importing one submodule (``captum_iba.attr.text``)
does not import the rest of the package, and a command loads only what it
runs.
"""

import importlib
from typing import Any, Callable, Dict, Iterable, List, Mapping, Tuple

__all__ = ["exports", "lazy_names"]


def exports(**modules: Iterable[str]) -> Dict[str, str]:
    """``{name: submodule}`` from ``submodule=[names, ...]`` (each submodule
    named relative to the package, e.g. ``text=["LayerRef", ...]``)."""
    return {name: module for module, names in modules.items() for name in names}


def lazy_names(
    package: str, names: Mapping[str, str], namespace: Dict[str, Any]
) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """``__getattr__`` and ``__dir__`` of ``package`` for ``names`` (name ->
    submodule, relative to the package); a name once loaded is kept in the
    package's ``namespace`` (its ``globals()``), so later lookups are plain."""

    def __getattr__(name: str) -> Any:
        if name in names:
            module = importlib.import_module(f"{package}.{names[name]}")
            value = getattr(module, name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
