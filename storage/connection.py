"""Opening the DuckDB file: short-lived connections, retried while another process holds it.

DuckDB lets one process at a time open a file for writing. Runs therefore hold the file only
for the few milliseconds of each write, so that a second run or a ``juryflow sql`` reader
gets its turn; whoever finds the file locked waits with backoff and, past the deadline,
gets a :class:`StoreLockedError` that says what to do.

A run's own writes are the exception (:func:`patient_waits`): a reader must never make a
run fail, and the run's journal keeps every result meanwhile, so they wait past the
deadline, saying on stderr who holds the file, until it is free or the run is stopped.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb

from juryflow.storage import StoreError, StoreMissingError, without_progress_bar

if TYPE_CHECKING:
    from juryflow.storage.lake.attach import LakeTarget

T = TypeVar("T")

DEFAULT_DB = "juryflow.duckdb"
DB_ENV = "JURYFLOW_DB"
DATA_PATH_ENV = "JURYFLOW_DATA_PATH"
LOCK_WAIT_SECONDS = 60.0
LOCK_WAIT_ENV = "JURYFLOW_LOCK_WAIT_SECONDS"
LOCK_NOTICE_SECONDS = 30.0
FIRST_LOCK_NOTICE_SECONDS = 3.0
"""A run waiting for the store says so this soon, then every ``LOCK_NOTICE_SECONDS``."""
MEMORY_LIMIT_ENV = "JURYFLOW_DUCKDB_MEMORY_LIMIT"
DEFAULT_MEMORY_LIMIT = "256MB"
CHUNK_WRITE_MEMORY_LIMIT = "64MB"


def duckdb_config() -> dict[str, str | bool | int | float | list[str]]:
    """Settings of every connection juryflow opens.

    DuckDB's default memory limit is 80 % of the machine; a checkpoint of a large store
    then takes hundreds of MB. A bounded buffer pool spills to disk instead, keeping a long
    run's memory flat (``$JURYFLOW_DUCKDB_MEMORY_LIMIT`` changes it).
    """
    return {"memory_limit": os.environ.get(MEMORY_LIMIT_ENV, DEFAULT_MEMORY_LIMIT)}


def chunk_write_memory_limit() -> str | None:
    """The buffer pool of a run's chunk write, or None to keep the connection's own.

    A chunk write needs far less than the store's 256 MB: its rows and the checkpoint
    that closes its connection. (Before schema migration 7, ``items`` had a primary key:
    each write loaded the key's index and the checkpoint read the table's row group back,
    so the peak grew with the items stored up to the limit.) So chunk writes get a small
    pool, which also caps a checkpoint that has more to do; an explicit
    ``$JURYFLOW_DUCKDB_MEMORY_LIMIT`` is the user's choice and is kept.
    """
    return None if MEMORY_LIMIT_ENV in os.environ else CHUNK_WRITE_MEMORY_LIMIT


class StoreLockedError(StoreError):
    pass


def lock_wait_seconds() -> float:
    """How long a connection waits for a locked file: ``$JURYFLOW_LOCK_WAIT_SECONDS`` or 60."""
    raw = os.environ.get(LOCK_WAIT_ENV)
    if raw is None:
        return LOCK_WAIT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        raise StoreError(
            f"{LOCK_WAIT_ENV}={raw!r} is not a number of seconds; set it to e.g. 60"
        ) from None
    if not seconds >= 0:  # also refuses NaN
        raise StoreError(f"{LOCK_WAIT_ENV}={raw!r} is negative; set it to e.g. 60")
    return seconds


def _notify_stderr(message: str) -> None:
    # Not print(): a Prefect flow with log_prints turns it into a log record, which quiet
    # mode drops.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


@dataclass(frozen=True, slots=True)
class Patience:
    """How a run's connections wait for a file another process holds: without a deadline.

    ``stop`` ends the wait (the run is being interrupted: it must not hang on a reader);
    the connection then raises :class:`StoreLockedError`.
    """

    stop: threading.Event = field(default_factory=threading.Event)
    notice_every: float = LOCK_NOTICE_SECONDS
    notify: Callable[[str], None] = _notify_stderr


_patience: ContextVar[Patience | None] = ContextVar("juryflow_store_patience", default=None)


@contextmanager
def patient_waits(patience: Patience) -> Iterator[Patience]:
    """Within the block (and threads started from it), connections wait without a deadline."""
    token = _patience.set(patience)
    try:
        yield patience
    finally:
        _patience.reset(token)


_HOLDER_PID = re.compile(r"\(PID (\d+)\)")


def lock_holder(error: duckdb.Error) -> str:
    """Who holds the file, from DuckDB's message: "PID 123 (juryflow sql ...)" if known."""
    found = _HOLDER_PID.search(str(error))
    if found is None:
        return "another process"
    pid = found.group(1)
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"PID {pid}"
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    # `python -m juryflow sql ...` and `.venv/bin/juryflow sql ...` both read as juryflow
    for index, word in enumerate(words):
        if word.endswith(("juryflow", "juryflow.cli")):
            words = ["juryflow", *words[index + 1 :]]
            break
    command = " ".join(" ".join(words).split())  # `python -c` scripts span lines
    if len(command) > 70:
        command = command[:67] + "..."
    return f"PID {pid} ({command})" if command else f"PID {pid}"


