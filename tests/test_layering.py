"""The package's layers import one way: the core never imports the application.

Read from the source (every ``import`` statement, also inside functions), so
a lazy import cannot hide a dependency.
"""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from tests.test_moved import retired_import

PACKAGE = Path(__file__).resolve().parent.parent / "captum_iba"

#: Which subpackages each core subpackage may import (besides itself and
#: ``captum_iba.version``). ``app`` may import anything.
ALLOWED: Dict[str, Set[str]] = {
    "_utils": set(),
    "attr": {"_utils", "registry"},
    "metrics": {"_utils"},
    "evaluation": {"_utils", "registry", "request", "attr", "metrics"},
    "visualization": {"_utils", "metrics"},
}
#: The application layer (and the retired module paths of 0.1 that were its
#: aliases: an import of one fails anyway).
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


EXPERIMENTS = PACKAGE.parent / "experiments"


def _study_names() -> Set[str]:
    """The top-level names the studies' code imports as: ``experiments``,
    its package ``studylib`` and each script's module (``train_at2``, ...)."""
    names = {"experiments"}
    names |= {p.stem for p in EXPERIMENTS.glob("*.py")}
    names |= {p.name for p in EXPERIMENTS.iterdir() if (p / "__init__.py").exists()}
    names |= {p.parent.name for p in EXPERIMENTS.glob("lab/*/__init__.py")}
    return names


def _study_imports(path: Path, names: Set[str]) -> Iterator[Tuple[int, str]]:
    return ((line, n) for line, n in _imports(path) if n.split(".")[0] in names)


