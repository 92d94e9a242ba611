"""Is this DuckDB file a juryflow store this version can use? Asked once per Store."""

from __future__ import annotations

from pathlib import Path

import duckdb

from juryflow.storage.connection import StoreError
from juryflow.storage.lake.attach import LakeTarget
from juryflow.storage.schema import LATEST_VERSION, tables_at


class StoreSchemaError(StoreError):
    """The file is a DuckDB database, but not a juryflow store this version can use."""


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path | LakeTarget) -> None:
    """Refuse a DuckDB file that is not a juryflow store this version can use.

    A file with no tables at all is fine: it becomes a store.
    """
    try:
        found = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() "
            "WHERE NOT internal AND database_name = current_database() "
            "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
            "WHERE NOT internal AND database_name = current_database()"
        ).fetchall()
        main = {str(name) for schema, name in found if schema == "main"}
        version = 0
        if "schema_version" in main:
            row = con.execute("SELECT max(version) FROM schema_version").fetchone()
            version = int(row[0]) if row and row[0] is not None else 0
    except (duckdb.Error, TypeError, ValueError) as error:
        raise StoreSchemaError(
            f"{path} is a DuckDB file but not a juryflow store ({error}); "
            "pass --db a juryflow store or a new path"
        ) from None
    others = [
        (schema, name) for schema, name in found if (schema, name) != ("main", "schema_version")
    ]
    if version == 0:
        if not others:
            return
        names = ", ".join(sorted(f"{schema}.{name}" for schema, name in others)[:5])
        raise StoreSchemaError(
            f"{path} is a DuckDB file but not a juryflow store (it holds {names}); "
            "pass --db a juryflow store or a new path"
        )
    if version > LATEST_VERSION:
        raise StoreSchemaError(
            f"{path} is a juryflow store of schema version {version}, newer than this "
            f"juryflow knows ({LATEST_VERSION}); upgrade juryflow, or pass --db another store"
        )
    missing = sorted(tables_at(version) - main)
    if missing:
        raise StoreSchemaError(
            f"{path} is a damaged juryflow store: table {', '.join(missing)} is missing; "
            "restore the file from a backup, or pass --db a new path"
        )
