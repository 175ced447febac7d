"""Files written atomically get the user's permissions (the umask), not the
private ones of a temporary file; a write that fails names the file."""

import errno
import os
import stat
import sys

import pytest

from captum_iba._utils.io import atomic_write, atomic_write_text, current_umask

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")


@pytest.fixture
def umask():
    """Sets a umask for the test, restores the old one after."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@posix
@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0, 0o666)])
def test_atomic_files_follow_the_umask(mask, expected, umask, tmp_path):
    umask(mask)
    assert current_umask() == mask
    assert _mode(atomic_write_text(tmp_path / "a.txt", "x")) == expected
    with atomic_write(tmp_path / "b.bin", "wb") as fh:
        fh.write(b"x")
    assert _mode(tmp_path / "b.bin") == expected
    open(tmp_path / "plain", "w").close()  # what any other file gets
    assert _mode(tmp_path / "plain") == expected


@posix
def test_the_umask_is_left_as_it_was(umask, tmp_path):
    umask(0o027)
    atomic_write_text(tmp_path / "a.txt", "x")
    assert current_umask() == 0o027


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_names_the_file_and_what_to_do(tmp_path, monkeypatch):
    """Issue 31, item 9: not a bare '[Errno 28]'."""
    target = tmp_path / "table.md"
    target.write_text("old")
    monkeypatch.setattr(os, "fsync", _full_disk)
    with pytest.raises(OSError) as caught:
        atomic_write_text(target, "new")
    message = str(caught.value)
    assert message.startswith(f"cannot write {target}: No space left on device")
    assert "free some space" in message and "[Errno" not in message
    assert caught.value.errno == errno.ENOSPC
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["table.md"]


def test_a_shard_that_cannot_be_appended_is_named(tmp_path, monkeypatch):
    from captum_iba.app.engine.records import ShardWriter

    path = tmp_path / "rank-00000.jsonl"
    with ShardWriter(path) as writer:
        monkeypatch.setattr(os, "fsync", _full_disk)
        with pytest.raises(OSError, match=f"cannot write {path}: No space"):
            writer.append([{"kind": "start"}])


def test_the_command_line_says_which_file(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    from captum_iba.app.cli import main

    page = tmp_path / "page.html"
    monkeypatch.setattr(os, "fsync", _full_disk)  # the page is explain's one file
    with pytest.raises(SystemExit) as exc:
        main(["explain", "a fine film", "--model", tiny_model_dir, "--method",
              "random", "--html", str(page)])  # fmt: skip
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"cannot write {page}: No space left on device: free some space" in err
