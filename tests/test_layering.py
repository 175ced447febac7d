"""The package's layers import one way: the core never imports the application.

Read from the source (every ``import`` statement, also inside functions), so
a lazy import cannot hide a dependency.
"""

import ast
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "captum_iba"

#: Which subpackages each core subpackage may import (besides itself and
#: ``captum_iba.version``). ``app`` may import anything.
ALLOWED: Dict[str, Set[str]] = {
    "_utils": set(),
    "attr": {"_utils", "registry"},
    "metrics": {"_utils"},
    "evaluation": {"_utils", "registry", "attr", "metrics"},
    "visualization": {"_utils", "metrics"},
}
#: Old module paths kept as re-exports of the application layer.
APP_ALIASES = {"app", "data", "finetune", "cli", "evaluate"}


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            for alias in node.names:  # from captum_iba import data
                yield node.lineno, f"{node.module}.{alias.name}"


def _captum_iba_targets(path: Path) -> Iterator[Tuple[int, str]]:
    for line, name in _imports(path):
        parts = name.split(".")
        if parts[0] == "captum_iba" and len(parts) > 1:
            yield line, parts[1]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_core_layer_imports_only_layers_below_it(layer):
    allowed = ALLOWED[layer] | {layer, "version"}
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files, f"no module found in captum_iba/{layer}"
    bad = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports captum_iba.{target}"
        for path in files
        for line, target in _captum_iba_targets(path)
        if target not in allowed or target in APP_ALIASES
    ]
    assert not bad, "\n".join(bad)


def test_package_init_imports_no_application_code():
    bad = [
        t for _, t in _captum_iba_targets(PACKAGE / "__init__.py") if t in APP_ALIASES
    ]
    assert not bad


def test_the_check_sees_an_application_import(tmp_path):
    """The check itself can fail: a core-style module importing the app."""
    module = tmp_path / "bad.py"
    module.write_text(
        "def f():\n    from captum_iba.app.data import load_dataset\n"
        "    from captum_iba import finetune\n"
    )
    targets = {t for _, t in _captum_iba_targets(module)}
    assert {"app", "finetune"} <= targets


def test_the_registry_of_names_imports_no_layer_and_no_torch():
    """``captum_iba.registry`` lists names (for ``--help``): it imports only
    the registry class, so listing the names loads no method and no torch."""
    path = PACKAGE / "registry.py"
    targets = {t for _, t in _captum_iba_targets(path)}
    assert targets <= {"_utils"}, targets
    assert all(not name.startswith("torch") for _, name in _imports(path))
    helper = PACKAGE / "_utils" / "registry.py"
    assert {n.split(".")[0] for _, n in _imports(helper)} <= {
        "importlib",
        "dataclasses",
        "types",
        "typing",
    }
