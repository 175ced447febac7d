"""One request, built once, checked once (issue 88, item 3): traced, one
default explain of each question - a classifier's prediction, a causal LM's
answer, the sources of an answer -, from the command line and from Python,
decides the model's kind once and checks the request (its methods and
options, against the declarations and the kind) once.

The trace wraps every function that decides a kind (from a name, a
configuration or a loaded model) and every check of a request, wherever a
module holds it, and counts the outermost calls: a decision that asks
another (a name's kind read from its configuration) is one decision, a check
that checks the kind inside it one check.
"""

import functools
import importlib
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List

import pytest

import captum_iba
from captum_iba.app.cli import main
from tests.helpers import saved_lm, tiny_causal_lm, tiny_word_tokenizer

#: The functions that decide a model's kind: (module, name).
DECISIONS = (
    ("captum_iba.attr.kinds", "kind_of"),
    ("captum_iba.attr.kinds", "kind_of_config"),
    ("captum_iba.attr.kinds", "config_kind"),
    ("captum_iba._utils.kinds", "head_of"),
    ("captum_iba.app.model_kind", "kind_hint"),
    ("captum_iba.app.model_kind", "model_kind"),
    ("captum_iba.app.model_kind", "refuse_classifier"),
    ("captum_iba.app.models", "kind_of"),
)
#: The functions that check a request's methods and options.
CHECKS = (
    ("captum_iba.request", "check_request"),
    ("captum_iba.request", "check_model_kind"),
)

SOURCES = ["the cat sat on the mat", "a dog ran in the park", "the big red dog"]
QUERY = "where is the cat"


#: The trace running (None: none): the calls counted, and how deep in a
#: decision or a check the call at hand is.
_TRACE: Dict[str, Any] = {"calls": None, "depth": {}}
#: Each traced function's counting wrapper, made once: a module imported
#: while a trace ran keeps it, and it counts nothing when no trace runs.
_WRAPPERS: Dict[Callable, Callable] = {}


def _wrapper(group: str, name: str, real: Callable) -> Callable:
    if real in _WRAPPERS:
        return _WRAPPERS[real]

    @functools.wraps(real)
    def counted(*args, **kwargs):
        calls, depth = _TRACE["calls"], _TRACE["depth"]
        if calls is None:
            return real(*args, **kwargs)
        calls["all"].append(name)
        if depth.get(group, 0) == 0:
            what = f"{name} <- {sys._getframe(1).f_code.co_name}"
            if group == "checks":  # which methods: the request's, or a helper's
                what += f" {tuple(_names(args[0] if args else kwargs['methods']))}"
            calls[group].append(what)
        depth[group] = depth.get(group, 0) + 1
        try:
            return real(*args, **kwargs)
        finally:
            depth[group] -= 1

    _WRAPPERS[real] = counted
    return counted


def _names(methods: Any) -> List[str]:
    return [methods] if isinstance(methods, str) else [str(m) for m in methods]


@contextmanager
def traced(monkeypatch) -> Iterator[Dict[str, List[str]]]:
    """Counts the outermost calls of :data:`DECISIONS` and :data:`CHECKS`
    (``"decisions"``, ``"checks"``: each call's function and the function
    that called it) and every call of them (``"all"``: their names)."""
    for group, table in (("decisions", DECISIONS), ("checks", CHECKS)):
        for module, name in table:
            real = getattr(importlib.import_module(module), name)
            real = getattr(real, "__wrapped__", real)
            fake = _wrapper(group, name, real)
            for held in list(sys.modules.values()):  # every module holding it
                if getattr(held, "__name__", "").startswith("captum_iba"):
                    for attr, value in list(vars(held).items()):
                        if value is real:
                            monkeypatch.setattr(held, attr, fake)
    calls: Dict[str, List[str]] = {"decisions": [], "checks": [], "all": []}
    _TRACE.update(calls=calls, depth={})
    try:
        yield calls
    finally:
        _TRACE["calls"] = None


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    model, tok = tiny_causal_lm("llama", positions=48), tiny_word_tokenizer()
    return saved_lm(tmp_path_factory.mktemp("tiny-llama"), model, tok)


def _cli(argv: List[str]) -> None:
    assert main(argv) == 0


def _question(name: str, tiny_model_dir: str, lm_dir: str):
    """One default explain of the question ``name``, as (the command line's
    arguments, the Python call)."""
    if name == "prediction":
        return (
            ["explain", "a fine film", "--model", tiny_model_dir],
            lambda: captum_iba.explain("a fine film", tiny_model_dir),
        )
    if name == "answer":
        return (
            ["explain", "the cat sat", "--model", lm_dir, "--max-new-tokens", "2"],
            lambda: captum_iba.explain("the cat sat", lm_dir, max_new_tokens=2),
        )
    argv = ["explain", "--context", "\n".join(SOURCES), "--query", QUERY]
    argv += ["--model", lm_dir, "--sources", "lines", "--max-new-tokens", "2"]
    return argv, lambda: captum_iba.explain(
        QUERY, lm_dir, context=SOURCES, max_new_tokens=2
    )


@pytest.mark.parametrize("question", ["prediction", "answer", "sources"])
@pytest.mark.parametrize("entry", ["cli", "python"])
def test_one_default_explain_decides_once_and_checks_once(
    question, entry, tiny_model_dir, lm_dir, monkeypatch, capsys
):
    argv, call = _question(question, tiny_model_dir, lm_dir)
    with traced(monkeypatch) as calls:
        _cli(argv) if entry == "cli" else call()
    capsys.readouterr()
    print(question, entry, calls)  # (shown on failure)
    if os.environ.get("TRACE_OUT"):  # a record of the trace
        with open(os.environ["TRACE_OUT"], "a") as f:
            f.write(f"{entry} {question}: {calls}\n")
    assert len(calls["decisions"]) == 1, calls["decisions"]
    # the request's checks: a method that builds another method inside it
    # (iba-surrogate's one-step iba-deletion) checks that method's own,
    # fixed request, not the one asked for
    asked = calls["checks"][0].rpartition(" ")[2]
    assert [c for c in calls["checks"] if c.endswith(asked)] == calls["checks"][:1]
