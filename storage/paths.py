"""Can juryflow write there? Asked before the work, not found out after it.

Permission bits do not answer it: root ignores them, while ``/proc`` or a path under a
regular file refuses everyone. Creating (and removing) a file in the directory does.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


class UnwritablePathError(ValueError):
    """A file juryflow was asked to write cannot be written; the message names the option."""


def reason(error: OSError) -> str:
    """The operating system's words for ``error``, without the errno prefix."""
    return error.strerror or str(error)


def probe_directory(directory: Path) -> None:
    """Create ``directory`` (and its parents) and prove a file can be made in it.

    Raises OSError when it cannot.
    """
    for ancestor in (directory, *directory.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                # mkdir would say "File exists", which hides the cause
                raise NotADirectoryError(errno.ENOTDIR, f"{ancestor} is not a directory")
            break
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".juryflow-probe-", dir=directory)
    os.close(fd)
    os.unlink(name)


def writable_file(path: str | Path, option: str) -> Path:
    """``path`` as a file juryflow may write (its directory made if missing).

    Raises :class:`UnwritablePathError` naming ``option`` when it is a directory or its
    directory cannot be made or written.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise UnwritablePathError(
            f"cannot write {target}: it is a directory; pass {option} a file name"
        )
    try:
        probe_directory(target.parent)
    except OSError as error:
        raise UnwritablePathError(
            f"cannot write {target}: {reason(error)}; pass {option} a path in a writable directory"
        ) from None
    return target
