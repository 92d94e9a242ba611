"""What a failed write says about the store itself: gone, its disk full, or no longer
writable. A run that meets one of these cannot record anything more, but every judgment it
made is in its journal, so it ends in one line that says what to fix and how to resume."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

import duckdb

from juryflow.storage.connection import StoreError, StoreGoneError

_FULL = ("No space left on device", "Disk quota exceeded")
_READ_ONLY = ("Permission denied", "Read-only file system", "Operation not permitted")
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_TOO_LARGE = "File too large"
"""EFBIG: a file reached the largest size this process may write (``ulimit -f``) or its
file system holds; for the run as final as a full disk, and cured the same way."""


@dataclass(frozen=True, slots=True)
class StoreFailure:
    what: str
    """What happened to the store, e.g. "the disk of the store x.duckdb is full"."""
    fix: str
    """What the user does before resuming ("" when resuming is the fix)."""


def _causes(error: BaseException) -> list[BaseException]:
    """The error and the ones it was raised from (a StoreError hides a duckdb.Error)."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def stopped_by_ctrl_c(error: BaseException) -> bool:
    """Whether ``error`` is, or was raised over, a DuckDB query that a Ctrl-C stopped: DuckDB
    answers SIGINT in a query with InterruptException, which the checks before a run turn
    into their own one-line errors ("error: Query interrupted", exit 2, on a loaded
    machine) when the user only pressed Ctrl-C."""
    return any(isinstance(cause, duckdb.InterruptException) for cause in _causes(error))


def store_failure(error: BaseException, store: object) -> StoreFailure | None:
    """The store-level failure behind ``error``, or None when it is about something else."""
    if isinstance(store, Path) and not store.exists():
        # whatever the write said (a file deleted under an open connection fails in several
        # ways), the file is not there any more
        return StoreFailure(f"the store {store} was deleted or moved during the run", "")
    for cause in _causes(error):
        if isinstance(cause, StoreGoneError):
            return StoreFailure(f"the store {store} was deleted or moved during the run", "")
        code = cause.errno if isinstance(cause, OSError) else None
        text = str(cause) if isinstance(cause, OSError | duckdb.Error | StoreError) else ""
        if code in _FULL_ERRNOS or any(mark in text for mark in _FULL):
            return StoreFailure(f"the disk of the store {store} is full", "free some space")
        if code == errno.EFBIG or _TOO_LARGE in text:
            return StoreFailure(
                f"a file of the store {store} or of its journal reached the largest size "
                "this process may write",
                "raise the limit (ulimit -f) or free some space",
            )
        if code in _READ_ONLY_ERRNOS or any(mark in text for mark in _READ_ONLY):
            return StoreFailure(
                f"the store {store} can no longer be written ({text or 'permission denied'})",
                "make it writable again",
            )
    return None
