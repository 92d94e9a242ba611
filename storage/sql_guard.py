"""`juryflow sql` confined: the store, read-only, and nothing else.

Two layers, because either alone has a gap:

- the connection (:func:`confined_connection`) is the store opened read-only with DuckDB's
  own sandbox switched on and locked: no file or network access beyond the store's own
  files, no extension install or load, no setting that could undo it;
- the statements (:func:`check_statements`) are parsed by DuckDB itself and only reading
  kinds are let through, so that ATTACH/USE/DETACH chains, COPY, EXPORT, SET or temporary
  objects are refused with a message before anything runs.

On a DuckLake store (``--db ducklake:...``) the connection is a fresh in-memory DuckDB with
the lake attached read-only and its data directory the one place files may be opened
(DuckDB's sandbox does not tell reading from writing there: keeping COPY and ATTACH out of
it is the statement check's job alone). The statements are also walked in DuckDB's own
parse tree (``json_serialize_sql``), because the lake brings ways around the store: its
catalog database is attached beside it (``__ducklake_metadata_lake``), the PostgreSQL
extension's functions query that server directly, and ``query()``/``query_table()`` hide
SQL in strings the tree does not show. All are refused, as are DuckLake's functions other
than its read-only introspection ones. ``snapshot`` reads the lake as it was at a DuckLake
snapshot (``juryflow sql --at-run``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from juryflow.storage.connection import StoreError, StoreMissingError, connect
from juryflow.storage.lake.attach import LakeTarget, lake_data_path, open_lake
from juryflow.storage.lake.object_store import is_remote

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

# What a lake adds. DuckLake's functions that only describe the lake; the others change it
# (expire, merge, set_commit_message, ...). ``lake.snapshots()`` is ducklake_snapshots.
LAKE_READERS = (
    "ducklake_snapshots",
    "ducklake_current_snapshot",
    "ducklake_last_committed_snapshot",
    "ducklake_table_info",
    "ducklake_list_files",
    "ducklake_table_changes",
    "ducklake_table_insertions",
    "ducklake_table_deletions",
    "ducklake_options",
    "ducklake_settings",
)
_LAKE_READERS = frozenset(LAKE_READERS)
_METADATA_PREFIX = "__ducklake_metadata_"
# They run SQL or name tables given as strings, which the parse tree does not show.
_HIDDEN_SQL = frozenset({"query", "query_table"})
# Where a parse tree names a catalog or schema: table references (BASE_TABLE, SHOW_REF)
# and qualified function calls.
_QUALIFIERS = ("catalog_name", "schema_name", "catalog", "schema", "table_name")
LAKE_FUNCTIONS = "the read-only ones (lake.snapshots(), ducklake_table_changes(), ...)"

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


class SnapshotExpiredError(StoreError):
    """The lake no longer has the snapshot asked for: compaction expired it."""

    def __init__(self, snapshot: int) -> None:
        super().__init__(f"the lake has no snapshot {snapshot} any more")
        self.snapshot = snapshot


@contextmanager
def confined_connection(
    target: Path | LakeTarget, *, snapshot: int | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store, read-only, with DuckDB's external access off and locked; a lake's data
    directory is the one place left readable. ``snapshot``: a lake as it was then."""
    if isinstance(target, Path):
        if snapshot is not None:
            raise StoreError(
                "a DuckDB file keeps no snapshots to read; pass --db ducklake:... for that"
            )
        with connect(target, read_only=True) as con:
            _confine(con, [], _EXPECTED)
            yield con
        return
    con = _open_lake_at(target, snapshot)
    try:
        directory = lake_data_path(con)
        if directory is None:
            raise SqlConfinementError(
                f"the lake {target} records no data path; juryflow sql cannot confine reads "
                "to it (is it a lake juryflow created?)"
            )
        # a bare prefix would also let /data-other be read
        directory = directory if directory.endswith("/") else directory + "/"
        # DuckDB shows a directory without quotes, an s3:// prefix (httpfs) with them
        shown = f"['{directory}']" if is_remote(directory) else f"[{directory}]"
        _confine(con, [directory], {**_EXPECTED, "allowed_directories": shown})
        yield con
    finally:
        con.close()


