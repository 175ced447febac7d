"""A package's public names, imported on first use (PEP 562).

A package lists its names once, each with the module that defines it
(:func:`exports`); :func:`lazy_names` gives the package its ``__getattr__``
and ``__dir__``, so that importing one submodule (``captum_iba.attr.text``)
does not import the rest of the package, and a command loads only what it
runs. :func:`renamed` keeps earlier releases' names importable, with a
warning naming the new one.
"""

import importlib
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Tuple

__all__ = ["exports", "lazy_names", "renamed"]


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


def renamed(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` of ``module`` for earlier releases' ``names`` (old
    name -> ``"package.module:NewName"``): each still importable until 0.4,
    with a ``DeprecationWarning`` naming the new one."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        path, new = names[name].split(":")
        warnings.warn(
            f"{module}.{name} is deprecated since 0.3; removed in 0.4: "
            f"use {path}.{new}, "
            "the method's one class for a classifier or a causal LM",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(path), new)

    return __getattr__
