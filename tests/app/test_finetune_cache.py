"""The fine-tune cache under faults: damaged entries, concurrent runs, killed
runs, names that would escape the cache (P2, P3, P4, P13, P14)."""

import json
import threading
import time

import pytest

from captum_iba.app import finetune as ft
from captum_iba.app.finetune import cache as ft_cache
from captum_iba.app.models import ModelLoadError, load_classifier
from tests.app.test_finetune import _synthetic
from tests.app.test_finetune import tiny_base as tiny_base  # noqa: F401  (fixture)

SETTINGS = dict(steps=3, batch_size=8, max_length=16, lr=1e-3, progress=False)


@pytest.fixture
def counting(monkeypatch, tmp_path):
    """get_finetuned_model with the cache in tmp_path and a counted fine-tune
    on synthetic data (optionally slowed down)."""
    monkeypatch.setenv(ft.CACHE_ENV_VAR, str(tmp_path / "cache"))
    calls = []
    real = ft.fine_tune
    delay = {"s": 0.0}

    def fake(*args, **kwargs):
        calls.append(kwargs)
        time.sleep(delay["s"])
        kwargs["eval_dataset"] = _synthetic(16, 1)
        return real(_synthetic(32, 0), *args[1:], **kwargs)

    monkeypatch.setattr(ft_cache, "fine_tune", fake)
    monkeypatch.setattr(ft_cache, "heldout_data", lambda *a: _synthetic(16, 1))
    return calls, delay


def _get(base):
    return ft.get_finetuned_model("toy", base_model=base, **SETTINGS)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGES = {
    "truncated weights": lambda f: _truncate(f / "model.safetensors"),
    "empty weights": lambda f: (f / "model.safetensors").write_bytes(b""),
    "missing config": lambda f: (f / "config.json").unlink(),
    "truncated tokenizer": lambda f: _truncate(f / "tokenizer.json"),
    "missing tokenizer files": lambda f: [
        p.unlink() for p in f.iterdir() if p.name.startswith(("tokenizer", "vocab"))
    ],
    "changed weights, same size": lambda f: (f / "model.safetensors").write_bytes(
        bytes(reversed((f / "model.safetensors").read_bytes()))
    ),
    "record without file list": lambda f: (f / ft.RESULT_FILE).write_text(
        json.dumps(
            {
                k: v
                for k, v in json.loads((f / ft.RESULT_FILE).read_text()).items()
                if k != "files"
            }
        )
    ),
    "truncated record": lambda f: _truncate(f / ft.RESULT_FILE),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_entry_is_detected_and_refitted(tiny_base, counting, damage, capsys):
    """P2/P3: a damaged cache entry is never trusted on its record's word."""
    calls, _ = counting
    folder = _get(tiny_base)
    assert (
        len(calls) == 1
        and ft_cache.cache_problem(
            folder, "toy", ft.recipe_settings("toy", **_settings_only())
        )
        == ""
    )
    DAMAGES[damage](folder)
    assert ft_cache.cache_problem(
        folder, "toy", ft.recipe_settings("toy", **_settings_only())
    )
    capsys.readouterr()
    again = _get(tiny_base)
    assert again == folder and len(calls) == 2
    if damage != "truncated record":
        assert "is damaged" in capsys.readouterr().out
    model, tok = load_classifier(again)  # whole again
    assert tok.convert_ids_to_tokens(tok("good film")["input_ids"])[1] == "good"


def _settings_only():
    return {k: v for k, v in SETTINGS.items() if k != "progress"}


def test_damaged_model_folder_is_named(tiny_base, tmp_path):
    """P2: a damaged folder given directly fails with one line naming it."""
    res = ft.fine_tune(
        _synthetic(16, 0),
        base_model=tiny_base,
        output_dir=tmp_path / "m",
        eval_dataset=_synthetic(8, 1),
        **SETTINGS,
    )
    _truncate(res.path / "model.safetensors")
    with pytest.raises(ModelLoadError, match=str(res.path)):
        load_classifier(res.path)


def test_concurrent_fine_tunes_of_one_recipe_train_once(tiny_base, counting):
    """P4: the second process waits for the first and reuses its model."""
    calls, delay = counting
    delay["s"] = 1.0
    results, errors = [], []

    def worker():
        try:
            results.append(_get(tiny_base))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(calls) == 1
    assert results[0] == results[1]
    load_classifier(results[0])


def test_stale_temporary_folders_are_removed(tiny_base, counting, tmp_path):
    """P13: folders left by killed fine-tunes are cleaned up; a running one's
    (its lock held) is kept."""
    cache = tmp_path / "cache"
    cache.mkdir()
    stale = cache / ".toy-base-0123456789-abc123"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"x")
    from filelock import FileLock

    busy = cache / ".other-base-0123456789-def456"
    busy.mkdir()
    lock = FileLock(str(cache / ".other-base-0123456789.lock"))
    lock.acquire()
    try:
        _get(tiny_base)
    finally:
        lock.release()
    assert not stale.exists()
    assert busy.exists()


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", ".hidden", "", "x y"])
def test_names_cannot_escape_the_cache(tiny_base, tmp_path, monkeypatch, name):
    """P14: a corpus name never puts a folder outside the cache."""
    monkeypatch.setenv(ft.CACHE_ENV_VAR, str(tmp_path / "cache" / "inner"))
    with pytest.raises(ValueError, match="cannot name a cache folder"):
        ft.get_finetuned_model(name, base_model=tiny_base)
    data = _synthetic(8, 0, name=name)
    with pytest.raises(ValueError, match="cannot name a cache folder"):
        ft.fine_tune(data, base_model=tiny_base, eval_dataset=data, **SETTINGS)
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["cache"])
    assert not (tmp_path / "x").exists()


def test_damaged_cache_folder_given_to_the_cli_is_named(tiny_base, tmp_path, capsys):
    """P2: a fine-tuned folder passed as --model is checked against its
    manifest; the error names the folder to delete."""
    from captum_iba.app.cli import main

    res = ft.fine_tune(
        _synthetic(16, 0),
        base_model=tiny_base,
        output_dir=tmp_path / "m",
        eval_dataset=_synthetic(8, 1),
        **SETTINGS,
    )
    _truncate(res.path / "model.safetensors")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["explain", "good film", "--model", str(res.path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert f"model folder {res.path} is damaged" in err and "delete it" in err


def _temporaries(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir() and p.name[0] == ".")


@pytest.mark.parametrize("phase", ["training", "save", "rename"])
def test_fine_tune_killed_at_any_phase_leaves_nothing_after_the_next_run(
    tiny_base, counting, tmp_path, phase
):
    """kill -9 during training, during the save or before the final rename
    leaves a temporary folder; the next run that takes the lock removes it
    (issue 20, item 2) and fine-tunes the model whole."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    env[ft.CACHE_ENV_VAR] = str(tmp_path / "cache")
    script = Path(__file__).with_name("_killed_finetune.py")
    proc = subprocess.run(
        [sys.executable, str(script), str(tiny_base), phase],
        env=env, cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr[-2000:]
    cache = tmp_path / "cache"
    left = _temporaries(cache)
    assert len(left) == 1, left  # what the killed run left behind
    if phase != "training":
        assert (cache / left[0] / "model.safetensors").stat().st_size > 0
    calls, _ = counting
    folder = _get(tiny_base)
    assert len(calls) == 1 and _temporaries(cache) == []
    assert (
        ft_cache.cache_problem(
            folder, "toy", ft.recipe_settings("toy", **_settings_only())
        )
        == ""
    )