def _open_lake_at(target: LakeTarget, snapshot: int | None) -> duckdb.DuckDBPyConnection:
    # Reading needs no data path from the environment: the catalog has the lake's own,
    # and a different one would only be refused by DuckLake.
    reading = dataclasses.replace(target, data_path=None)
    try:
        return open_lake(reading, read_only=True, snapshot=snapshot)
    except StoreError as error:
        if snapshot is not None and "No snapshot found at version" in str(error):
            raise SnapshotExpiredError(snapshot) from None
        if any(mark in str(error) for mark in _NO_LAKE):
            raise StoreMissingError(
                f"no DuckLake store at {target} yet: juryflow sql reads an existing lake "
                "(`juryflow run --db ducklake:... --data-path DIR` creates one)"
            ) from None
        raise


# DuckDB's words for a read-only ATTACH of a lake nobody has created (PostgreSQL and DuckDB
# catalogs): a reader must not create one.
_NO_LAKE = (
    "creating a new DuckLake is explicitly disabled",
    "in read-only mode: database does not exist",
)


def _confine(
    con: duckdb.DuckDBPyConnection, directories: list[str], expected: dict[str, str]
) -> None:
    if directories:
        # before external access goes off: after that the list cannot change
        listed = ", ".join(_literal(d) for d in directories)
        con.execute(f"SET allowed_directories = [{listed}]")
    for name, value in _SETTINGS:
        con.execute(f"SET {name} = {_literal(value)}")
    found = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ?", [list(expected)]
        ).fetchall()
    )
    wrong = {name for name, value in expected.items() if found.get(name) != value}
    if wrong:
        raise SqlConfinementError(
            f"DuckDB {duckdb.__version__} did not apply {', '.join(sorted(wrong))}; "
            "juryflow sql will not run unconfined (report this with your DuckDB version)"
        )


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


def _lake_refusals(
    con: duckdb.DuckDBPyConnection, statement: duckdb.Statement, ducklake: frozenset[str]
) -> list[str]:
    """What in a reading statement reaches past the lake: its catalog database, the
    PostgreSQL server behind it, or a DuckLake function (of ``ducklake``) that changes it."""
    query = statement.query
    if statement.type == duckdb.StatementType.EXPLAIN:
        found = _EXPLAIN.match(_LEADING_COMMENTS.sub("", query))
        query = found["inner"] if found is not None else ""
    row = con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()
    tree: Any = json.loads(row[0]) if row is not None else {}
    if not isinstance(tree, dict) or tree.get("error") or not tree.get("statements"):
        # Every reading statement (PRAGMAs come expanded) serializes; one that does not
        # cannot be checked, so it does not run.
        return [_keyword(statement)]
    refused: list[str] = []
    _walk(tree, ducklake, refused)
    return refused


def _walk(node: object, ducklake: frozenset[str], refused: list[str]) -> None:
    """Collect, depth first, every function or catalog in ``node`` a lake does not allow;
    subqueries, CTEs, set operations and DESCRIBE/SUMMARIZE targets are all in the tree."""
    if isinstance(node, list):
        for child in node:
            _walk(child, ducklake, refused)
        return
    if not isinstance(node, dict):
        return
    for key in _QUALIFIERS:
        value = node.get(key)
        if isinstance(value, str) and value.lower().startswith(_METADATA_PREFIX):
            _add(refused, value)
    # any node naming a function: table, scalar, aggregate and window calls alike
    name = node.get("function_name")
    if isinstance(name, str) and _function_refused(name.lower(), ducklake):
        _add(refused, f"{name}()")
    for child in node.values():
        _walk(child, ducklake, refused)


def _function_refused(name: str, ducklake: frozenset[str]) -> bool:
    if name.startswith("postgres_") or name in _HIDDEN_SQL:
        return True
    # DuckLake also registers its functions without the prefix, in the lake's schema:
    # set_commit_message(), main.set_commit_message() and lake.snapshots() all resolve.
    full = name if name.startswith("ducklake_") else f"ducklake_{name}"
    return (full in ducklake or name.startswith("ducklake_")) and full not in _LAKE_READERS


