"""Writing files so that a crash never leaves a half-written one.

Every result file of the package is written through :func:`atomic_write`: the
content goes to a temporary file in the same folder, is flushed to disk, and
then replaces the target with :func:`os.replace` (atomic on POSIX and
Windows). A reader sees either the old file or the new one, never a part.
"""

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Union

__all__ = [
    "CACHE_ENV_VAR",
    "atomic_write",
    "atomic_write_text",
    "cache_root",
    "write_marker",
]

PathLike = Union[str, "os.PathLike[str]"]
#: Overrides the cache root (:func:`cache_root`).
CACHE_ENV_VAR = "CAPTUM_IBA_CACHE"


def cache_root() -> Path:
    """The package's cache folder (fine-tuned models, measured machine facts).

    Returns:
        Path: ``$CAPTUM_IBA_CACHE`` if set, else ``~/.cache/captum_iba``.
    """
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "captum_iba"


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
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        encoding = None if mode == "wb" else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
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
