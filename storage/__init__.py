"""The DuckDB store: connection, schema, migrations and every SQL statement.

This module holds what every part of the layer shares and what the lake's modules need
before :mod:`~juryflow.storage.connection` (which opens lakes) can be imported: the errors
and the one per-connection setting.
"""

from __future__ import annotations

import duckdb


class StoreError(RuntimeError):
    """A store problem, said in terms of what to do about it."""


class StoreMissingError(StoreError):
    pass


def without_progress_bar(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Turn off DuckDB's progress bar on a new connection, and return it.

    DuckDB draws the bar on stdout once a query runs past two seconds, i.e. only on a
    loaded machine, into output that `juryflow sql --format json` or a test parses. It is a
    per-connection setting (DuckDB refuses it in ``duckdb_config()``), so every place that
    opens a connection calls this before the first query.
    """
    con.execute("SET enable_progress_bar = false")
    return con