def _ducklake_functions(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    rows = con.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() "
        "WHERE starts_with(function_name, 'ducklake_')"
    ).fetchall()
    return frozenset(str(row[0]) for row in rows)


def _add(refused: list[str], what: str) -> None:
    if what not in refused:
        refused.append(what)


def check_statements(
    con: duckdb.DuckDBPyConnection, sql: str, *, lake: bool = False
) -> list[duckdb.Statement]:
    """DuckDB's own parse of ``sql``, if every statement in it only reads; else SqlRefused.

    Parsing must happen on the confined connection: DuckDB expands IMPORT DATABASE and some
    PRAGMAs while parsing, reading files. ``lake``: also refuse what reaches past a lake
    (its catalog database, PostgreSQL, DuckLake functions that change it).
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
    if lake:
        ducklake = _ducklake_functions(con)
        for statement in statements:
            for what in _lake_refusals(con, statement, ducklake):
                _add(refused, what)
    if refused:
        raise SqlRefused(
            f"{', '.join(refused)} refused: juryflow sql reads a lake through its tables "
            f"and views, not its catalog database or PostgreSQL; it runs {ALLOWED}, and of "
            f"DuckLake's functions only {LAKE_FUNCTIONS} (nothing ran)"
        )
    return statements


def run_confined(
    target: Path | LakeTarget, sql: str, *, snapshot: int | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of the last statement of ``sql``, run confined; on a lake at
    ``snapshot`` if given (every table and view then reads the past).

    Raises SqlRefused, SqlConfinementError, StoreError (missing or locked store;
    SnapshotExpiredError) or duckdb.Error (the SQL itself is wrong, or DuckDB's sandbox
    refused a file).
    """
    with confined_connection(target, snapshot=snapshot) as con:
        lake = not isinstance(target, Path)
        statements: Sequence[duckdb.Statement] = check_statements(con, sql, lake=lake)
        cursor: duckdb.DuckDBPyConnection | None = None
        for statement in statements:
            cursor = con.execute(statement)
        assert cursor is not None  # check_statements refuses an empty list
        columns = [d[0] for d in cursor.description or ()]
        return columns, cursor.fetchall()


class AtRunError(StoreError):
    """``--at-run`` names no snapshot that can be read; the message says why."""


def run_snapshot(target: Path | LakeTarget, run: str) -> tuple[str, int]:
    """The run ``run`` names (id or unique prefix) and the lake snapshot it finished at.

    Looked up on a read-only attachment, as the query then runs: a read-write one (what
    :class:`Store` opens) would create a lake where ``--db`` names none. Raises AtRunError
    (a DuckDB file; a run without a recorded snapshot; not a juryflow lake), RunIdError or
    StoreError.
    """
    if isinstance(target, Path):
        raise AtRunError(
            "--at-run reads a DuckLake snapshot; a DuckDB file keeps none: pass --db ducklake:..."
        )
    con = _open_lake_at(target, None)
    try:
        run_id, status, snapshot = _find_run(con, target, run)
    except duckdb.CatalogException:
        raise AtRunError(
            f"{target} holds no juryflow runs; pass --db the lake `juryflow run` wrote"
        ) from None
    finally:
        con.close()
    if snapshot is not None:
        return run_id, int(snapshot)
    if status != "completed":
        raise AtRunError(
            f"run {run_id} is {status}: a run records its snapshot when it completes; "
            "query the lake as it is now (without --at-run)"
        )
    raise AtRunError(
        f"run {run_id} completed before runs recorded their snapshot; pick one from "
        "`juryflow sql 'FROM lake.snapshots()'` and query it with AT (VERSION => n)"
    )


def _find_run(
    con: duckdb.DuckDBPyConnection, target: LakeTarget, text: str
) -> tuple[str, str, int | None]:
    """The run ``text`` names (as ``juryflow runs`` resolves it), its status and the
    snapshot it finished at."""
    from juryflow.storage.reads.run_queries import resolve_run_id_in

    run_id = resolve_run_id_in(con, text, str(target))
    row = con.execute(
        "SELECT status, finished_snapshot FROM runs WHERE run_id = ?", [run_id]
    ).fetchone()
    assert row is not None  # just resolved
    return run_id, str(row[0]), row[1]
