"""Writing files so that a crash never leaves a half-written one.

Every result file of the package is written through :func:`atomic_write`: the
content goes to a temporary file in the same folder, is flushed to disk, and
then replaces the target with :func:`os.replace` (atomic on POSIX and
Windows). A reader sees either the old file or the new one, never a part.
The file gets the permissions of any file the user creates (``0o666`` less
the umask), not the private ``0o600`` of :func:`tempfile.mkstemp`.
"""

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Optional, Tuple, Union

__all__ = [
    "model_slug",
    "CACHE_ENV_VAR",
    "atomic_write",
    "atomic_write_text",
    "cache_root",
    "dump_json",
    "read_json",
    "current_umask",
    "user_mode",
    "write_failed",
    "writing",
    "write_marker",
]

PathLike = Union[str, "os.PathLike[str]"]
#: Overrides the cache root (:func:`cache_root`).
CACHE_ENV_VAR = "CAPTUM_IBA_CACHE"


def cache_root() -> Path:
    """The package's cache folder (fine-tuned models, measured machine facts).

    Returns:
        Path: ``$CAPTUM_IBA_CACHE`` if set, else ``~/.cache/captum_iba``.

    Raises:
        NotADirectoryError: When ``$CAPTUM_IBA_CACHE`` names a file.
    """
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        root = Path(env).expanduser()
        if root.exists() and not root.is_dir():  # issue 90, item 16
            raise NotADirectoryError(
                f"{CACHE_ENV_VAR}={env} is a file: give a folder (the cache of "
                "fine-tuned models and learned weights), or unset it for "
                "~/.cache/captum_iba"
            )
        return root
    return Path.home() / ".cache" / "captum_iba"


def model_slug(model_name: str) -> str:
    """A model's name as part of a file name: its last path part (a hub id's
    name, a folder's or a file's), every character but letters, digits,
    ``-``, ``_`` and ``.`` made ``-``."""
    name = str(model_name).rstrip("/").split("/")[-1]
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def current_umask() -> int:
    """The process's umask (read from ``/proc`` where it can be, so that it
    is never changed even for an instant; else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def user_mode(path: PathLike, folder: bool = False) -> None:
    """Gives ``path`` the permissions a file (or folder) the user creates
    gets: ``0o666`` (``0o777``) less the umask. For what :mod:`tempfile`
    made private (``0o600`` / ``0o700``) before it is renamed into place.

    Args:
        path (str or PathLike): The file or folder.
        folder (bool): Whether it is a folder. Default False.
    """
    os.chmod(path, (0o777 if folder else 0o666) & ~current_umask())


def write_failed(path: PathLike, err: OSError) -> OSError:
    """An error saying which file or folder could not be written, and why.

    The operating system's error of a failed write names no file (a full
    disk gives a bare ``[Errno 28] No space left on device``); this one names
    ``path`` and, for a full disk or a quota, what to do. It keeps ``err`` 's
    ``errno``.

    Args:
        path (str or PathLike): What was being written.
        err (OSError): The error.

    Returns:
        OSError: The error to raise (``from err``).
    """
    reason = err.strerror or str(err) or type(err).__name__
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += ": free some space, or write elsewhere"
    new = OSError(f"cannot write {os.fspath(path)}: {reason}")
    new.errno = err.errno
    return new


@contextlib.contextmanager
def writing(path: PathLike) -> Iterator[None]:
    """Turns an OSError of the block into :func:`write_failed` 's, naming
    ``path``."""
    try:
        yield
    except OSError as err:
        if str(os.fspath(path)) in str(err):
            raise  # already says which file
        raise write_failed(path, err) from err


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Opens a temporary file beside ``path``; on success it replaces ``path``.

    Args:
        path (str or PathLike): The file to write. Its folder must exist.
        mode (str, optional): ``"w"`` (text, UTF-8) or ``"wb"``.

    Yields:
        The open temporary file. If the block raises, the temporary file is
        removed and ``path`` is left as it was.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    with writing(target):
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
    try:
        user_mode(tmp)
        encoding = None if mode == "wb" else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh, writing(target):
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        with writing(target):
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: PathLike, text: Union[str, Iterable[str]]) -> Path:
    """Writes ``text`` (UTF-8; or its pieces, in order) to ``path`` atomically;
    returns the path."""
    with atomic_write(path) as fh:
        for piece in [text] if isinstance(text, str) else text:
            fh.write(piece)
    return Path(path)


def write_marker(folder: PathLike, name: str = "COMPLETE.json", **info: Any) -> Path:
    """Writes the completion marker of a results folder (atomically).

    The marker is written last, after every result file, so its presence
    says that the run finished; its JSON holds ``info`` (e.g. the files
    written and the command).

    Args:
        folder (str or PathLike): The results folder.
        name (str, optional): The marker's file name.
        **info (Any): JSON-serialisable facts about the run.

    Returns:
        Path: The marker's path.
    """
    return atomic_write_text(Path(folder) / name, json.dumps(info, indent=2) + "\n")


def dump_json(data: Any, path: Optional[PathLike] = None) -> str:
    """``data`` as JSON text, also written atomically to ``path`` when given."""
    text = json.dumps(data)
    if path is not None:
        atomic_write_text(path, text)
    return text


def read_json(
    source: Union[str, "os.PathLike[str]"], what: str = "JSON document"
) -> Tuple[Any, str]:
    """Parsed JSON from text (starting with ``{``) or from a file's path.

    Args:
        source (str or PathLike): JSON text, or the path of a file holding it.
        what (str): What the text should be, for the error message.

    Returns:
        (data, where): The parsed value, and ``"JSON text"`` or the file's
        path (for the caller's error messages).

    Raises:
        FileNotFoundError: Naming the file, when there is none.
        ValueError: Naming the file or the text, when it cannot be read or
            is not JSON.
    """
    where = "JSON text"
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and not source.lstrip().startswith("{")
    ):
        where = os.fspath(source)
        try:
            with open(source, encoding="utf-8") as fh:
                source = fh.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"{where}: no such file") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"{where}: cannot be read ({err})") from None
    try:
        return json.loads(source), where
    except ValueError as err:
        raise ValueError(f"{where}: not a {what}: {err}") from None
