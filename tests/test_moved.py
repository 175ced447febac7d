"""The module paths of 0.1, deprecated in 0.2, are retired in 0.3: they no
longer import and ``CHANGELOG.md`` names each one's new home. The checks that
nothing imports them (``tests/test_layering.py``, the tutorials' in
``tests/test_tutorials.py``) use :data:`RETIRED_MODULES` and
:func:`retired_import`.

The shims still in place say when they go: every ``DeprecationWarning`` (or
``FutureWarning``) the package writes, and every deprecated name of the
registry, says "deprecated since 0.X; removed in 0.Y", X at most this
release's and Y after it (read from the source, no import, and checked on the
warnings themselves)."""

import ast
import importlib
import re
from pathlib import Path
from typing import Dict, List

import pytest

import captum_iba

ROOT = Path(__file__).resolve().parent.parent

#: What each deprecation message says: since when, and in which release it goes.
DEPRECATION_TEXT = re.compile(r"deprecated since 0\.(\d+); removed in 0\.(\d+)")
#: Modules whose deprecation message is a variable (the registry's aliases,
#: checked at run time below).
DYNAMIC_MESSAGES = {"captum_iba/_utils/registry.py"}

#: The retired module paths (0.1) -> the module their names live in now (the
#: first one named in CHANGELOG.md; some names live elsewhere, as it says).
RETIRED_MODULES = {
    "captum_iba.attribution": "captum_iba.attr.iba",
    "captum_iba.bottleneck": "captum_iba.attr.bottleneck",
    "captum_iba.priors": "captum_iba.attr.priors",
    "captum_iba.text": "captum_iba.attr.text",
    "captum_iba.baselines": "captum_iba.evaluation",
    "captum_iba.evaluate": "captum_iba.evaluation",
    "captum_iba.data": "captum_iba.app.data",
    "captum_iba.finetune": "captum_iba.app.finetune",
    "captum_iba.cli": "captum_iba.app.cli",
}


def retired_import(name: str) -> bool:
    """Whether the imported module ``name`` is (inside) a retired path."""
    return any(name == old or name.startswith(old + ".") for old in RETIRED_MODULES)


def imported_modules(source: str) -> List[str]:
    """The modules a Python source (or a notebook's code cell) imports:
    ``from a import b`` gives ``a`` and ``a.b``; IPython's magics and shell
    lines are skipped."""
    lines = [
        "" if line.lstrip().startswith(("%", "!")) else line
        for line in source.splitlines()
    ]
    names: List[str] = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


@pytest.mark.parametrize("old", sorted(RETIRED_MODULES))
def test_retired_path_no_longer_imports(old):
    assert not (ROOT / (old.replace(".", "/") + ".py")).exists()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    importlib.import_module(RETIRED_MODULES[old])  # the new home does


def test_changelog_names_every_retired_path_and_its_new_home():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = text.split("\n## ")[1:]  # "Unreleased" may come first
    section = next((s for s in releases if s.startswith("0.3.0")), "")
    assert "### Removed" in section, "CHANGELOG.md has no 0.3.0 section with Removed"
    for old, new in RETIRED_MODULES.items():
        row = [line for line in section.splitlines() if f"`{old}`" in line]
        assert row, f"the 0.3.0 section of CHANGELOG.md does not list {old}"
        assert f"`{new}`" in row[0], row[0]


def test_the_import_check_sees_retired_paths():
    found = imported_modules(
        "%matplotlib inline\nimport captum_iba.data\n"
        "from captum_iba.finetune import get_finetuned_model\n"
        "from captum_iba import evaluate\nfrom captum_iba.app.data import y\n"
    )
    retired = {n for n in found if retired_import(n)}
    assert {"captum_iba.data", "captum_iba.finetune", "captum_iba.evaluate"} <= retired
    assert "captum_iba.app.data" in found and "captum_iba.app.data" not in retired


def test_console_script_and_main_use_the_new_cli():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    scripts = re.findall(r'"captum-iba=([\w.]+):(\w+)"', setup)
    assert scripts == [("captum_iba.app.cli", "main")]
    assert not retired_import(scripts[0][0])
    main = (ROOT / "captum_iba" / "__main__.py").read_text(encoding="utf-8")
    assert "from captum_iba.app.cli import main" in main


def test_changelog_has_a_section_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(captum_iba.__version__)}\b", text, re.M)


def _literal(node: ast.AST) -> str:
    """The literal text of a string or f-string (its fields left out)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(v) for v in node.values)
    return ""


def deprecation_messages() -> Dict[str, str]:
    """``"path:line"`` -> the literal text of each deprecation message the
    package's source writes: the first argument of a ``warn`` call given
    ``DeprecationWarning`` or ``FutureWarning``, and a registry alias's
    ``deprecated=`` (a message held in a variable maps to ``""``)."""
    kinds = {"DeprecationWarning", "FutureWarning"}
    found = {}
    for path in sorted((ROOT / "captum_iba").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = getattr(node.func, "attr", getattr(node.func, "id", ""))
            given = [*node.args, *(k.value for k in node.keywords)]
            names = {getattr(a, "id", getattr(a, "attr", None)) for a in given}
            if func == "warn" and names & kinds and node.args:
                found[f"{rel}:{node.lineno}"] = _literal(node.args[0])
            for k in node.keywords:
                if k.arg == "deprecated" and _literal(k.value):
                    found[f"{rel}:{node.lineno}"] = _literal(k.value)
    return found


def _says_when(text: str) -> bool:
    release = int(captum_iba.__version__.split(".")[1])
    said = DEPRECATION_TEXT.search(text)
    return bool(said) and int(said[1]) <= release < int(said[2])


def test_every_deprecation_says_since_when_and_when_it_goes():
    found = deprecation_messages()
    assert len(found) >= 14, found  # the scan sees the shims
    dynamic = {k for k, text in found.items() if not text}
    assert {k.split(":")[0] for k in dynamic} <= DYNAMIC_MESSAGES, dynamic
    bad = {k: t for k, t in found.items() if t and not _says_when(t)}
    assert not bad, f"say 'deprecated since 0.X; removed in 0.Y': {bad}"


def test_the_shims_warn_saying_when_they_go():
    """The messages themselves, as raised (the registry's deprecated names
    too, whose message the source scan cannot read)."""
    from captum_iba.registry import METHODS

    old = sorted(METHODS.aliases(deprecated=True))
    assert old and all(_says_when(METHODS.deprecation(n)) for n in old)
    moved = [
        ("captum_iba", "WelfordEstimator"),
        ("captum_iba.evaluation.scorers", "SCORERS"),
        ("captum_iba.evaluation.iba", "FAITHFUL_OPTIONS"),
        ("captum_iba.evaluation.llm_scorers", "LLMIBAScorer"),
        ("captum_iba.app.llm_explanation", "AnswerExplanation"),
    ]
    for module, name in moved:
        with pytest.warns(DeprecationWarning) as caught:
            getattr(importlib.import_module(module), name)
        assert _says_when(str(caught[0].message)), (name, str(caught[0].message))
    assert not _says_when("deprecated since 0.3; removed in 0.3")
