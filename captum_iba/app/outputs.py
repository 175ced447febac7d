"""The output folders of a command: claimed before anything is written,
locked for one run at a time, and cleaned up after a failure of what this
run made - never of what it did not make.

:func:`removed_on_failure` wraps every command (``RANK`` 0 only, under
``torchrun``):

1. **claim** - the folders the command writes into (``--out``, ``--html`` 's
   folder) are created here, one level at a time with ``mkdir`` (which
   fails when the folder exists), so that a run knows which folders *it*
   created, even when another run starts in the same instant;
2. **lock** - ``--out`` gets a lock (a file lock on ``OUT/.captum-iba.lock``,
   taken at once or not at all) before anything else is written: a second
   run on the same ``--out`` stops at once with a one-line error, and removes
   nothing;
3. **clean up** - on a failure (an error, Ctrl-C) of the run that holds the
   lock, what it made goes unless it holds finished work a re-run resumes
   from: a folder it created goes entirely; in a folder that was there, the
   corpus engine's ``shards/`` goes when this run made it.

The lock is released when the command ends, and its file removed (the
kernel releases it when a process dies, even by ``kill -9``; the hidden file
then stays until the next run). Torch-free.
"""

import argparse
import json
import os
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from filelock import FileLock, Timeout

from captum_iba._utils.io import atomic_write_text
from captum_iba.app.errors import CLIError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK_FILE",
    "RESUME_FILE",
    "Resume",
    "TryLock",
    "claim",
    "removed_on_failure",
    "run_lock",
]

#: The lock file of a run's ``--out`` (hidden: never taken for work).
LOCK_FILE = ".captum-iba.lock"
#: How often a run retries its claim and lock when another run's clean-up
#: removed the folder between the two.
_TRIES = 3


def _holds_work(folder: Path) -> bool:
    """Whether a results folder holds finished work: a scored instance in a
    shard of the corpus engine, or a file outside its bookkeeping (the
    settings, locks, hidden temporary files)."""
    from captum_iba.app.engine.records import record_type  # (torch: not at import)

    for path in folder.rglob("*"):
        if not path.is_file() or path.name.startswith("."):
            continue
        if path.parent.name != "shards":
            return True
        if path.suffix == ".jsonl":
            with open(path, "rb") as fh:
                for line in fh:
                    try:
                        if record_type(json.loads(line)) == "row":
                            return True
                    except (ValueError, AttributeError):
                        continue
    return False


def claim(folder: Path) -> Optional[Path]:
    """Creates ``folder`` and the parents it lacks, one level at a time, each
    with ``mkdir`` that fails when the folder exists.

    Every level is made, even when another process makes some of them in the
    same instant: the command's lock is taken in ``folder`` itself, so it must
    be there when this returns.

    Args:
        folder (Path): The folder.

    Returns:
        Path or None: The highest folder this call created, all below it its
        own too; None when ``folder`` was there, when another process made a
        level below one this call made (what is in it is not all ours to
        remove), or when nothing could be made (the command's own check says
        why).
    """
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    created, shared = None, False
    for part in reversed(missing):
        try:
            part.mkdir()
        except FileExistsError:  # made by another process meanwhile
            shared = shared or created is not None
            continue
        except OSError:
            break  # a file in the way, no permission: said later
        created = created or part
    return None if shared else created


class TryLock:
    """A lock on a file, taken at once or not at all, whose file is removed
    when it is released (the kernel releases it when its process dies; the
    file then stays, and the next :meth:`acquire` takes it).

    After ``flock`` the file is checked to be the one at the path (a process
    that locked a file another run had just removed tries again), the
    standard cure for that race. Where ``fcntl`` is missing (Windows),
    :class:`filelock.FileLock` holds it and the file stays.

    Args:
        path (Path): The lock file; its folder must be there.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: Optional[int] = None
        self._fallback: Optional[FileLock] = None

    def acquire(self) -> bool:
        """Takes the lock; False when another process holds it.

        Raises:
            FileNotFoundError: When the file's folder is not there.
        """
        if fcntl is None:
            self._fallback = FileLock(str(self.path))
            try:
                self._fallback.acquire(timeout=0)
            except Timeout:
                return False
            return True
        for _ in range(_TRIES):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return True
            os.close(fd)  # the file was removed meanwhile: lock the new one
        return False

    def release(self) -> None:
        """Removes the file (while still holding it), then releases it."""
        if self._fallback is not None:
            self._fallback.release()
            return
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass  # its folder was removed with it
        os.close(self._fd)  # closing releases the flock
        self._fd = None


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Holds ``out`` 's lock (:data:`LOCK_FILE`), taken at once or not at all;
    the lock file goes when it is released.

    Raises:
        ~captum_iba.app.errors.CLIError: When another run holds it.
        FileNotFoundError: When ``out`` is no longer there.
    """
    lock = TryLock(out / LOCK_FILE)
    if not lock.acquire():
        raise CLIError(
            f"--out {out}: another captum-iba run is writing there (one run per "
            "--out at a time); wait for it to end, or give another --out. "
            "Nothing was written or removed"
        )
    try:
        yield
    finally:
        lock.release()


