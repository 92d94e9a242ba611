"""Files juryflow creates are private to their owner: 0600 files, 0700 directories.

The store, its write-ahead log, the journal and the report hold judged data, model answers
and error messages; on a shared machine none of that is for other users. Modes are
``0600 & ~umask``: a stricter umask (0277, say) is respected, a looser one is not.

DuckDB creates the store and its ``.wal`` itself, and deletes and re-creates the ``.wal`` at
every checkpoint, so no chmod after the fact can cover it; :func:`private_files` instead
makes the process umask at least 077 while a connection is open.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
PRIVATE_UMASK = 0o077

_umask_lock = threading.Lock()
_umask_depth = 0
_saved_umask = 0


def current_umask() -> int:
    """The process umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    # Elsewhere the only way to read it is to set it; the value set meanwhile is stricter.
    with _umask_lock:
        mask = os.umask(PRIVATE_UMASK)
        os.umask(mask)
    return mask


def private_mode(mode: int = PRIVATE_FILE_MODE) -> int:
    return mode & ~current_umask() & 0o777


@contextmanager
def private_files() -> Iterator[None]:
    """Within the block, files and directories this process creates are owner-only.

    The umask is per process, so threads share it: nested and concurrent blocks are
    counted and the original umask comes back when the last one ends. Other threads'
    files created meanwhile are only ever made stricter, never looser.
    """
    global _umask_depth, _saved_umask
    with _umask_lock:
        if _umask_depth == 0:
            # Set a strict value first, never 0: there is no moment with a looser umask.
            _saved_umask = os.umask(PRIVATE_UMASK)
            os.umask(_saved_umask | PRIVATE_UMASK)
        _umask_depth += 1
    try:
        yield
    finally:
        with _umask_lock:
            _umask_depth -= 1
            if _umask_depth == 0:
                os.umask(_saved_umask)


def private_file(path: str | Path) -> None:
    """Make an existing file owner-only (0600 & ~umask); a stricter mode is kept as it is."""
    current = os.stat(path).st_mode & 0o777
    wanted = current & private_mode()
    if wanted != current:
        os.chmod(path, wanted)


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with the last component owner-only (0700)."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)


def open_private_append(path: Path) -> int:
    """A descriptor appending to ``path``, created 0600 if new and made 0600 if looser."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
    try:
        current = os.fstat(fd).st_mode & 0o777
        wanted = current & private_mode()
        if wanted != current:
            os.fchmod(fd, wanted)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a new owner-only file.

    A regular file (or a new path) is replaced through a temporary file in the same
    directory, so an existing report readable by others is not merely overwritten in
    place with its old mode. A device or pipe (``-o /dev/stdout``) is written directly.
    """
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8") as handle:
            handle.write(text)
        return
    # mkstemp creates the file 0600 (less what the umask takes away).
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            temporary.unlink()
        raise
