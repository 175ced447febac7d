"""The lab (``experiments/lab``): the methods that left the product (issue 88)
reach captum-iba only through the entry-point group ``captum_iba.methods``,
the door a user's package uses - found once the lab is installed, unknown
otherwise - and behave there as they did in the product (their package
refused before the weights, an answer of only whitespace refused, the
weights file named, ``iba-heads`` taught and then found)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from captum_iba.app.cli import main
from captum_iba.registry import METHODS
from tests.app.test_cli_faults import _fails
from tests.app.test_context_evaluate import _argv, _tiny_ag_news
from tests.app.test_context_explain import (
    QUERY,
    SOURCES,
    _explain,
    _Missing,
    _refused,
    refuses_a_whitespace_answer,
)

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "experiments" / "lab"


def _declared() -> dict:
    """The entry points ``experiments/lab/pyproject.toml`` declares."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((LAB / "pyproject.toml").read_text())["project"]
    return dict(project["entry-points"]["captum_iba.methods"])


def _installed_lab(folder: Path) -> None:
    """The lab as pip would install it, for a process whose path holds
    ``folder``: its metadata and entry points (the package itself is read
    from ``experiments/lab``)."""
    info = folder / "captum_iba_lab-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: captum-iba-lab\nVersion: 0.1.0\n"
    )
    lines = [f"{n} = {t}" for n, t in _declared().items()]
    (info / "entry_points.txt").write_text(
        "[captum_iba.methods]\n" + "\n".join(lines) + "\n"
    )


def _run(folder: Path, *argv: str, python: str = "") -> subprocess.CompletedProcess:
    """``captum-iba ARGV`` (or ``python -c PYTHON``) in a fresh process whose
    path holds ``folder``, the lab's package and this checkout."""
    path = [str(folder), str(LAB), str(ROOT)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    command = ["-c", python] if python else ["-m", "captum_iba", *argv]
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, env=env,
        cwd=folder,
    )  # fmt: skip


def test_the_lab_declares_the_methods_it_registers():
    """The pyproject's entry points are :data:`captum_iba_lab.ENTRY_POINTS`
    (what the studies register without installing it), and each names a
    class the registry adopts with its facts."""
    import captum_iba_lab

    assert _declared() == captum_iba_lab.ENTRY_POINTS
    facts = METHODS.entry("at2").facts
    assert facts["models"] == ("causal-lm",) and facts["sources"]
    assert facts["reads_answer"] and not facts["spans"]
    assert facts["package"][0] == "at2"
    assert METHODS.entry("iba-heads").facts["uses"] == ()


def test_the_lab_s_methods_are_found_through_the_entry_point_only(
    at2_package, tmp_path, lm_dir
):
    """Without the lab installed ``at2`` is no method of the command line or
    of ``captum_iba.explain`` (its package importable all the same); with
    its entry points installed both find it, and it runs - here as far as
    its weights, which none were trained for this model."""
    bare, installed = tmp_path / "bare", tmp_path / "installed"
    bare.mkdir()
    installed.mkdir()
    _installed_lab(installed)
    context = ["--context", "a b. c d.", "--query", QUERY, "--model", lm_dir]
    python = (
        "import captum_iba\n"
        "try:\n"
        f"    captum_iba.explain({QUERY!r}, model={str(lm_dir)!r}, "
        "context=['a b', 'c d'], method='at2')\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    for folder, found in ((bare, False), (installed, True)):
        listed = _run(folder, "explain", "--help")
        assert listed.returncode == 0, listed.stderr
        assert ("  at2 " in listed.stdout) is found
        assert ("  iba-heads " in listed.stdout) is found
        ran = _run(folder, "explain", *context, "--method", "at2")
        assert ran.returncode != 0
        unknown = "unknown method(s) ['at2']" in ran.stderr
        assert unknown is not found, ran.stderr
        assert ("no AT2 weights for this model" in ran.stderr) is found, ran.stderr
        called = _run(folder, python=python)
        assert ("no AT2 weights for this model" in called.stdout) is found, (
            called.stdout + called.stderr
        )
        assert ("Unknown method 'at2'" in called.stdout) is not found


@pytest.mark.parametrize("method", ["at2", "iba-heads"])
def test_a_lab_method_without_its_package_before_the_weights(
    lm_dir, no_lm_weights, monkeypatch, capsys, method
):
    """Issue 79 item 4, kept by the lab: AT2's methods without its package
    are refused before the weights, naming the package and how to install
    it (the class's ``package``, read by the registry's door)."""
    for name in [m for m in sys.modules if m.partition(".")[0] == "at2"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Missing("at2"), *sys.meta_path])
    argv = ["explain", "--context", "a b. c d.", "--query", QUERY, "--model",
            lm_dir, "--method", method]  # fmt: skip
    err = _refused(argv, capsys)
    assert len(err.strip().splitlines()) == 1, err
    assert (
        f"{method} needs its package at2, which is not installed: pip install at2 "
        "(or pip install ./experiments/lab, the lab with it)"
    ) in err, err