def _locked(out: Path, created: Optional[Path]) -> "tuple[ExitStack, Optional[Path]]":
    """``out`` claimed and locked, retried when another run's clean-up removed
    it in between; returns the held lock and the highest folder created."""
    for _ in range(_TRIES):
        stack = ExitStack()
        try:
            stack.enter_context(run_lock(out))
            return stack, created
        except FileNotFoundError:  # removed by the run that held it: claim again
            created = claim(out)
    raise CLIError(f"--out {out}: the folder keeps disappearing; run again")


def _shards_made(out: Optional[Path], existed: bool) -> Optional[Path]:
    shards = None if out is None else out / "shards"
    return shards if shards is not None and not existed else None


@contextmanager
def removed_on_failure(args: argparse.Namespace) -> Iterator[None]:
    """A command's output folders claimed, ``--out`` locked, and what the
    command made removed on its failure (see the module docstring).

    Raises:
        ~captum_iba.app.errors.CLIError: When another run holds ``--out``.
    """
    if os.environ.get("RANK", "0") != "0":
        yield  # torchrun's other ranks: rank 0 claims, locks and cleans up
        return
    out = Path(args.out).expanduser() if getattr(args, "out", None) else None
    html = getattr(args, "html", None)
    made: List[Optional[Path]] = []
    if html:
        made.append(claim(Path(html).expanduser().parent))
    with ExitStack() as held:
        if out is not None:
            created = claim(out)
            if out.is_dir():
                lock, created = _locked(out, created)
                held.enter_context(lock)
            shards_existed = (out / "shards").exists()
            made += [created, _shards_made(out, shards_existed)]
        try:
            yield
        except BaseException:
            for root in made:
                if root is not None and root.is_dir() and not _holds_work(root):
                    shutil.rmtree(root, ignore_errors=True)
            raise


#: The record of the pieces of a ``reproduce`` run done
#: (:mod:`captum_iba.app.reproduce`).
RESUME_FILE = "resume.json"


class Resume:
    """The pieces of a run recorded in ``OUT/resume.json``, each with the
    fingerprint of what it was measured with.

    Args:
        folder (Path): The results folder.

    Raises:
        ValueError: Naming the file, when it is damaged.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / RESUME_FILE
        self.done: Dict[str, str] = {}
        if self.path.exists():
            try:
                self.done = dict(json.loads(self.path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as err:
                raise ValueError(
                    f"{self.path} is damaged ({err}); delete it to measure every "
                    "piece again"
                ) from None

    @staticmethod
    def fingerprint(settings: Dict[str, Any]) -> str:
        """The settings as canonical JSON."""
        return json.dumps(settings, sort_keys=True, default=repr)

    def skips(self, key: str, settings: Dict[str, Any]) -> bool:
        """Whether piece ``key`` is done with ``settings`` (then said so)."""
        if self.done.get(key) != self.fingerprint(settings):
            return False
        print(
            f"[captum_iba] {key}: measured by an earlier run in {self.path.parent} "
            f"with the same settings and model; kept (delete {self.path.name} to "
            "measure it again)",
            flush=True,
        )
        return True

    def record(self, key: str, settings: Dict[str, Any]) -> None:
        """Piece ``key`` is done with ``settings`` (after its files)."""
        self.done[key] = self.fingerprint(settings)
        atomic_write_text(self.path, json.dumps(self.done, indent=1) + "\n")
