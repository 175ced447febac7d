"""A request - methods and their options - checked against the declarations,
before any model loads (torch-free).

Every option is declared once in :data:`captum_iba.registry.OPTIONS` and
every method says which options it takes (its entry's ``options`` fact). A
request gives options for all its methods (``beta=1e-4``, ``--beta 1e-4``)
and per method (``method_options={"iba": {"beta": 1e-4}}``, ``--set
iba:beta=1e-4``). :func:`check_request` checks it:

* an option no chosen method takes is an error naming the option, the
  methods chosen and those that take it - never ignored;
* an option that some of the methods take applies to those (a note says
  which, for comparisons);
* a value an option's check refuses is an error naming the option;
* options for a method that was not asked for are an error;
* a method that does not explain the model's kind (a method for
  classifiers only on a causal LM, or the reverse; its entry's ``models``
  fact) is an error naming the methods that do - known from the model's
  configuration, before any weights load (:func:`check_model_kind`); most
  methods explain both kinds under one name.

The command line, :func:`captum_iba.explain`,
:func:`~captum_iba.evaluation.evaluate_corpus` and
:func:`~captum_iba.evaluation.build_scorers` all check through here.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from captum_iba.attr.kinds import kind_named, kinds_named
from captum_iba.registry import METHODS, OPTIONS, explains, method_kinds

__all__ = [
    "MethodRequest",
    "WrongKindError",
    "check_model_kind",
    "check_request",
    "check_values",
    "method_names",
    "option_label",
    "options_of",
    "takers",
    "unknown_keyword",
]


def options_of(method: str) -> Tuple[str, ...]:
    """The options the registered ``method`` takes (its entry's facts)."""
    return tuple(METHODS.entry(method, warn=False).facts.get("options", ()))


def option_label(name: str, cli: bool) -> str:
    """How a request spells option ``name``: its flag on the command line
    (``--ig-steps``), else ``ig_steps=``."""
    flag = OPTIONS.entry(name).facts.get("flag")
    return flag if cli and flag else f"{name}="


def takes(method: str, option: str, setting: Optional[str] = None) -> bool:
    """Whether ``method`` takes ``option`` (in ``setting``, when the option
    acts in some settings only)."""
    settings = OPTIONS.entry(option).facts.get("settings")
    in_setting = setting is None or not settings or setting in settings
    return option in options_of(method) and in_setting


def takers(option: str, methods: Optional[Sequence[str]] = None) -> List[str]:
    """The methods (all registered ones by default) that take ``option``."""
    return [m for m in (methods or METHODS.names()) if option in options_of(m)]


def option_for(method: str, key: str) -> Optional[str]:
    """The option of ``method`` named ``key`` or setting the keyword ``key``
    (``ig_steps`` or ``n_steps`` for IG); None when it has none."""
    key = key.replace("-", "_")
    for name in options_of(method):
        if key in (name, OPTIONS.entry(name).facts.get("kwarg")):
            return name
    return None


def method_names(names: Sequence[str]) -> Tuple[str, ...]:
    """Method names (any case, or another name of a method) as registered
    names, in order, once each; a deprecated name (an ``llm-*`` one) warns
    with a ``DeprecationWarning`` naming the new one.

    Raises:
        ValueError: For an unknown name (listing the known ones) or none.
    """
    if isinstance(names, str):
        names = [names]
    out = tuple(dict.fromkeys(METHODS.entry(n).name for n in names))
    if not out:
        raise ValueError("name at least one method")
    return out


def check_values(options: Mapping[str, Any], cli: bool = False) -> None:
    """The values of declared options checked alone, before anything else
    (the methods, the model) is known: a bad value is named first.

    Raises:
        ValueError: Naming the option, for a value its check refuses.
    """
    for name, value in options.items():
        if value is not None and name in OPTIONS:
            _check_value(name, value, option_label(name, cli))


@dataclass(frozen=True)
class MethodRequest:
    """A checked request.

    Attributes:
        methods (tuple[str, ...]): Registered method names, in order.
        options (Mapping[str, Any]): Option name -> checked value, given for
            every method that takes it.
        method_options (Mapping[str, Mapping[str, Any]]): Method -> option
            name -> checked value, for that method only (it wins).
        passthrough (Mapping[str, Mapping[str, Any]]): Method -> constructor
            keywords that are no declared option (the Python API's
            ``method_options``; the scorer's constructor checks them).
        notes (tuple[str, ...]): Options that apply to some of the methods
            only, in words.
        kind (str, optional): The kind of model the request was checked
            for (``"classifier"`` or ``"causal-lm"``; None: not checked):
            the resolver builds each method's class for that kind.
    """

    methods: Tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    method_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    passthrough: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()
    kind: Optional[str] = None

    def checked_for(self, kind: Any) -> bool:
        """Whether the request was checked for models of ``kind`` (a name or
        a :class:`~captum_iba.attr.kinds.ModelKind`): its methods explain
        them (:func:`check_model_kind`), not to be checked again."""
        return self.kind == kind_named(kind).name

    def values(self, method: str) -> Dict[str, Any]:
        """The option values ``method`` gets: those given for all methods
        that it takes, then its own."""
        mine = {k: v for k, v in self.options.items() if k in options_of(method)}
        return {**mine, **self.method_options.get(method, {})}


def _check_value(name: str, value: Any, label: str) -> Any:
    check: Callable[[Any], Any] = OPTIONS.load(name)
    try:
        return check(value)
    except ValueError as err:
        raise ValueError(f"{label} {err}") from None


def _global_options(
    methods: Tuple[str, ...],
    options: Mapping[str, Any],
    setting: Optional[str],
    cli: bool,
) -> Tuple[Dict[str, Any], List[str]]:
    checked: Dict[str, Any] = {}
    notes: List[str] = []
    for name, value in options.items():
        if value is None:
            continue
        if name not in OPTIONS:
            raise TypeError(
                f"unknown option {name!r}; the options are {', '.join(OPTIONS.names())}"
            )
        label = option_label(name, cli)
        who = [m for m in methods if takes(m, name, setting)]
        if not who:
            where = ", ".join(takers(name)) or "no method"
            scoped = OPTIONS.entry(name).facts.get("settings")
            also = f" in the {setting!r} setting" if setting and scoped else ""
            raise ValueError(
                f"{label}: none of the chosen methods ({', '.join(methods)}) takes "
                f"it{also}; it applies to {where}"
            )
        if len(who) < len(methods):
            others = [m for m in methods if m not in who]
            notes.append(
                f"{label} applies to {', '.join(who)} (not to {', '.join(others)})"
            )
        checked[name] = _check_value(name, value, label)
    return checked, notes


def _per_method(
    methods: Tuple[str, ...],
    method_options: Mapping[str, Mapping[str, Any]],
    setting: Optional[str],
    cli: bool,
) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, Dict[str, Any]]]:
    chosen: Dict[str, Dict[str, Any]] = {}
    rest: Dict[str, Dict[str, Any]] = {}
    for key, given in method_options.items():
        method = METHODS.entry(key).name
        if method not in methods:
            raise ValueError(
                f"options given for {key!r}, which is not among the methods asked "
                f"for ({', '.join(methods)})"
            )
        for option_key, value in dict(given).items():
            name = option_for(method, option_key)
            if name is None or not takes(method, name, setting):
                # one rule for both doors (issue 90, item 8): an option some
                # method declares is refused where this one does not
                if cli or name is not None or _declared(option_key):
                    own = ", ".join(options_of(method)) or "none"
                    also = f" in the {setting!r} setting" if name and setting else ""
                    raise ValueError(
                        f"{method} takes no option {option_key!r}{also}; its "
                        f"options: {own}"
                    )
                rest.setdefault(method, {})[option_key] = value
                continue
            label = (
                f"--set {method.lower()}:{name}"
                if cli
                else f"method_options[{method!r}][{option_key!r}]"
            )
            checked = _check_value(name, value, f"{label}:")
            chosen.setdefault(method, {})[name] = checked
    return chosen, rest


