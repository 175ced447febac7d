"""The module paths of 0.1, deprecated in 0.2, are retired in 0.3: they no
longer import and ``CHANGELOG.md`` names each one's new home. The checks that
nothing imports them (``tests/test_layering.py``, the tutorials' in
``tests/test_tutorials.py``) use :data:`RETIRED_MODULES` and
:func:`retired_import`."""

import ast
import importlib
import re
from pathlib import Path
from typing import List

import pytest

import captum_iba

ROOT = Path(__file__).resolve().parent.parent

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
    section = text.split("\n## ")[1]  # the newest release's section
    assert section.startswith("0.3.0") and "### Removed" in section, section[:80]
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
