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

import ast
import functools
import importlib
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Tuple

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
    ("captum_iba.app.model_kind", "decide_kind"),
    ("captum_iba.app.model_kind", "refuse_classifier"),
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


def _corpus(name: str, tiny_model_dir: str, lm_dir: str, tmp_path) -> List[str]:
    """One default ``evaluate`` of the corpus job ``name`` (a classifier's
    corpus, a causal LM's prompt task, a context task), as the command
    line's arguments: few instances, each method at its defaults."""
    from tests.app.test_cli_faults import _tiny_sst2
    from tests.app.test_context_evaluate import _llama_dir, _tiny_ag_news

    data, out = tmp_path / "data", tmp_path / "out"
    argv = ["evaluate", "--data-dir", str(data), "--out", str(out), "--n", "2"]
    if name == "context":
        _tiny_ag_news(data)
        model = _llama_dir(tmp_path, 160)
        return argv + ["--model", model, "--task", "context-facts"]
    _tiny_sst2(data)
    model = tiny_model_dir if name == "classifier" else lm_dir
    return argv + ["--model", model, "--batch-size", "2", "--steps", "2"]


@pytest.mark.parametrize("corpus", ["classifier", "prompts", "context"])
def test_one_default_evaluate_decides_once_and_checks_once(
    corpus, tiny_model_dir, tiny_llm_dir, monkeypatch, capsys, tmp_path
):
    """``evaluate`` of each corpus job - a classifier's corpus, a causal LM's
    prompt task, a context task - decides the model's kind once (its
    request holds the object) and checks its methods once."""
    argv = _corpus(corpus, tiny_model_dir, tiny_llm_dir, tmp_path)
    with traced(monkeypatch) as calls:
        _cli(argv)
    capsys.readouterr()
    print(corpus, calls)  # (shown on failure)
    if os.environ.get("TRACE_OUT"):
        with open(os.environ["TRACE_OUT"], "a") as f:
            f.write(f"evaluate {corpus}: {calls}\n")
    assert len(calls["decisions"]) == 1, calls["decisions"]
    # the request's methods, however a check spells them (``ig``, ``IG``;
    # ``ablation``, ``LOO``)
    checks = [_registered(c) for c in calls["checks"]]
    assert [c for c in checks if c == checks[0]] == checks[:1], calls["checks"]


def _registered(check: str) -> Tuple[str, ...]:
    """The registered names of the methods a traced check checked."""
    from captum_iba.registry import METHODS

    names = ast.literal_eval(check.partition(" <- ")[2].partition(" ")[2])
    return tuple(METHODS.entry(m, warn=False).name for m in names)