def test_the_package_never_imports_the_studies():
    """``experiments/`` (its scripts and ``studylib``, the studies' machinery)
    imports ``captum_iba``, never the reverse: no module of the package
    imports a study's module, nor puts the studies' folder on ``sys.path``."""
    names = _study_names()
    assert {"studylib", "train_at2", "captum_iba_lab"} <= names
    files = sorted(PACKAGE.rglob("*.py"))
    bad = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for path in files
        for line, name in _study_imports(path, names)
    ]
    bad += [
        f"{path.relative_to(PACKAGE.parent)} puts experiments/ on sys.path"
        for path in files
        if any(
            "sys.path" in line and "experiments" in line
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_study_import(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text(
        "def f():\n    from studylib.at2_training import train_at2\n"
        "import experiments.study_parts\nfrom captum_iba import attr\n"
    )
    found = {name for _, name in _study_imports(module, _study_names())}
    assert found == {
        "studylib.at2_training",
        "studylib.at2_training.train_at2",
        "experiments.study_parts",
    }


def test_the_registry_of_names_imports_no_layer_and_no_torch():
    """``captum_iba.registry`` lists names (for ``--help``): it imports only
    the registry class and the options' declarations (which import only the
    registry class and the values' checks), so listing the names loads no
    method and no torch."""
    path = PACKAGE / "registry.py"
    targets = {t for _, t in _captum_iba_targets(path)}
    assert targets <= {"_utils", "method_options"}, targets
    options = PACKAGE / "method_options.py"
    assert {t for _, t in _captum_iba_targets(options)} <= {"_utils"}
    for module in (path, options):
        assert all(not name.startswith("torch") for _, name in _imports(module))
    helper = PACKAGE / "_utils" / "registry.py"
    assert {n.split(".")[0] for _, n in _imports(helper)} <= {
        "importlib",
        "dataclasses",
        "types",
        "typing",
        "warnings",
    }


def test_the_request_check_imports_the_registry_only():
    """``captum_iba.request`` checks options before any model loads: it
    imports the registry of names and the model kinds' objects
    (:mod:`captum_iba.attr.kinds`, whose own imports at its top are the
    registry and the torch-free kind rule), and nothing heavy."""
    path = PACKAGE / "request.py"
    modules = {n for _, n in _imports(path) if n.startswith("captum_iba.")}
    assert {m.split(".")[1] for m in modules} <= {"registry", "attr"}
    assert {m for m in modules if m.startswith("captum_iba.attr")} <= {
        "captum_iba.attr.kinds",
        "captum_iba.attr.kinds.kind_named",
        "captum_iba.attr.kinds.kinds_named",
    }
    assert {n.split(".")[0] for _, n in _imports(path)} <= {
        "captum_iba",
        "dataclasses",
        "typing",
    }
    kinds = ast.parse((PACKAGE / "attr" / "kinds.py").read_text(encoding="utf-8"))
    top = {
        node.module
        for node in kinds.body
        if isinstance(node, ast.ImportFrom) and node.module
    } | {
        a.name
        for node in kinds.body
        if isinstance(node, ast.Import)
        for a in node.names
    }
    assert top <= {"typing", "captum_iba._utils.kinds", "captum_iba.registry"}


# Captum's private modules (``captum._utils``, ``captum.attr._core``, ...) move
# between releases: one module imports them, so a new release changes one file.
CAPTUM_COMPAT = PACKAGE / "_utils" / "captum_compat.py"


def _is_private_captum(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "captum" and any(p.startswith("_") for p in parts[1:])


def _private_captum_imports(path: Path) -> Iterator[Tuple[int, str]]:
    return ((line, n) for line, n in _imports(path) if _is_private_captum(n))


def test_only_captum_compat_imports_captum_private_modules():
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p != CAPTUM_COMPAT]
    bad = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for path in files
        for line, name in _private_captum_imports(path)
    ]
    assert not bad, "import these through captum_iba._utils.captum_compat:\n" + (
        "\n".join(bad)
    )
    assert list(_private_captum_imports(CAPTUM_COMPAT))


def test_the_check_sees_a_private_captum_import(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text(
        "from captum.attr._utils.attribution import LayerAttribution\n"
        "from captum.attr import _utils\n"
        "def f():\n    import captum._utils.common\n"
        "from captum.attr import Lime\nfrom captum_iba._utils import common\n"
    )
    found = [name for _, name in _private_captum_imports(module)]
    assert found == [
        "captum.attr._utils.attribution",
        "captum.attr._utils.attribution.LayerAttribution",
        "captum.attr._utils",
        "captum._utils.common",
    ]


def test_nothing_imports_a_retired_module_path():
    """The paths of 0.1, retired in 0.3, are imported nowhere: not by the
    package, its tests, benchmarks, experiments or docs."""
    root = PACKAGE.parent
    files = [
        p
        for folder in ("captum_iba", "tests", "benchmarks", "experiments", "docs")
        for p in sorted((root / folder).rglob("*.py"))
    ]
    bad = [
        f"{path.relative_to(root)}:{line} imports {name}"
        for path in files
        for line, name in _imports(path)
        if retired_import(name)
    ]
    assert not bad, "\n".join(bad)


def _module_graph(package: Path) -> Dict[str, Set[str]]:
    """Every module of ``package`` (a package's ``__init__`` by the package's
    name) -> the modules of the package it imports, anywhere in its source."""
    root = package.parent
    paths = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str:
        while name and name not in paths:  # an imported name: its module
            name = name.rpartition(".")[0]
        return name

    graph: Dict[str, Set[str]] = {}
    for module, path in paths.items():
        targets = {resolve(name) for _, name in _imports(path)}
        graph[module] = {t for t in targets if t and t != module}
    return graph


def _import_circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The groups of modules that import each other in a circle (the strongly
    connected components of more than one module), each sorted."""
    order: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    circles: List[List[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_import_circle_between_the_package_s_modules():
    """Issue 50, item 6: no two modules of the package import each other,
    directly or through others (imports inside functions count: a lazy
    import hides a circle, it does not remove it)."""
    graph = _module_graph(PACKAGE)
    assert len(graph) > 100 and graph["captum_iba.attr.iba"]
    circles = _import_circles(graph)
    assert not circles, "modules importing each other:\n" + "\n".join(
        ", ".join(circle) for circle in circles
    )


def test_the_check_sees_an_import_circle(tmp_path):
    package = tmp_path / "captum_iba"
    (package / "attr").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "attr" / "__init__.py").write_text("")
    (package / "attr" / "a.py").write_text("from captum_iba.attr.b import f\n")
    (package / "attr" / "b.py").write_text(
        "def f():\n    from captum_iba.attr import c\n"
    )
    (package / "attr" / "c.py").write_text("import captum_iba.attr.a\n")
    (package / "attr" / "d.py").write_text("from captum_iba.attr import a\n")
    graph = _module_graph(package)
    assert graph["captum_iba.attr.d"] == {"captum_iba.attr", "captum_iba.attr.a"}
    assert _import_circles(graph) == [
        ["captum_iba.attr.a", "captum_iba.attr.b", "captum_iba.attr.c"]
    ]


#: Where each registry's import paths point: the layer holding its objects.
REGISTRY_HOMES = {
    "METHODS": "captum_iba.evaluation.",
    "SETTINGS": "captum_iba.evaluation.presets",
    "PRIORS": "captum_iba.attr.",
}


def test_the_registries_import_paths_are_checked_like_imports():
    """Issue 50, item 5: the registry names the objects it lists by import
    path (imported when a name is used, so that ``--help`` and a request's
    checks load no torch): those strings are dependencies too, and this
    check sees them. Each built-in path points into the one layer that holds
    its registry's objects (the methods: evaluation; the settings: its
    presets; the priors: attr) and names a module that exists and an object
    in it; the registry module imports none of them."""
    import importlib

    from captum_iba import registry

    graph = _module_graph(PACKAGE)
    seen = 0
    for name, home in REGISTRY_HOMES.items():
        reg = getattr(registry, name)
        for key in reg.names():
            target = reg.entry(key, warn=False).target
            if not isinstance(target, str):
                continue  # an object registered at run time (a user's)
            module, _, attribute = target.partition(":")
            assert module.startswith(home), f"{name} {key}: {target} is not in {home}"
            assert module in graph, f"{name} {key}: no module {module}"
            assert hasattr(importlib.import_module(module), attribute), target
            seen += 1
    assert seen >= 20
    # the registry itself imports none of them (they load on first use)
    assert not {
        t
        for t in graph["captum_iba.registry"]
        if t.startswith(("captum_iba.evaluation", "captum_iba.attr"))
    }
