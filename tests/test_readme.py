"""The README tells a newcomer what the package reads and how to start: every
environment variable the package reads is named, the install brings the hub
route, and the Captum example and command line use the faithful configuration."""

import os
import re
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _read_variables():
    """Every ``CAPTUM_IBA_*`` name in the package's and the tutorials' code."""
    found = set()
    for folder, pattern in (("captum_iba", "*.py"), ("tutorials", "*.ipynb")):
        for path in (ROOT / folder).rglob(pattern):
            found |= set(
                re.findall(r"CAPTUM_IBA_[A-Z0-9_]*[A-Z0-9]", path.read_text("utf-8"))
            )
    return found


def test_every_environment_variable_is_named():
    names = _read_variables()
    assert {"CAPTUM_IBA_DATA", "CAPTUM_IBA_CACHE", "CAPTUM_IBA_DEBUG"} <= names
    missing = sorted(n for n in names if f"`{n}`" not in README)
    assert not missing, f"name these in the README's table: {missing}"


def test_install_brings_the_hub_route():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert '"hub": HUB_REQUIRES' in setup and "datasets" in setup
    assert 'pip install -e ".[hub' in README


#: The README's section with the low-level Captum example (once "Quick start",
#: which now shows the three front-door commands).
CAPTUM_EXAMPLE = "## The Captum layer method"


def test_quick_start_and_command_line_use_the_faithful_configuration():
    quick = README.split(CAPTUM_EXAMPLE)[1].split("## ")[0]
    assert 'config="faithful"' in quick and "resolve_layer(model)" in quick
    assert "layer[3]" not in quick
    cli = README.split("## Command line")[1].split("\n## ")[0]
    assert "iba-faithful" in cli and "--layer 3" not in cli
    assert os.path.exists(ROOT / "docs" / "_static" / "explain_compare.png")


def _ignored_patterns():
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def test_the_examples_outputs_are_ignored_by_git():
    """What the README's and the docs' commands write into a clone (``--out
    runs/...``, ``--html out.html``) is in ``.gitignore``."""
    import fnmatch

    docs = ROOT / "docs"
    rst_files = [*docs.glob("*.rst"), *(docs / "studies").glob("*.rst")]
    texts = [README] + [p.read_text("utf-8") for p in rst_files]
    outs = {m for t in texts for m in re.findall(r"--out[ =]([\w./-]+)", t)}
    pages = {m for t in texts for m in re.findall(r"--html[ =]([\w./-]+)", t)}
    patterns = _ignored_patterns()
    assert outs and pages
    for out in sorted(outs):
        if out.startswith(("/", "$")) or out.upper() == out:
            continue  # an absolute path or a placeholder such as OUT
        top = out.strip("./").split("/")[0] + "/"
        assert any(fnmatch.fnmatch(top, p) for p in patterns), (
            f"--out {out}: add {top} to .gitignore"
        )
    for page in sorted(pages):
        assert any(fnmatch.fnmatch("/" + page, p) for p in patterns), page


def test_the_quick_start_leaves_special_tokens_out_of_the_word_scores(
    tiny_model_dir, monkeypatch
):
    """Issue 31, item 17: token_attributions gave [CLS] and [SEP] the largest
    scores (225, 199) under a comment saying they are never removed. The quick
    start runs here on a tiny model (its fine-tuned model replaced)."""
    from captum_iba.app import finetune

    monkeypatch.setattr(finetune, "get_finetuned_model", lambda corpus: tiny_model_dir)
    quick = README.split(CAPTUM_EXAMPLE)[1].split("```python")[1].split("```")[0]
    assert 'reduction="mean"' in quick and "torch.isin" in quick
    scope = {}
    exec(quick.split("# The most faithful configuration measured")[0], scope)
    scores, ids, tok = scope["scores"], scope["enc"]["input_ids"], scope["tok"]
    special = torch.isin(ids, torch.tensor([tok.cls_token_id, tok.sep_token_id]))
    assert bool((scores[special] == 0).all())
    real = scope["words"]
    assert bool(((scores[real] > 0) & (scores[real] < 1)).all())


#: The contributors' page holding the layout (issue 90, item 6: it was a
#: third of the README).
CONTRIBUTING = (ROOT / "docs" / "contributing.rst").read_text(encoding="utf-8")


def _layout_rows():
    """The layout's entries (docs/contributing.rst's definition list) as
    (the paths of its term, its text)."""
    layout = CONTRIBUTING.split("Every module, folder by folder")[1]
    entries = re.split(r"\n(?=``)", layout)
    rows = [e for e in entries if e.startswith("``")]
    return [
        (re.findall(r"``([^`]+)``", r.splitlines()[0]), r.replace("``", "`"))
        for r in rows
    ]


