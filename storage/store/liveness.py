"""Whether a `running` run still has a process: a lock that process holds beside its journal.

A run records its end in the store. When the store itself is what failed (deleted, disk
full, made read-only) or the process was killed, that record cannot be written, and the
row would say `running` for good. So the process judging a run holds an exclusive
``flock`` on ``<journal>.live`` from its first chunk until its end is recorded; the kernel
drops the lock when the process dies, however it dies. A reader that finds a `running`
row whose lock nobody holds knows the run has no process (``juryflow runs`` shows it as
`interrupted`, resumable).

Local DuckDB files only, and one process per run: a lake's runs and sharded runs have
processes on other machines, which a lock here cannot see.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from juryflow.storage.journal import journal_path

_held: dict[Path, int] = {}
_lock = threading.Lock()


def liveness_path(store_path: Path, run_id: str) -> Path:
    journal = journal_path(store_path, run_id)
    return journal.with_name(f"{journal.name}.live")


def hold(store_path: Path, run_id: str) -> bool:
    """Take the run's lock for this process; False when it cannot be taken (another process
    holds it, or the journal's directory is not writable): the run goes on without it."""
    path = liveness_path(store_path, run_id)
    with _lock:
        if path in _held:
            return True
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        _held[path] = fd
        return True


def release(store_path: Path, run_id: str) -> None:
    """Drop the lock once the run's end is recorded (a no-op when this process has none)."""
    path = liveness_path(store_path, run_id)
    with _lock:
        fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock


def is_live(store_path: Path, run_id: str) -> bool | None:
    """True when a process holds the run's lock, False when none does, None when the run
    never had one (run by an older juryflow, or its directory was not writable)."""
    path = liveness_path(store_path, run_id)
    with _lock:
        if path in _held:
            return True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