class StoreGoneError(StoreMissingError):
    """The file was there when this process began to use it and is not any more."""


def resolve_db_path(path: str | Path | None) -> Path:
    """``--db`` wins, then ``$JURYFLOW_DB``, then ``./juryflow.duckdb``; a DuckDB file only
    (the commands that take a lake too use :func:`resolve_target`)."""
    target = resolve_target(path)
    if not isinstance(target, Path):
        raise StoreError(
            f"{target} is a DuckLake store; this needs a DuckDB file: pass --db FILE.duckdb"
        )
    return target


def resolve_target(
    db: str | Path | LakeTarget | None, data_path: str | None = None
) -> Path | LakeTarget:
    """What ``--db`` names: a DuckDB file, or a lake (``ducklake:...``, with ``--data-path``
    or ``$JURYFLOW_DATA_PATH`` for where its Parquet files go).

    ``--db`` wins, then ``$JURYFLOW_DB``, then ``./juryflow.duckdb``.
    """
    from juryflow.storage.lake.attach import LakeTarget, is_lake_target, parse_lake_target

    if isinstance(db, LakeTarget):
        return db
    chosen = str(db) if db else os.environ.get(DB_ENV) or DEFAULT_DB
    if is_lake_target(chosen):
        return parse_lake_target(chosen, data_path or os.environ.get(DATA_PATH_ENV) or None)
    if data_path:
        raise StoreError(
            "--data-path is for a DuckLake store; pass --db ducklake:... with it, or drop it"
        )
    return Path(chosen).expanduser()


def _is_lock_error(error: duckdb.Error) -> bool:
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


# In one process DuckDB shares a database instance between connections to the same file
# and refuses a read-only one beside a read-write one; connections are short-lived, so
# the process simply takes them one at a time.
_PROCESS_LOCK = threading.RLock()