def _named(module: str, rows) -> bool:
    """Whether the Layout names ``module`` (``captum_iba/...py``): as a path
    of a first cell, or in the row of a folder above it by the rest of its
    path (``engine/run.py`` or ``run.py`` under ``captum_iba/app/engine/``)."""
    for paths, text in rows:
        for path in paths:
            if path == module:
                return True
            if path.endswith("/") and module.startswith(path):
                if f"`{module[len(path) :]}`" in text:
                    return True
    return False


def test_the_layout_names_every_module():
    """Issue 50, item 7: the map is the territory - every module of the
    package (but the packages' ``__init__.py``) is named in the layout
    (docs/contributing.rst since issue 90), in the entry of its folder."""
    rows = _layout_rows()
    modules = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "captum_iba").rglob("*.py")
        if p.name != "__init__.py"
    )
    assert len(modules) > 100
    missing = [m for m in modules if not _named(m, rows)]
    assert not missing, f"name these in docs/contributing.rst's layout: {missing}"


def test_the_front_door_stays_a_front_door():
    """The README is a front door (at most 300 lines, a command in its first
    40), every docs page a guide or one study report (at most 400 lines),
    and a release's CHANGELOG section says what changed for a user (at most
    200 lines): study logs go to docs/studies/."""
    lines = README.splitlines()
    assert len(lines) <= 300, len(lines)
    assert any(ln.startswith(("pip ", "captum-iba ", "python ")) for ln in lines[:40])
    pages = [  # the pages, not the generated tables they include
        p for p in sorted((ROOT / "docs").rglob("*.rst")) if p.parent.name[0] != "_"
    ]
    assert len(pages) > 10
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in pages
        if (n := len(p.read_text("utf-8").splitlines())) > 400
    }
    assert not long, f"docs pages over 400 lines: {long}"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    release = changelog.split("\n## ")[1]
    assert len(release.splitlines()) <= 200, len(release.splitlines())


def test_the_layout_is_on_the_contributors_page_not_the_readme():
    """Issue 90, item 6: the Layout table was a third of the README, for
    contributors; it lives on docs/contributing.rst (in the docs' table of
    contents) and the README links it."""
    assert "## Layout" not in README and "| path | what |" not in README
    assert "(docs/contributing.rst)" in README
    index = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8")
    assert "\n   contributing\n" in index
    assert len(README) < 20_000, len(README)  # 28,133 characters with it


def test_the_two_set_up_commands_run_the_tests_too():
    """Issue 90, item 1: after the README's install, its test command failed
    ("No module named pytest"): pytest comes with the ``test`` extra, which
    the README described as "the local MiniLM tokenizer". The install's two
    commands bring it, the README says what the extra holds, and CI installs
    the same extras as the README."""
    install = README.split("## Install")[1].split("```bash")[1].split("```")[0]
    commands = [ln.split("#")[0].strip() for ln in install.strip().splitlines()]
    assert len(commands) == 2 and commands[0].startswith("pip install torch")
    extras = re.fullmatch(r'pip install -e "\.\[([\w,]+)\]"', commands[1])
    assert extras, commands[1]
    wanted = set(extras.group(1).split(","))
    assert {"hub", "test"} <= wanted
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    tests_need = setup.split("TEST_REQUIRES = [")[1].split("]")[0]
    assert '"pytest' in tests_need and '"ruff' in tests_need
    assert "`test` (pytest" in " ".join(README.split())
    assert "python -m pytest -q" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f'pip install -q -e ".[{extras.group(1)}]"' in ci


def test_the_front_door_says_what_a_first_run_costs_and_how_to_cite():
    """Issue 90, items 2 and 3: "a few minutes" for a first run of 11
    (the fine-tune 626 s on two cores), nothing on where SST-2 must be;
    citations (``--answer-sentences``, ``answer_span="sentences"``,
    ``result.citations()``) and the notes file's format missing."""
    flat = " ".join(README.split())
    assert "a few minutes" not in flat
    assert "about 10 minutes on a 2-core CPU (626 s measured" in flat
    assert "It needs SST-2, local" in flat and "or from the hub" in flat
    for said in ("--answer-sentences", 'answer_span="sentences"',
                 "result.citations()", "separated by blank lines",
                 "`--context -` reads standard input"):  # fmt: skip
        assert said in flat, said
    recipes = (ROOT / "captum_iba" / "app" / "finetune" / "recipes.py").read_text()
    assert "a few minutes" not in recipes
