"""The fine-tune cache under faults: damaged entries, concurrent runs, killed
runs, names that would escape the cache (P2, P3, P4, P13, P14)."""

import json
import os
import stat
import threading

import pytest

from captum_iba.app import finetune as ft
from captum_iba.app.finetune import cache as ft_cache
from captum_iba.app.models import ModelLoadError, load_classifier
from tests.helpers import synthetic_sentiment

OPTIONS = ft.FineTuneOptions(steps=3, batch_size=8, max_length=16, lr=1e-3)


def _get(base):
    return ft.get_finetuned_model(
        "toy", base_model=base, options=OPTIONS, progress=False
    )


def _fine_tune(base, out, data):
    return ft.fine_tune(
        data, base_model=base, output_dir=out, options=OPTIONS, eval_dataset=data,
        progress=False,
    )  # fmt: skip


@pytest.fixture
def damaged_model(tiny_base, tmp_path):
    """A fine-tuned model folder whose weights file lost its second half."""
    res = _fine_tune(tiny_base, tmp_path / "m", synthetic_sentiment(16, 0))
    _truncate(res.path / "model.safetensors")
    return res.path


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
def test_damaged_entry_is_detected_and_refitted(
    tiny_base, counted_fine_tune, damage, capsys
):
    """P2/P3: a damaged cache entry is never trusted on its record's word."""
    calls, _ = counted_fine_tune
    folder = _get(tiny_base)
    assert len(calls) == 1
    assert ft_cache.cache_problem(folder, "toy", OPTIONS.as_dict()) == ""
    DAMAGES[damage](folder)
    assert ft_cache.cache_problem(folder, "toy", OPTIONS.as_dict())
    capsys.readouterr()
    again = _get(tiny_base)
    assert again == folder and len(calls) == 2
    out = capsys.readouterr().out
    if damage != "truncated record":
        assert "is damaged" in out and "made again" in out
        assert "No fine-tuned" not in out and "cached yet" not in out
    model, tok = load_classifier(again)  # whole again
    assert tok.convert_ids_to_tokens(tok("good film")["input_ids"])[1] == "good"


def test_damaged_model_folder_is_named(damaged_model):
    """P2: a damaged folder given directly fails with one line naming it."""
    with pytest.raises(ModelLoadError, match=str(damaged_model)):
        load_classifier(damaged_model)


def test_concurrent_fine_tunes_of_one_recipe_train_once(tiny_base, counted_fine_tune):
    """P4: the second process waits for the first and reuses its model."""
    calls, delay = counted_fine_tune
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


def test_stale_temporary_folders_are_removed(tiny_base, counted_fine_tune, tmp_path):
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
    data = synthetic_sentiment(8, 0, name=name)
    with pytest.raises(ValueError, match="cannot name a cache folder"):
        _fine_tune(tiny_base, None, data)
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["cache"])
    assert not (tmp_path / "x").exists()


def test_damaged_cache_folder_given_to_the_cli_is_named(damaged_model, capsys):
    """P2: a fine-tuned folder passed as --model is checked against its
    manifest; the error names the folder to delete."""
    from captum_iba.app.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["explain", "good film", "--model", str(damaged_model)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert f"model folder {damaged_model} is damaged" in err and "delete it" in err


@pytest.mark.skipif(not hasattr(os, "umask"), reason="POSIX permissions")
def test_cached_models_get_the_user_s_permissions(tiny_base, counted_fine_tune):
    """The cache folder is a temporary folder renamed into place: it gets the
    umask's permissions, not mkdtemp's private 0o700 (its files already do)."""
    old = os.umask(0o022)
    try:
        folder = _get(tiny_base)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    record = folder / "captum_iba_finetune.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o644


def _temporaries(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir() and p.name[0] == ".")


@pytest.mark.parametrize("phase", ["training", "save", "rename"])
def test_fine_tune_killed_at_any_phase_leaves_nothing_after_the_next_run(
    tiny_base, counted_fine_tune, tmp_path, phase
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
    calls, _ = counted_fine_tune
    folder = _get(tiny_base)
    assert len(calls) == 1 and _temporaries(cache) == []
    assert ft_cache.cache_problem(folder, "toy", OPTIONS.as_dict()) == ""
