"""A store's connections: one per use of a file (or the process's lake connection), reads on one
snapshot, every write one transaction, run again on a lake's commit conflicts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

import duckdb

from juryflow.storage.connection import (
    StoreError,
    StoreGoneError,
    connect,
    resolve_target,
    retry_conflicts,
)
from juryflow.storage.lake.attach import LakeTarget
from juryflow.storage.store.checks import _check_schema

T = TypeVar("T")


def _file_id(path: Path | LakeTarget) -> tuple[int, int] | None:
    if not isinstance(path, Path):
        return None
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Does the connection's own database hold table ``main.name``?"""
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = ?",
        [name],
    ).fetchone()
    return bool(row and row[0])


class StoreBase:
    """The connections of a :class:`~juryflow.storage.store.Store`, which every part of it
    (runs, writes, reads, calibrations, migrations) builds on."""

    def __init__(
        self, path: str | Path | LakeTarget | None = None, data_path: str | None = None
    ) -> None:
        self.path: Path | LakeTarget = resolve_target(path, data_path)
        self._held: duckdb.DuckDBPyConnection | None = None
        self._held_read_only = False
        self._checked = False
        self._file: tuple[int, int] | None = None
        """The file (device, inode) checked to be the store; None for a lake."""
        self._had_tables = False

    @property
    def lake(self) -> LakeTarget | None:
        """The lake this store is, or None for a DuckDB file."""
        return self.path if isinstance(self.path, LakeTarget) else None

    def exists(self) -> bool:
        """Is there a store to read (a lake is assumed to exist: its catalog says)?"""
        return self.lake is not None or (isinstance(self.path, Path) and self.path.is_file())

    @contextmanager
    def _open(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to a file checked to be a juryflow store (once per Store); that it
        is a DuckDB file at all, :func:`juryflow.storage.connection.connect` checks."""
        if self._checked and isinstance(self.path, Path) and not self.path.exists():
            # DuckDB would make a new, empty file there, and the writes would then fail on
            # tables it does not have.
            raise StoreGoneError(
                f"the store {self.path} is gone: it was deleted or moved while in use"
            )
        with connect(self.path, read_only=read_only) as con:
            if not self._checked:
                _check_schema(con, self.path)
                self._checked = True
                self._file = _file_id(self.path)
                self._had_tables = self._file is not None and has_table(con, "schema_version")
            elif self._file is not None:
                tables = has_table(con, "schema_version")
                if _file_id(self.path) != self._file or (self._had_tables and not tables):
                    # Deleted between the check above and the connect: DuckDB made a new,
                    # empty file in its place, which is not the store this process was using
                    # (the new file may even get the old one's inode back: hence the tables).
                    raise StoreGoneError(
                        f"the store {self.path} is gone: it was deleted or moved while in use"
                    )
                self._had_tables = self._had_tables or tables
            yield con

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one connection for many writes (bulk loads).

        Opening and closing the file costs a checkpoint each time, which dominates bulk
        writes; runs do not use this, so that other processes get the file between chunks.
        """
        with self._open(read_only=False) as con:
            self._held = con
            try:
                yield
            finally:
                self._held = None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold one read-only connection for many reads (a report's dozens of queries).

        Each connection to a file costs 20-30 ms to open, which a report reading through
        thirty of them paid on every command. A lake keeps its one connection anyway, and
        a block inside a held connection already has one. Nothing in the block may write.
        """
        if self._held is not None or self.lake is not None:
            yield
            return
        with self._open(read_only=True) as con:
            self._held, self._held_read_only = con, True
            try:
                yield
            finally:
                self._held, self._held_read_only = None, False

    @contextmanager
    def _connection(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._held is not None:
            if self._held_read_only and not read_only:
                # DuckDB would refuse a read-write connection to the file beside the held
                # one; a StoreError, as for a store this user cannot write, which a
                # reader's optional upgrade (ensure_views) already takes in its stride.
                raise StoreError(f"the store {self.path} is open for reading only here")
            yield self._held
        else:
            with self._open(read_only) as con:
                yield con

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to read; on a lake, every statement in the block reads one snapshot
        (a transaction), so numbers read in several queries agree while others write."""
        with self._connection(read_only=True) as con:
            if self.lake is None or self._held is not None:
                yield con
                return
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                with suppress(duckdb.Error):  # the read's own error is the one to see
                    con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One transaction; on a lake, a lost commit conflict raises (use :meth:`transact`)."""
        with self._connection(read_only=False) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def transact(self, body: Callable[[duckdb.DuckDBPyConnection], T], what: str = "write") -> T:
        """``body(con)`` in one transaction, run again (whole) while a lake's commit
        conflicts with another writer's; ``body`` must therefore read what it depends on."""

        def once() -> T:
            with self.write() as con:
                return body(con)

        if self.lake is None:
            return once()
        return retry_conflicts(once, f"cannot {what} in {self.path}")
