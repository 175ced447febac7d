"""Registries of names: one per kind of name (methods, priors, configurations).

A :class:`Registry` maps a name (looked up in any case) to an :class:`Entry`:
the object itself, or where to import it from (``"module:attribute"``), a
one-line summary for help texts, and the keyword arguments the entry fixes.
Entries given as import paths are imported only when a name is resolved, so
that listing the names (``captum-iba --help``) imports neither torch nor any
method. This module imports nothing heavy.
"""

import importlib
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

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


#: What a registry reads from an object it adopts (a user's class): its
#: summary and its facts.
Adopt = Callable[[Any], Tuple[str, Mapping[str, Any]]]


class Registry:
    """Names of one kind, each mapped to an :class:`Entry`.

    Args:
        kind (str): What the names are, for messages (e.g. ``"method"``).
        group (str, optional): An entry-point group (e.g.
            ``"captum_iba.methods"``): the objects installed packages declare
            there are adopted under their entry point's name when the names
            are first used (:meth:`adopt`).
        adopt (Callable, optional): Reads an adopted object's summary and
            facts (default: its docstring's first line, no facts).

    Examples::

        >>> METHODS = Registry("method")
        >>> METHODS.add("IG", "captum_iba.evaluation.ig:IntegratedGradientsScorer",
        ...             "integrated gradients")
        >>> METHODS.names()
        ['IG']
    """

    def __init__(
        self, kind: str, group: Optional[str] = None, adopt: Optional[Adopt] = None
    ) -> None:
        self.kind = kind
        self.group = group
        self._adopt = adopt or _docstring_summary
        self._entries: Dict[str, Entry] = {}
        #: Other names (lower case) -> the entry they give, and the warning a
        #: deprecated one raises (None for a plain other name).
        self._aliases: Dict[str, Tuple[Entry, Optional[str]]] = {}
        self._discovered = group is None

    def adopt(self, obj: Any, name: Optional[str] = None) -> Entry:
        """Register an object under ``name`` (default its ``name``
        attribute), its summary and facts read from it.

        Raises:
            ValueError: When the name is taken, or the object's declarations
                are refused by the registry's reader.
        """
        summary, facts = self._adopt(obj)
        return self.add(name or obj.name, obj, summary, facts=facts)

    def _discover(self) -> None:
        """Adopt the objects of the entry-point group, once (a package that
        fails to load is left out with a warning naming it)."""
        if self._discovered:
            return
        self._discovered = True
        for point in _entry_points(self.group):
            if point.name.lower() in self._entries:
                continue
            try:
                self.adopt(point.load(), point.name)
            except Exception as err:  # a broken plug-in must not break the rest
                warnings.warn(
                    f"{self.kind} {point.name!r} from the entry point "
                    f"{point.value!r} ({self.group}) is left out: "
                    f"{type(err).__name__}: {err}",
                    stacklevel=3,
                )

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
        if (old is not None and old.target is not target) or key in self._aliases:
            raise ValueError(f"a {self.kind} named {name!r} is already registered")
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

    def alias(self, name: str, entry: Entry, deprecated: Optional[str] = None) -> None:
        """Give ``entry`` another name: ``name`` (any case) then looks it up.

        Args:
            name (str): The other name (free in any case).
            entry (Entry): What it gives: a registered entry, or one made
                from it (e.g. under the old name, as results showed it).
            deprecated (str, optional): The warning (a ``DeprecationWarning``)
                a look-up of ``name`` raises; None for a plain other name.

        Raises:
            ValueError: When the name is taken.
        """
        key = name.lower()
        if key in self._entries or key in self._aliases:
            raise ValueError(f"a {self.kind} named {name!r} is already registered")
        self._aliases[key] = (entry, deprecated)

    def aliases(self, deprecated: bool = False) -> Dict[str, Entry]:
        """The other names and the entries they give (the deprecated ones
        with ``deprecated``, else the plain ones), in registration order."""
        return {
            n: e
            for n, (e, why) in self._aliases.items()
            if (why is not None) == deprecated
        }

    def deprecation(self, name: str) -> Optional[str]:
        """The warning of a deprecated name (None for any other)."""
        found = self._aliases.get(name.lower()) if isinstance(name, str) else None
        return found[1] if found else None

    def names(self) -> List[str]:
        """The registered names, in registration order."""
        self._discover()
        return [e.name for e in self._entries.values()]

    def items(self) -> List[Tuple[str, str]]:
        """``(name, summary)`` pairs, in registration order (for help texts)."""
        self._discover()
        return [(e.name, e.summary) for e in self._entries.values()]

    def entry(self, name: str, warn: bool = True) -> Entry:
        """The entry of ``name`` (any case), or of another name of it
        (:meth:`alias`; a deprecated one warns, unless ``warn`` is False).

        Raises:
            ValueError: For an unknown name; the message lists the known ones.
        """
        self._discover()
        if isinstance(name, str) and name.lower() in self._entries:
            return self._entries[name.lower()]
        if isinstance(name, str) and name.lower() in self._aliases:
            entry, deprecated = self._aliases[name.lower()]
            if deprecated and warn:
                warnings.warn(deprecated, DeprecationWarning, stacklevel=3)
            return entry
        raise ValueError(
            f"Unknown {self.kind} {name!r}; choose from {', '.join(self.names())}"
        )

    def load(self, name: str) -> Any:
        """The object registered under ``name`` (see :meth:`Entry.load`)."""
        return self.entry(name).load()

    def __contains__(self, name: object) -> bool:
        self._discover()
        if not isinstance(name, str):
            return False
        return name.lower() in self._entries or name.lower() in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._discover()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def _docstring_summary(obj: Any) -> Tuple[str, Mapping[str, Any]]:
    """The first line of an object's docstring, and no facts."""
    return (getattr(obj, "__doc__", None) or "").strip().split("\n")[0], {}


def _entry_points(group: Optional[str]) -> List[Any]:
    """The entry points of ``group`` (Python 3.9's API too)."""
    try:
        return list(metadata.entry_points(group=group))
    except TypeError:  # Python 3.9: a dict of groups
        return list(metadata.entry_points().get(group, []))  # type: ignore[attr-defined]
