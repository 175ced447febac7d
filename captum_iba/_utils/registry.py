"""Registries of names: one per kind of name (methods, priors, configurations).

A :class:`Registry` maps a name (looked up in any case) to an :class:`Entry`:
the object itself, or where to import it from (``"module:attribute"``), a
one-line summary for help texts, and the keyword arguments the entry fixes.
Entries given as import paths are imported only when a name is resolved, so
that listing the names (``captum-iba --help``) imports neither torch nor any
method. This module imports nothing heavy.
"""

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

__all__ = ["Entry", "Registry"]


@dataclass(frozen=True)
class Entry:
    """One registered name.

    Attributes:
        name (str): The name, as results and tables show it.
        target (Any): The object, or ``"package.module:attribute"`` to import.
        summary (str): One line for help texts and listings.
        defaults (Mapping[str, Any]): Keyword arguments the entry fixes when
            it is built (e.g. ``{"config": "faithful"}``): they win over
            shared resources, and callers may still override them.
        extra (str, optional): The pip extra it needs, when it is optional.
        facts (Mapping[str, Any]): What the kind of registry says of each of
            its names without importing it (e.g. a method's options and
            whether its scores are signed; an aggregate's better direction),
            read by help texts and tables.
    """

    name: str
    target: Any
    summary: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    extra: Optional[str] = None
    facts: Mapping[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        """The registered object (imported on first use).

        Raises:
            ImportError: When its module cannot be imported (e.g. an optional
                extra is missing); the message names the entry and the extra.
        """
        if not isinstance(self.target, str):
            return self.target
        module, _, attribute = self.target.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except ImportError as err:
            hint = f" (pip install 'captum-iba[{self.extra}]')" if self.extra else ""
            raise ImportError(f"{self.name!r} is not available{hint}: {err}") from err

    def build(self, *args: Any, **kwargs: Any) -> Any:
        """Call the registered object with the entry's ``defaults``, then
        ``kwargs`` (which win)."""
        return self.load()(*args, **{**self.defaults, **kwargs})


class Registry:
    """Names of one kind, each mapped to an :class:`Entry`.

    Args:
        kind (str): What the names are, for messages (e.g. ``"method"``).

    Examples::

        >>> METHODS = Registry("method")
        >>> METHODS.add("IG", "captum_iba.evaluation.ig:IntegratedGradientsScorer",
        ...             "integrated gradients")
        >>> METHODS.names()
        ['IG']
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: Dict[str, Entry] = {}

    def add(
        self,
        name: str,
        target: Any,
        summary: str = "",
        extra: Optional[str] = None,
        facts: Optional[Mapping[str, Any]] = None,
        **defaults: Any,
    ) -> Entry:
        """Register ``name``.

        Args:
            name (str): The name (unique in any case).
            target (Any): The object or ``"module:attribute"``.
            summary (str): One line for help texts.
            extra (str, optional): The pip extra it needs.
            facts (Mapping, optional): The entry's facts (see :class:`Entry`).
            **defaults: Keyword arguments the entry fixes when built.

        Returns:
            Entry: The new entry.

        Raises:
            ValueError: When another entry already has the name (any case).
        """
        key = name.lower()
        old = self._entries.get(key)
        if old is not None and old.target is not target:
            raise ValueError(f"a {self.kind} named {old.name!r} is already registered")
        entry = Entry(
            name,
            target,
            summary,
            MappingProxyType(dict(defaults)),
            extra,
            MappingProxyType(dict(facts or {})),
        )
        self._entries[key] = entry
        return entry

    def names(self) -> List[str]:
        """The registered names, in registration order."""
        return [e.name for e in self._entries.values()]

    def items(self) -> List[Tuple[str, str]]:
        """``(name, summary)`` pairs, in registration order (for help texts)."""
        return [(e.name, e.summary) for e in self._entries.values()]

    def entry(self, name: str) -> Entry:
        """The entry of ``name`` (any case).

        Raises:
            ValueError: For an unknown name; the message lists the known ones.
        """
        if isinstance(name, str) and name.lower() in self._entries:
            return self._entries[name.lower()]
        raise ValueError(
            f"Unknown {self.kind} {name!r}; choose from {', '.join(self.names())}"
        )

    def load(self, name: str) -> Any:
        """The object registered under ``name`` (see :meth:`Entry.load`)."""
        return self.entry(name).load()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