def unknown_keyword(method: str, given: Mapping[str, Any], err: TypeError) -> None:
    """A constructor's ``TypeError`` on a keyword given in ``method_options``
    that is no option (:attr:`MethodRequest.passthrough`) as a clear error
    (issue 90, item 10: "TokenScorer.__init__() got an unexpected keyword
    argument").

    Raises:
        ValueError: Naming the keyword and the method's options, when
            ``err`` is about one of ``given``; else nothing.
    """
    bad = [k for k in given if f"'{k}'" in str(err)]
    if bad:
        own = ", ".join(options_of(method)) or "none"
        raise ValueError(
            f"method_options[{method!r}]: {bad[0]!r} is neither an option of "
            f"{method} (its options: {own}) nor a keyword its scorer takes"
        ) from err


def _declared(key: str) -> bool:
    """Whether ``key`` names a declared option, or the keyword of one."""
    key = key.replace("-", "_")
    return key in OPTIONS or any(
        OPTIONS.entry(n).facts.get("kwarg") == key for n in OPTIONS.names()
    )


def models_of(method: str) -> Tuple[str, ...]:
    """The kinds of model the registered ``method`` explains."""
    return method_kinds(METHODS.entry(method, warn=False))


class WrongKindError(ValueError):
    """Methods that do not explain the model's kind (:func:`check_model_kind`;
    the command line names the option that chose them)."""