def test_an_answer_of_only_whitespace_is_refused_before_at2(monkeypatch):
    """Issue 79 item 8, kept by the lab: AT2 on the answer '\\n\\n' is
    refused before the weights, naming the answer."""
    refuses_a_whitespace_answer("at2", monkeypatch)


def test_at2_s_listing_names_the_weights_file_it_used(lm, tmp_path, monkeypatch):
    """Issue 79 item 3, kept by the lab: the listing names the file of AT2's
    weights it used, as the method's settings record it. AT2's package and
    its scores are stand-ins here."""
    import torch
    from captum_iba_lab import at2
    from captum_iba_lab.at2_taught import save_at2_weights

    from captum_iba._utils import common
    from captum_iba._utils.io import CACHE_ENV_VAR
    from tests.lab.test_at2 import SavedHeads, stub_at2

    stub_at2(monkeypatch)
    monkeypatch.setattr(common, "module_found", lambda name: True)

    def scores(model, tok, prompt, spans, response, estimator, ids=None, chat=True):
        n = len(ids)
        return torch.ones(n), torch.ones(len(response), n), torch.arange(len(spans))

    monkeypatch.setattr(at2, "at2_token_scores", scores)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))
    path = tmp_path / "at2" / "tiny-toy-n4-a32.pt"
    path.parent.mkdir()
    save_at2_weights(SavedHeads(), lm[0], path, {"n": 4, "ablations": 32})
    result = _explain(lm, SOURCES, "at2")
    assert result.methods["at2"].settings["weights"] == str(path)
    assert f"; weights {path}; " in result.details("at2")
    assert f"at2: {result.details('at2', brief=True)}" in result.to_text()
    assert f"; weights {path}; " in result.details("at2", brief=True)


def test_a_gguf_header_gives_its_sliding_window(tmp_path):
    """A model with sliding layers (Gemma 3) says its window in the header:
    AT2's features cannot read past it (attention_window)."""
    gguf = pytest.importorskip("gguf")
    from captum_iba_lab.at2_model import attention_window

    from captum_iba.app.llm_checks import lm_config

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), arch="gemma3")
    writer.add_block_count(2)
    writer.add_context_length(64)
    writer.add_uint32("gemma3.attention.sliding_window", 16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    config = lm_config(str(path))
    assert (config.num_hidden_layers, config.max_position_embeddings) == (2, 64)
    assert attention_window(config) == 16


def test_iba_heads_taught_by_the_lab_are_found_by_the_command_line(
    at2_package,
    tiny_llm,
    tmp_path,
    capsys,
    monkeypatch,  # noqa: F811
):
    """The lab teaches AT2's head weights by one deletion step on a context
    task's search contexts (:func:`captum_iba_lab.context_heads.cached_heads`,
    what ``evaluate --methods iba-heads`` did in the product) and caches them
    by the model's fingerprint; ``evaluate`` and ``explain --context`` then
    load them, and AT2's own method never takes them (4 contexts)."""
    from captum_iba_lab import context_heads

    from captum_iba.app.causal_lm import load_causal_lm, load_lm_tokenizer
    from captum_iba.app.finetune.recipes import CACHE_ENV_VAR

    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setitem(context_heads.HEADS_FIT, "contexts", 4)
    context = "the cat sat on the mat . a dog ran in the park ."
    explain = ["explain", "--query", "where did the cat move ?", "--context", context,
               "--model", tiny_llm, "--method", "iba-heads",
               "--max-new-tokens", "2"]  # fmt: skip
    err = _fails(explain, capsys)  # none taught yet: the command that teaches them
    assert "no weights taught by iba-deletion-steps1" in err
    assert "python experiments/teach_at2.py --model MODEL" in err
    _tiny_ag_news(tmp_path / "data")
    tok = load_lm_tokenizer(tiny_llm)
    model, _ = load_causal_lm(tiny_llm, tok)
    weights = context_heads.cached_heads(
        model, tok, "context-facts", str(tmp_path / "data")
    )
    assert "teaching iba-heads on 4 search contexts" in capsys.readouterr().out
    assert weights.name.endswith("-context-facts-n4-iba-deletion-steps1.pt")
    assert len(list((tmp_path / "cache" / "at2" / "taught").glob("*/*.npz"))) == 4
    more = ("--passages", "3-4", "--methods", "iba-heads,random")
    assert main(_argv(tiny_llm, tmp_path, tmp_path / "r1", *more)) == 0
    said = capsys.readouterr().out
    assert "| iba-heads | 3 |" in said, said
    rows = [
        json.loads(line) for line in (tmp_path / "r1" / "attributions.jsonl").open()
    ]
    assert {r["method"] for r in rows} == {"iba-heads", "random"}
    assert main(explain) == 0
    assert "iba-heads" in capsys.readouterr().out
    err = _fails(explain[:-3] + ["at2", "--max-new-tokens", "2"], capsys)
    assert "no AT2 weights for this model" in err and "train_at2.py" in err
