"""`juryflow sql` confined: the store, read-only, and nothing else.

Two layers, because either alone has a gap:

- the connection (:func:`confined_connection`) is the store opened read-only with DuckDB's
  own sandbox switched on and locked: no file or network access beyond the store's own
  files, no extension install or load, no setting that could undo it;
- the statements (:func:`check_statements`) are parsed by DuckDB itself and only reading
  kinds are let through, so that ATTACH/USE/DETACH chains, COPY, EXPORT, SET or temporary
  objects are refused with a message before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from juryflow.storage.connection import connect

ALLOWED = (
    "SELECT/WITH/FROM queries, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN and read-only PRAGMAs "
    "(table_info, show_tables, database_size, ...)"
)

# Order matters. temp_directory goes first: once external access is off DuckDB lists the
# temp directory in allowed_directories, and spilling is not worth a writable directory.
# DuckDB then adds only the store's own files (database, WAL) to allowed_paths; neither
# list can be changed while external access is off, and lock_configuration freezes the
# rest (SET, RESET and PRAGMA x=... all fail).
_SETTINGS: tuple[tuple[str, object], ...] = (
    ("temp_directory", ""),
    ("autoinstall_known_extensions", False),
    ("autoload_known_extensions", False),
    ("allow_community_extensions", False),
    ("python_enable_replacements", False),
    ("enable_external_access", False),
    ("lock_configuration", True),
)
_EXPECTED = {
    "enable_external_access": "false",
    "lock_configuration": "true",
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
    "allowed_directories": "[]",
}

_SAFE_TYPES = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
# A keyword that says more than the statement type: USE, RESET and PRAGMA x=1 are all SET;
# INSTALL is LOAD; CHECKPOINT is CALL.
_GENERIC_WORDS = frozenset({"WITH", "FROM", "SELECT", "VALUES", "TABLE"})
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_EXPLAIN = re.compile(
    r"\AEXPLAIN\b(?:\s+ANALY[SZ]E\b)?\s*(?:\([^)]*\))?(?P<inner>.*)\Z", re.DOTALL | re.IGNORECASE
)


class SqlRefused(ValueError):
    """A statement `juryflow sql` does not run; the message says what it does run."""


class SqlConfinementError(RuntimeError):
    """DuckDB did not take a confinement setting: refuse to run anything rather than guess."""


@contextmanager
def confined_connection(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store at ``path``, read-only, with DuckDB's external access off and locked."""
    with connect(path, read_only=True) as con:
        for name, value in _SETTINGS:
            con.execute(f"SET {name} = {_literal(value)}")
        found = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ?", [list(_EXPECTED)]
            ).fetchall()
        )
        wrong = {name for name, value in _EXPECTED.items() if found.get(name) != value}
        if wrong:
            raise SqlConfinementError(
                f"DuckDB {duckdb.__version__} did not apply {', '.join(sorted(wrong))}; "
                "juryflow sql will not run unconfined (report this with your DuckDB version)"
            )
        yield con


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "'" + str(value).replace("'", "''") + "'"


def _keyword(statement: duckdb.Statement) -> str:
    text = _LEADING_COMMENTS.sub("", statement.query)
    words = re.findall(r"[A-Za-z_]+", text[:40])
    if not words or words[0].upper() in _GENERIC_WORDS:
        return statement.type.name.replace("_", " ")
    first = words[0].upper()
    if first == "FORCE" and len(words) > 1:
        return f"FORCE {words[1].upper()}"
    return first


def _refused_in(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> str | None:
    """The keyword of what makes ``statement`` unsafe, or None when it only reads."""
    if statement.type not in _SAFE_TYPES:
        return _keyword(statement)
    if statement.type == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs the statement it explains, so that one must be safe too
        found = _EXPLAIN.match(_LEADING_COMMENTS.sub("", statement.query))
        if found is None:
            return "EXPLAIN"
        inner = con.extract_statements(found["inner"])
        if len(inner) != 1:
            return "EXPLAIN"
        refused = _refused_in(con, inner[0])
        return None if refused is None else f"EXPLAIN {refused}"
    return None


def check_statements(con: duckdb.DuckDBPyConnection, sql: str) -> list[duckdb.Statement]:
    """DuckDB's own parse of ``sql``, if every statement in it only reads; else SqlRefused.

    Parsing must happen on the confined connection: DuckDB expands IMPORT DATABASE and some
    PRAGMAs while parsing, reading files.
    """
    statements = con.extract_statements(sql)
    if not statements:
        raise SqlRefused(f"no SQL statement given; juryflow sql runs {ALLOWED}")
    refused: list[str] = []
    for statement in statements:
        keyword = _refused_in(con, statement)
        if keyword is not None and keyword not in refused:
            refused.append(keyword)
    if refused:
        raise SqlRefused(
            f"{', '.join(refused)} refused: juryflow sql is read-only and confined to the "
            f"store; it runs {ALLOWED} (nothing ran)"
        )
    return statements


def run_confined(path: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of the last statement of ``sql``, run confined.

    Raises SqlRefused, SqlConfinementError, StoreError (missing or locked store) or
    duckdb.Error (the SQL itself is wrong, or DuckDB's sandbox refused a file).
    """
    with confined_connection(path) as con:
        statements: Sequence[duckdb.Statement] = check_statements(con, sql)
        cursor: duckdb.DuckDBPyConnection | None = None
        for statement in statements:
            cursor = con.execute(statement)
        assert cursor is not None  # check_statements refuses an empty list
        columns = [d[0] for d in cursor.description or ()]
        return columns, cursor.fetchall()
