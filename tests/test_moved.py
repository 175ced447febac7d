"""The module paths of 0.1 still import, warn naming the new path, and give
the same objects; nothing in the project goes through them."""

import importlib
import re
import sys
from pathlib import Path

import pytest

import captum_iba
from captum_iba._utils.moved import MOVED_MODULES, moved_message

ROOT = Path(__file__).resolve().parent.parent

#: Re-exported names whose home is not the first module named in the message.
OTHER_HOMES = {
    "captum_iba.evaluate": {"load_classifier": "captum_iba.app.models"},
    "captum_iba.data": {
        "DEFAULT_SEED": "captum_iba.app.data.splits",
        "HELDOUT_TRAIN_FRACTION": "captum_iba.app.data.splits",
    },
    "captum_iba.finetune": {
        "DEFAULT_BASE_MODEL_NAME": "captum_iba.app.finetune.recipes",
        "PathLike": "captum_iba.app.finetune.recipes",
        "RESULT_FILE": "captum_iba.app.finetune.store",
    },
}


def _home(old: str) -> str:
    """The first module named as the new home of ``old``."""
    return MOVED_MODULES[old].split(" ")[0]


@pytest.fixture
def fresh(monkeypatch):
    """Forgets an old module (restored afterwards) so that it imports again."""

    def forget(old: str) -> None:
        monkeypatch.delitem(sys.modules, old, raising=False)
        short = old.rsplit(".", 1)[1]
        if short in vars(captum_iba):
            monkeypatch.delattr(captum_iba, short)

    return forget


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_old_path_warns_at_the_import_line(old, fresh, tmp_path, monkeypatch):
    """The warning names the new path and points at the user's import line
    (so Python shows it by default in ``__main__`` and in notebooks)."""
    fresh(old)
    user = tmp_path / "user_code.py"
    user.write_text(f'"""A user\'s module."""\nimport {old}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "user_code", raising=False)
    with pytest.warns(DeprecationWarning) as record:
        importlib.import_module("user_code")
    ours = [w for w in record if str(w.message).startswith(old)]
    assert len(ours) == 1, [str(w.message) for w in record]
    message = str(ours[0].message)
    assert message == moved_message(old)
    assert f"import from {_home(old)}" in message
    assert (Path(ours[0].filename), ours[0].lineno) == (user, 2)


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_old_path_gives_the_same_objects(old, fresh):
    fresh(old)
    with pytest.warns(DeprecationWarning, match=re.escape(old)):
        module = importlib.import_module(old)
    home = importlib.import_module(_home(old))
    others = OTHER_HOMES.get(old, {})
    names = list(module.__all__) + list(others)
    assert names
    for name in names:
        new = importlib.import_module(others.get(name, _home(old)))
        assert getattr(module, name) is getattr(new, name), (old, name)
    if old != "captum_iba.evaluate":  # a selection from several modules
        assert set(module.__all__) <= set(home.__all__)


def test_from_import_of_an_old_path_warns(fresh):
    fresh("captum_iba.text")
    with pytest.warns(DeprecationWarning, match="captum_iba.attr.text"):
        from captum_iba.text import token_attributions
    from captum_iba.attr.text import token_attributions as new

    assert token_attributions is new


def test_changelog_lists_every_old_path():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for old in MOVED_MODULES:
        row = [line for line in text.splitlines() if f"`{old}`" in line]
        assert row, f"CHANGELOG.md does not list {old}"
        assert f"`{_home(old)}`" in row[0], row[0]


def test_console_script_and_main_use_the_new_cli():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    scripts = re.findall(r'"captum-iba=([\w.]+):(\w+)"', setup)
    assert scripts == [("captum_iba.app.cli", "main")]
    assert scripts[0][0] not in MOVED_MODULES
    main = (ROOT / "captum_iba" / "__main__.py").read_text(encoding="utf-8")
    assert "from captum_iba.app.cli import main" in main


def test_changelog_has_a_section_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(captum_iba.__version__)}\b", text, re.M)
