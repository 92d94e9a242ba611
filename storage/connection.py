"""Opening the DuckDB file: short-lived connections, retried while another process holds it.

DuckDB lets one process at a time open a file for writing. Runs therefore hold the file only
for the few milliseconds of each write, so that a second run or a ``juryflow sql`` reader
gets its turn; whoever finds the file locked waits with backoff and, past the deadline,
gets a :class:`StoreLockedError` that says what to do.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

DEFAULT_DB = "juryflow.duckdb"
DB_ENV = "JURYFLOW_DB"
LOCK_WAIT_SECONDS = 60.0
MEMORY_LIMIT_ENV = "JURYFLOW_DUCKDB_MEMORY_LIMIT"
DEFAULT_MEMORY_LIMIT = "256MB"


def duckdb_config() -> dict[str, str | bool | int | float | list[str]]:
    """Settings of every connection juryflow opens.

    DuckDB's default memory limit is 80 % of the machine; a checkpoint of a large store
    then takes hundreds of MB. A bounded buffer pool spills to disk instead, keeping a long
    run's memory flat (``$JURYFLOW_DUCKDB_MEMORY_LIMIT`` changes it).
    """
    return {"memory_limit": os.environ.get(MEMORY_LIMIT_ENV, DEFAULT_MEMORY_LIMIT)}


class StoreError(RuntimeError):
    """A store problem, said in terms of what to do about it."""


class StoreLockedError(StoreError):
    pass


class StoreMissingError(StoreError):
    pass


def resolve_db_path(path: str | Path | None) -> Path:
    """``--db`` wins, then ``$JURYFLOW_DB``, then ``./juryflow.duckdb``."""
    chosen = path or os.environ.get(DB_ENV) or DEFAULT_DB
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
    path: Path, *, read_only: bool = False, lock_wait: float = LOCK_WAIT_SECONDS
) -> Iterator[duckdb.DuckDBPyConnection]:
    if read_only and not path.exists():
        raise StoreMissingError(
            f"no juryflow store at {path}; run `juryflow run` first or pass --db PATH"
        )
    with _PROCESS_LOCK, _open(path, read_only, lock_wait) as con:
        yield con


@contextmanager
def _open(path: Path, read_only: bool, lock_wait: float) -> Iterator[duckdb.DuckDBPyConnection]:
    deadline = time.monotonic() + lock_wait
    delay = 0.02
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=duckdb_config())
            break
        except duckdb.IOException as error:
            if not _is_lock_error(error):
                raise StoreError(f"cannot open the store {path}: {error}") from None
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"the store {path} stayed locked by another process for {lock_wait:.0f} s; "
                    "wait for the other run to finish, or use another file with --db"
                ) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)
    try:
        yield con
    finally:
        con.close()