@contextmanager
def connect(
    path: Path | LakeTarget, *, read_only: bool = False, lock_wait: float | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to ``path``, waiting ``lock_wait`` seconds (default
    :func:`lock_wait_seconds`) for a file another process holds, or without a deadline
    inside :func:`patient_waits`. A lake has no file lock: its connection is shared by the
    process (:func:`_lake_connection`)."""
    if not isinstance(path, Path):
        if read_only and path.kind == "duckdb" and not Path(path.catalog).exists():
            # as for a DuckDB file: reading never creates the store
            raise StoreMissingError(
                f"no juryflow store at {path}; run `juryflow run --db {path}` first"
            )
        with _PROCESS_LOCK:
            con = _lake_connection(path)
            try:
                yield con
            except BaseException:
                _abandon_transaction(con)
                raise
        return
    if read_only and not path.exists():
        raise StoreMissingError(
            f"no juryflow store at {path}; run `juryflow run` first or pass --db PATH"
        )
    # DuckDB creates the file and re-creates its .wal at every checkpoint: owner-only both.
    from juryflow.storage.files import private_files

    wait = lock_wait_seconds() if lock_wait is None else lock_wait
    with _PROCESS_LOCK, private_files(), _open(path, read_only, wait, _patience.get()) as con:
        yield con


@contextmanager
def _open(
    path: Path, read_only: bool, lock_wait: float, patience: Patience | None
) -> Iterator[duckdb.DuckDBPyConnection]:
    # Before DuckDB sees the file: it would answer an SQLite file with an extension download.
    from juryflow.storage.duckdb_file import NOT_DUCKDB, not_duckdb

    if (problem := not_duckdb(path)) is not None:
        raise StoreError(problem)
    started = time.monotonic()
    deadline = started + lock_wait
    # A patient wait has no deadline but says early that it waits, and why.
    next_notice = (
        started + min(FIRST_LOCK_NOTICE_SECONDS, patience.notice_every)
        if patience is not None
        else deadline
    )
    delay = 0.02
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=duckdb_config())
            without_progress_bar(con)
            break
        except duckdb.IOException as error:
            if "not a valid DuckDB database file" in str(error):  # an empty file, say
                raise StoreError(NOT_DUCKDB.format(path=path)) from None
            if not _is_lock_error(error):
                raise StoreError(f"cannot open the store {path}: {error}") from None
            now = time.monotonic()
            if patience is None and now >= deadline:
                raise StoreLockedError(
                    f"the store {path} stayed locked by {lock_holder(error)} for "
                    f"{lock_wait:.0f} s; wait for it to finish, or use another file with --db"
                ) from None
            if patience is not None and patience.stop.is_set():
                raise StoreLockedError(
                    f"stopped waiting for the store {path}, locked by {lock_holder(error)}"
                ) from None
            if patience is not None and now >= next_notice:
                patience.notify(
                    f"juryflow: waiting for the store {path}: {lock_holder(error)} has held "
                    f"it for {now - started:.0f} s; the run goes on when it is free "
                    "(its results are safe in the run's journal)"
                )
                next_notice = now + patience.notice_every
            pause = delay * (0.5 + random.random())
            if patience is not None:
                patience.stop.wait(pause)
            else:
                time.sleep(pause)
            delay = min(delay * 2, 1.0)
    try:
        yield con
    finally:
        con.close()


# One attached lake per process and catalog: attaching costs a PostgreSQL round trip and
# loading ~75 MB of extensions, which a per-write connection (as for a file) would repeat.
_LAKES: dict[tuple[str, str], duckdb.DuckDBPyConnection] = {}


def _lake_connection(target: LakeTarget) -> duckdb.DuckDBPyConnection:
    from juryflow.storage.lake.attach import open_lake

    key = (target.kind, target.catalog)
    con = _LAKES.get(key)
    if con is None:
        con = open_lake(target, config=duckdb_config())
        _LAKES[key] = con
    return con


def close_lakes() -> None:
    """Detach every lake this process opened (tests; a process's exit does it too)."""
    with _PROCESS_LOCK:
        while _LAKES:
            _LAKES.popitem()[1].close()


def _abandon_transaction(con: duckdb.DuckDBPyConnection) -> None:
    # On a lake an error can leave even an autocommit statement's transaction open and
    # aborted ("please ROLLBACK"); the shared connection must be usable by the next caller.
    # no transaction active is fine: a failed COMMIT ends its own
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")


# DuckLake retries the race for the next snapshot id itself; these are conflicts of what
# two transactions changed (an UPDATE or DELETE of a table another one wrote), which only
# running the whole transaction again resolves.
# PostgreSQL's own serialization failure reaches DuckDB as a plain error from the catalog.
_CONFLICT_MARKS = (
    "Transaction conflict",
    "Failed to commit DuckLake transaction",
    "could not serialize access due to concurrent",
)
CONFLICT_ATTEMPTS = 30


def is_commit_conflict(error: duckdb.Error) -> bool:
    text = str(error)
    return any(mark in text for mark in _CONFLICT_MARKS)


def retry_conflicts(body: Callable[[], T], where: str, attempts: int = CONFLICT_ATTEMPTS) -> T:
    """``body()`` (one whole transaction), run again while it loses a commit conflict to
    another writer of the lake; StoreError when it keeps losing."""
    delay = 0.02
    for attempt in range(attempts):
        try:
            return body()
        except duckdb.Error as error:
            if not is_commit_conflict(error) or attempt + 1 == attempts:
                if is_commit_conflict(error):
                    raise StoreError(
                        f"{where}: another writer of the lake kept changing the same table "
                        f"({attempts} attempts); try again when the other runs are done"
                    ) from None
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")
