"""Whether a `running` run still has a process: a lock that process holds beside its journal.

A run records its end in the store. When the store itself is what failed (deleted, disk
full, made read-only) or the process was killed, that record cannot be written, and the
row would say `running` for good. So the process judging a run holds an exclusive
``flock`` on ``<journal>.live`` from the moment the run is planned (created, or its resume
checked) until its end is recorded; the kernel drops the lock when the process dies,
however it dies. A reader that finds a `running` row whose lock nobody holds knows the run
has no process (``juryflow runs`` shows it as `interrupted`, resumable).

The same lock keeps a run to one process at a time: a second ``--resume`` while the first
judges (or while the run's own process still does) is refused naming that process (its PID
is written in the file), rather than both paying for the same calls and one of them
failing on DuckDB's duplicate key (issue 44).

Local DuckDB files only, and one process per run: a lake's runs and sharded runs have
processes on other machines, which a lock here cannot see.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path

from juryflow.storage.files import private_dir
from juryflow.storage.journal import journal_path

_held: dict[Path, int] = {}
_lock = threading.Lock()


def liveness_path(store_path: Path, run_id: str) -> Path:
    journal = journal_path(store_path, run_id)
    return journal.with_name(f"{journal.name}.live")


class RunHeld(Exception):
    """Another process holds the run's lock: it is judging the run now."""

    def __init__(self, run_id: str, pid: int | None, role: str | None) -> None:
        by = f"process {pid}" if pid is not None else "another process"
        doing = "run" if role == "run" else "resumed"
        super().__init__(f"run {run_id} is being {doing} by {by}; wait for it or stop it")
        self.pid = pid


def claim(store_path: Path, run_id: str, role: str = "resume") -> None:
    """Take the run's lock for this process (``role``: ``run`` for a new run, ``resume``),
    kept until its end is recorded or the process exits; :class:`RunHeld` naming the
    holder when another process has it. Taken again by its holder, it is a no-op. A lock
    that cannot be made at all (the journal's directory not writable) refuses nothing: the
    run goes on without it, and fails where it writes its journal."""
    path = liveness_path(store_path, run_id)
    with _lock:
        if path in _held:
            return
        fd = _locked(path, run_id)
        if fd is None:
            return
        try:
            # Who holds it, for the refusal of the next one: written once the lock is ours,
            # so never over another holder's line.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {role}\n".encode("ascii"), 0)
        except OSError:
            pass  # the lock holds all the same; a refusal then names no PID
        _held[path] = fd


def _locked(path: Path, run_id: str) -> int | None:
    """A descriptor holding the exclusive lock on ``path``; None when no lock can be made.

    The holder removes the file when it lets go (no empty lock file outlives its run): a
    claim that opened it just before then locks a file no longer in the folder, so it
    checks it holds the file the path names, and opens it again if not."""
    for _ in range(3):
        try:
            private_dir(path.parent)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise RunHeld(run_id, *holder) from None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except OSError:
            pass  # removed under us: open it again
        os.close(fd)
    return None


def _holder(fd: int) -> tuple[int | None, str | None]:
    """The PID and role the holder wrote (None, None before it has, or by an older one)."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace")
    except OSError:
        return None, None
    pid, _, role = text.strip().partition(" ")
    return (int(pid) if pid.isdigit() else None), (role or None)


def hold(store_path: Path, run_id: str) -> bool:
    """Take the run's lock for this process; False when it cannot be taken (another process
    holds it, or the journal's directory is not writable): the run goes on without it."""
    try:
        claim(store_path, run_id, "run")
    except RunHeld:
        return False
    return liveness_path(store_path, run_id) in _held


def release(store_path: Path, run_id: str) -> None:
    """Drop the lock once the run's end is recorded (a no-op when this process has none)."""
    path = liveness_path(store_path, run_id)
    with _lock:
        fd = _held.pop(path, None)
    if fd is not None:
        # Removed while still locked, so no claim can lock it after this one let go.
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)  # closing the descriptor releases the flock


def is_live(store_path: Path, run_id: str) -> bool | None:
    """True when a process holds the run's lock, False when none does, None when the run
    has no lock file: its end is recorded (its holder removed the file), or it never had
    one (run by an older juryflow, or its directory was not writable)."""
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
