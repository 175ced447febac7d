"""No file is unpickled: every ``torch.load`` in the repository passes
``weights_only=True`` (setup.py allows torch versions whose default unpickles
arbitrary objects) (P17)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("captum_iba", "experiments", "benchmarks", "tests", "docs")


def _torch_loads(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "load"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
        ):
            yield node


def test_every_torch_load_is_weights_only():
    bad = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for call in _torch_loads(path):
                flags = {k.arg: k.value for k in call.keywords}
                value = flags.get("weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    bad.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert not bad, "torch.load without weights_only=True: " + ", ".join(bad)


def test_no_pickle_module_in_the_package():
    for path in sorted((ROOT / "captum_iba").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "import pickle" not in text and "pickle.load" not in text, path
