"""Files written atomically get the user's permissions (the umask), not the
private ones of a temporary file."""

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