def check_model_kind(methods: Sequence[str], kind: str, cli: bool = False) -> None:
    """Every method explains models of ``kind``.

    Args:
        methods (Sequence[str]): Registered method names.
        kind (str or ModelKind): One of
            :data:`~captum_iba.registry.MODEL_KINDS`, or its object.
        cli (bool): Spell the methods as on the command line.

    Raises:
        WrongKindError: Naming the methods that do not, and those that do.
    """
    model = kind_named(kind)
    wrong = [m for m in method_names(methods) if not explains(m, model.name)]
    if not wrong:
        return
    fits = [m for m in METHODS.names() if explains(m, model.name)]
    spell = (lambda m: m.lower()) if cli else (lambda m: m)
    theirs = " and ".join(
        k.plural for k in kinds_named(n for m in wrong for n in models_of(m))
    )
    verb = "explain" if len(wrong) > 1 else "explains"
    raise WrongKindError(
        f"{', '.join(spell(m) for m in wrong)} {verb} {theirs}, but the model is "
        f"{model.article}; the methods for {model.plural}: "
        f"{', '.join(spell(m) for m in fits)}"
    )


def check_request(
    methods: Sequence[str],
    options: Optional[Mapping[str, Any]] = None,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    setting: Optional[str] = None,
    cli: bool = False,
    model_kind: Optional[str] = None,
) -> MethodRequest:
    """Check a request against the declared options (see the module docstring).

    Args:
        methods (Sequence[str]): Method names (any case).
        options (Mapping, optional): Option name -> value for every method
            that takes it (None values: not given).
        method_options (Mapping, optional): Method name -> option name or
            constructor keyword -> value, for that method only.
        setting (str, optional): The comparison setting, for options that act
            in some settings only.
        cli (bool): Spell options as command-line flags in messages, and
            refuse per-method keys that are no declared option.
        model_kind (str, optional): The kind of the model explained
            (``"classifier"`` or ``"causal-lm"``); methods that do not explain
            it are refused. None: not checked.

    Returns:
        MethodRequest: The checked request.

    Raises:
        ValueError: For an unknown method, an option no chosen method takes,
            a value an option refuses, options for a method not asked for,
            or a method that does not explain ``model_kind``.
        TypeError: For a name that is no declared option.
    """
    names = method_names(methods)
    if model_kind is not None:
        check_model_kind(names, model_kind, cli)
    checked, notes = _global_options(names, dict(options or {}), setting, cli)
    chosen, rest = _per_method(names, dict(method_options or {}), setting, cli)
    return MethodRequest(names, checked, chosen, rest, tuple(notes), model_kind)
