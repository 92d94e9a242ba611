"""Bringing a store to the latest schema: numbered migrations, their Python backfills, and the
views recreated when this juryflow's differ from the store's."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import duckdb

from juryflow.storage.connection import StoreError
from juryflow.storage.lake.attach import lake_ddl
from juryflow.storage.paths import probe_directory, reason
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS
from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.checks import StoreSchemaError
from juryflow.storage.store.span_sets import BACKFILLS
from juryflow.storage.views import VIEWS


def _unchanged(ddl: str) -> str:
    return ddl


_VIEWS_KEY = "views_sha256"


_VIEW_NAMES = frozenset(re.findall(r"CREATE OR REPLACE VIEW (\w+)", "\n".join(VIEWS)))


def _refresh_views(con: duckdb.DuckDBPyConnection, *, migrated: bool) -> None:
    """(Re)create the views when this juryflow's differ from the store's, or a migration ran.

    Not at every open: on a lake each CREATE OR REPLACE is a commit that conflicts with
    every other process opening the store at the same moment.
    """
    digest = hashlib.sha256("\n;\n".join(VIEWS).encode()).hexdigest()
    row = con.execute(
        "SELECT (SELECT value FROM store_meta WHERE key = ?), (SELECT count(*) FROM "
        "duckdb_views() WHERE NOT internal AND database_name = current_database() "
        "AND list_contains(?, view_name))",
        [_VIEWS_KEY, list(_VIEW_NAMES)],
    ).fetchone()
    if not migrated and row is not None and row[0] == digest and row[1] == len(_VIEW_NAMES):
        return
    for view_sql in VIEWS:
        con.execute(view_sql)
    con.execute("DELETE FROM store_meta WHERE key = ?", [_VIEWS_KEY])
    con.execute("INSERT INTO store_meta VALUES (?, ?)", [_VIEWS_KEY, digest])


class MigrationsMixin(StoreBase):
    def migrate(self) -> int:
        """Bring the file to the latest schema; returns the version it is at.

        Refuses (StoreError) a path it cannot write and a file that is not a juryflow store
        this version can use; a DuckDB file with no tables becomes a store.
        """
        if isinstance(self.path, Path):
            try:
                # DuckDB's write-ahead log and the run journals sit beside the file.
                probe_directory(self.path.parent)
            except OSError as error:
                raise StoreError(
                    f"cannot write the store {self.path}: {reason(error)}; "
                    "pass --db a path in a writable directory"
                ) from None
        # A lake takes the same migrations without key constraints (see storage/lake/attach.py).
        adapt = lake_ddl if self.lake is not None else _unchanged

        def _current(con: duckdb.DuckDBPyConnection) -> int:
            con.execute(
                adapt(
                    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                    "applied_at TIMESTAMPTZ DEFAULT current_timestamp)"
                )
            )
            row = con.execute("SELECT max(version) FROM schema_version").fetchone()
            return int(row[0]) if row and row[0] is not None else 0

        def _body(con: duckdb.DuckDBPyConnection) -> bool:
            """Apply what is pending in one transaction; True when a backfill cut it short."""
            current = _current(con)  # read again: another process may have migrated
            for version, ddl in MIGRATIONS:
                if version <= current:
                    continue
                applied.append(version)
                con.execute(adapt(ddl))
                con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
                if version in BACKFILLS:
                    BACKFILLS[version](con)
                    if current > 0 and version < LATEST_VERSION:
                        # DuckDB cannot commit an ALTER of a table this transaction's
                        # backfill wrote: what follows goes in a transaction of its own
                        # (a new store has nothing to backfill: one transaction, as ever).
                        return True
            _refresh_views(con, migrated=bool(applied))
            return False

        # One transaction for a store already up to date, as every open of a lake is a
        # commit that may conflict with another writer's.
        applied: list[int] = []
        try:
            while self.transact(_body, "bring the store to the latest schema"):
                pass
        except duckdb.Error as error:
            raise StoreSchemaError(
                f"cannot bring {self.path} to juryflow schema version {LATEST_VERSION}: "
                f"{error}; pass --db a juryflow store or a new path"
            ) from None
        return LATEST_VERSION
