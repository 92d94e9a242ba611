"""`juryflow sql` confined: the store, read-only, and nothing else.

Three layers, because each alone has a gap:

- the connection (:func:`confined_connection`) is the store opened read-only with DuckDB's
  own sandbox switched on and locked: no file or network access beyond the store's own
  files, no extension install or load, no setting that could undo it; and none of those
  own files may be a link to another;
- the statements (:func:`check_statements`) are parsed by DuckDB itself and only reading
  kinds are let through, so that ATTACH/USE/DETACH chains, COPY, EXPORT, SET or temporary
  objects are refused with a message before anything runs;
- every function a statement calls must be on an allow-list (:func:`allowed_functions`):
  DuckDB's built-in functions that its catalogue marks free of side effects, a named few
  table functions that compute rows or describe the catalogue, and on a lake its Parquet
  readers and DuckLake's read-only functions. Whatever else a DuckDB or an extension brings
  is refused without having to be known: functions that run SQL they are given as data
  (``query``, ``json_execute_serialized_sql``, ``postgres_query``), that reach another
  database (``postgres_scan``), read files or write (``checkpoint``). A deny-list of those
  was walked around once (issue 29); an allow-list fails closed.

On a DuckLake store (``--db ducklake:...``) the connection is a fresh in-memory DuckDB with
the lake attached read-only and its data directory the one place files may be opened
(DuckDB's sandbox does not tell reading from writing there: keeping COPY, ATTACH and
checkpoints out of it is the statement check's job alone). Its catalog database is attached
beside it (``__ducklake_metadata_lake``): naming it is refused too. ``snapshot`` reads the
lake as it was at a DuckLake snapshot (``juryflow sql --at-run``). A query runs for at most
``timeout`` seconds (``juryflow sql --timeout``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import duckdb

from juryflow.judges.untrusted.loading import NestingError, load_json
from juryflow.storage.connection import StoreError, StoreMissingError, connect, duckdb_config
from juryflow.storage.lake.attach import LakeTarget, lake_data_path, open_lake
from juryflow.storage.lake.object_store import is_remote

ALLOWED = (
    "SELECT/WITH/FROM queries, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN and read-only PRAGMAs "
    "(table_info, show_tables, database_size, ...)"
)
DEFAULT_TIMEOUT_SECONDS = 300.0

SQL_TREE_MAX_DEPTH = 400
"""Deepest parse tree (DuckDB's ``json_serialize_sql``) a query may have to be checked: a
function call nests it 2 levels, a subquery 3, so about 195 nested calls or 130 nested
subqueries (a sum of 150 terms is 300 levels). The tree is read and walked by recursion;
500 nested calls (1,000 levels) stopped the check with a RecursionError, which failed
closed but printed a traceback. A deeper query is refused in one line; nothing runs."""

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
# The names DuckDB gives a database's own files; a confined connection may read them all.
_OWN_SUFFIXES = ("", ".wal", ".wal.checkpoint", ".wal.recovery")

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
# Where a parse tree names a catalog or schema: table references (BASE_TABLE, SHOW_REF)
# and qualified function calls.
_QUALIFIERS = ("catalog_name", "schema_name", "catalog", "schema", "table_name")
LAKE_FUNCTIONS = "the read-only ones (lake.snapshots(), ducklake_table_changes(), ...)"

# -- the allow-list ---------------------------------------------------------------------------
#
# Scalar and aggregate functions (window functions are aggregates in the catalogue) come
# from DuckDB's own catalogue: those of a plain in-memory DuckDB (its core and the
# extensions built into the wheel: parquet, json, icu) that it marks free of side effects.
# Extensions juryflow loads later (DuckLake, PostgreSQL) add none, whatever their flags.
# random(), nextval(), sleep_ms(), write_log() ... have side effects; a reader needs none.
_PURE_FUNCTIONS = """
    SELECT DISTINCT function_name FROM duckdb_functions()
    WHERE function_type IN ('scalar', 'aggregate') AND NOT has_side_effects
"""
# DuckDB's macros (list_sum, split_part, histogram_values, ...): each is allowed when every
# function its definition calls is, so pg_sleep (sleep_ms) and histogram (query_table) are not.
_MACROS = """
    SELECT function_type, function_name, json_serialize_sql(
        CASE function_type WHEN 'macro' THEN 'SELECT ' || macro_definition
        ELSE macro_definition END)
    FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro')
"""
# Free of side effects, yet they take SQL as data: json_serialize_plan binds the query it is
# given, and binding reads files and queries servers. No reader needs them in a query.
_SQL_AS_DATA = frozenset({"json_serialize_sql", "json_deserialize_sql", "json_serialize_plan"})
# DuckDB's binder turns these calls into its UNNEST expression; the catalogue lists unnest
# as a table function only.
_UNNEST = frozenset({"unnest", "unlist"})
# Table functions carry no side-effect mark in the catalogue, so the ones a reader needs are
# named; each does no I/O, runs no SQL it is given and changes nothing. Only those the
# catalogue lists are allowed.
_TABLE_FUNCTIONS = frozenset(
    {
        # rows computed from their arguments alone
        "range",
        "generate_series",
        "unnest",
        "repeat",
        "repeat_row",
        "json_each",
        "json_tree",
        # this connection's catalogue: what SHOW, DESCRIBE and DuckDB's own views read
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_databases",
        "duckdb_dependencies",
        "duckdb_functions",
        "duckdb_indexes",
        "duckdb_keywords",
        "duckdb_prepared_statements",
        "duckdb_schemas",
        "duckdb_sequences",
        "duckdb_settings",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        # this connection's log, which its duckdb_logs view reads: empty, as logging is off
        # and enable_logging() is not on this list
        "duckdb_logs",
        # what the reading PRAGMAs become: PRAGMA table_info(x) is pragma_table_info(x)
        "pragma_table_info",
        "pragma_show",
        "pragma_database_size",
        "pragma_storage_info",
        "pragma_version",
        "pragma_platform",
    }
)
# On a lake: its Parquet files, which DuckDB's sandbox lets be opened under the data path only.
_LAKE_FILE_READERS = frozenset(
    {
        "read_parquet",
        "parquet_scan",
        "parquet_metadata",
        "parquet_schema",
        "parquet_file_metadata",
        "parquet_kv_metadata",
    }
)
FUNCTIONS = (
    "DuckDB's built-in functions without side effects, the table functions range(), "
    "generate_series(), unnest(), json_each() and the catalogue's (duckdb_tables(), "
    "pragma_table_info(), ...)"
)
LAKE_FILES = "read_parquet() of the lake's own files"

CallKind = Literal["table", "expression"]

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
    """The store cannot be confined (DuckDB did not take a setting, or a link sits among
    its own files): refuse to run anything rather than guess."""


class QueryTimeoutError(RuntimeError):
    """The query ran past ``juryflow sql --timeout`` and was interrupted."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the query ran longer than {seconds:g} s and was stopped; pass --timeout SECONDS "
            "to give it longer, or narrow it (a WHERE on run_id, a LIMIT)"
        )
        self.seconds = seconds


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
            _check_own_files(con, target)
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
        _check_own_files(con, Path(target.catalog) if target.kind == "duckdb" else None)
        yield con
    finally:
        con.close()


def _open_lake_at(target: LakeTarget, snapshot: int | None) -> duckdb.DuckDBPyConnection:
    # Reading needs no data path from the environment: the catalog has the lake's own,
    # and a different one would only be refused by DuckLake.
    reading = dataclasses.replace(target, data_path=None)
    try:
        # The file store's memory limit too: a plain in-memory DuckDB would take 80 % of
        # the machine for one DISTINCT.
        return open_lake(reading, read_only=True, snapshot=snapshot, config=duckdb_config())
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


def _check_own_files(con: duckdb.DuckDBPyConnection, database: Path | None) -> None:
    """Refuse a store among whose own files, which DuckDB lets a confined query read,
    there is a link or a file that is not the store's.

    DuckDB lists each attached database's file and WAL names in allowed_paths, resolved
    through links: a link planted at ``<store>.wal.recovery`` would make its target
    readable. ``database``: the store's DuckDB file (a lake's DuckDB catalog), or None
    when it has none (a PostgreSQL catalog: nothing may exist at the names DuckDB lists).
    """
    own = _own_files(database) if database is not None else frozenset()
    for path in sorted(own):
        if path.is_symlink():
            raise SqlConfinementError(
                f"{path} is a symbolic link, and juryflow sql lets queries read the store's "
                "own files: a link there would expose another file; remove it (a store's "
                "files are never links)"
            )
    row = con.execute("SELECT current_setting('allowed_paths')").fetchone()
    for listed in row[0] if row is not None and row[0] else ():
        path = Path(str(listed))
        if os.path.lexists(path) and path not in own:
            raise SqlConfinementError(
                f"DuckDB would let queries read {path} as one of the store's own files; "
                "juryflow sql will not open the store while it is there: remove the link "
                "beside the store that leads to it"
            )


def _own_files(database: Path) -> frozenset[Path]:
    # DuckDB resolves the store's path (it may itself be a link) before naming its WAL files
    real = database.resolve()
    return frozenset(real.with_name(real.name + suffix) for suffix in _OWN_SUFFIXES)


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "'" + str(value).replace("'", "''") + "'"


# -- the statements ---------------------------------------------------------------------------


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


@dataclasses.dataclass(slots=True)
class _Found:
    """What a parse tree calls and which catalogs it names, in the order it does."""

    calls: list[tuple[CallKind, str]] = dataclasses.field(default_factory=list)
    catalogs: list[str] = dataclasses.field(default_factory=list)
    named: list[str] = dataclasses.field(default_factory=list)
    """Strings naming the catalog database: refused when nothing else is (a refused
    function that takes one is the clearer line)."""


def calls_in(con: duckdb.DuckDBPyConnection, sql: str) -> set[tuple[CallKind, str]] | None:
    """Every function ``sql`` (reading statements) calls, as (``table`` or ``expression``,
    lower-case name), from DuckDB's own parse tree; None if DuckDB cannot serialize it."""
    found = _parse_tree(con, sql)
    return None if found is None else set(found.calls)


def _parse_tree(con: duckdb.DuckDBPyConnection, sql: str) -> _Found | None:
    row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    return _walked(row[0] if row is not None else None)


def _walked(serialized: object) -> _Found | None:
    """What json_serialize_sql's output calls and names; None for its error or nothing.
    SqlRefused for a tree nested past SQL_TREE_MAX_DEPTH."""
    try:
        tree: Any = (
            load_json(serialized, max_depth=SQL_TREE_MAX_DEPTH)
            if isinstance(serialized, str)
            else {}
        )
    except NestingError as error:
        raise SqlRefused(
            f"the query is too deeply nested to be checked (its parse tree is {error}); "
            "write it with fewer nested calls or subqueries, a CTE for each part "
            "(nothing ran)"
        ) from None
    if not isinstance(tree, dict) or tree.get("error") or not tree.get("statements"):
        return None
    found = _Found()
    _walk(tree, found)
    return found


def _walk(node: object, found: _Found) -> None:
    """Collect, depth first, every call and catalog in ``node``; subqueries, CTEs, set
    operations, lambdas and DESCRIBE/SUMMARIZE targets are all in the tree."""
    if isinstance(node, list):
        for child in node:
            _walk(child, found)
        return
    if not isinstance(node, dict):
        return
    for key in _QUALIFIERS:
        value = node.get(key)
        if isinstance(value, str) and value.lower().startswith(_METADATA_PREFIX):
            _add(found.catalogs, value)
    if node.get("type") == "VALUE_CONSTANT":
        # The catalog named in a string: pragma_table_info('__ducklake_metadata_lake.x')
        # answered the catalog tables' columns. `sql` reads the lake, never its catalog.
        constant = node.get("value")
        text = constant.get("value") if isinstance(constant, dict) else None
        if isinstance(text, str) and _METADATA_PREFIX in text.lower():
            _add(found.named, text)
    call = node.get("function")
    if node.get("type") == "TABLE_FUNCTION" and isinstance(call, dict):
        # a table function is a FUNCTION node under its reference; its arguments are
        # expressions like any other
        _note(found, "table", call.get("function_name"))
        _walk({key: value for key, value in call.items() if key != "function_name"}, found)
        _walk({key: value for key, value in node.items() if key != "function"}, found)
        return
    if "function_name" in node:
        _note(found, "expression", node["function_name"])
    for child in node.values():
        _walk(child, found)


def _note(found: _Found, kind: CallKind, name: object) -> None:
    # a name that is not text cannot be checked: it is refused under a name none allows
    call = (kind, name.lower() if isinstance(name, str) else "?")
    if call not in found.calls:
        found.calls.append(call)


def _add(refused: list[str], what: str) -> None:
    if what not in refused:
        refused.append(what)


def allowed_functions(*, lake: bool) -> tuple[frozenset[str], frozenset[str]]:
    """The functions a query may call: (scalar/aggregate/window/macro, table) names, lower
    case. ``lake`` adds the lake's Parquet readers and DuckLake's read-only functions, in
    both their forms (``ducklake_snapshots('lake')`` and ``lake.snapshots()``)."""
    expressions, tables = _core_functions()
    if lake:
        unprefixed = {name.removeprefix("ducklake_") for name in _LAKE_READERS}
        tables = tables | _LAKE_FILE_READERS | _LAKE_READERS | unprefixed
    return expressions, tables


@functools.cache
def _core_functions() -> tuple[frozenset[str], frozenset[str]]:
    """The allow-list from a plain DuckDB's catalogue (see _PURE_FUNCTIONS and _MACROS)."""
    plain = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        pure = {str(row[0]) for row in plain.execute(_PURE_FUNCTIONS).fetchall()}
        expressions = (pure - _SQL_AS_DATA) | _UNNEST
        listed = {
            str(row[0])
            for row in plain.execute(
                "SELECT function_name FROM duckdb_functions() WHERE function_type = 'table'"
            ).fetchall()
        }
        tables = set(_TABLE_FUNCTIONS & listed)
        macros = _macro_calls(plain)
    finally:
        plain.close()
    return _close_over_macros(expressions, tables, macros)


def _macro_calls(
    con: duckdb.DuckDBPyConnection,
) -> dict[tuple[CallKind, str], set[tuple[CallKind, str]] | None]:
    """Each macro, as it is called, with what its definitions call (None: not checkable)."""
    calls: dict[tuple[CallKind, str], set[tuple[CallKind, str]] | None] = {}
    for function_type, name, tree in con.execute(_MACROS).fetchall():
        kind: CallKind = "table" if function_type == "table_macro" else "expression"
        found = _walked(tree)
        key = (kind, str(name).lower())
        known = calls.get(key, set())
        # overloads share a name: it is allowed only if every definition is
        calls[key] = None if found is None or known is None else known | set(found.calls)
    return calls


def _close_over_macros(
    expressions: set[str],
    tables: set[str],
    macros: dict[tuple[CallKind, str], set[tuple[CallKind, str]] | None],
) -> tuple[frozenset[str], frozenset[str]]:
    """Add each macro all of whose calls are allowed, until no more can be (macros call
    macros: array_append is list_append)."""
    allowed = {"expression": expressions, "table": tables}
    pending = dict(macros)
    grew = True
    while grew:
        grew = False
        for (kind, name), calls in list(pending.items()):
            # a macro calling its own name (an overload, or current_query calling the
            # function it wraps) waits for itself: refused, which fails closed
            if calls is not None and all(n in allowed[k] for k, n in calls):
                allowed[kind].add(name)
                del pending[(kind, name)]
                grew = True
    return frozenset(expressions), frozenset(tables)


def _refused_calls(found: _Found, *, lake: bool) -> list[str]:
    expressions, tables = allowed_functions(lake=lake)
    allowed = {"expression": expressions, "table": tables}
    refused = list(found.catalogs)
    for kind, name in found.calls:
        if name not in allowed[kind]:
            _add(refused, f"{name}()")
    if not refused:
        refused.extend(found.named)
    return refused


def _function_refusals(
    con: duckdb.DuckDBPyConnection, statement: duckdb.Statement, *, lake: bool
) -> list[str]:
    """What in a reading statement is not on the allow-list: a function, or (on a lake) its
    catalog database named as a table's catalog or schema."""
    query = statement.query
    if statement.type == duckdb.StatementType.EXPLAIN:
        found = _EXPLAIN.match(_LEADING_COMMENTS.sub("", query))
        query = found["inner"] if found is not None else ""
    tree = _parse_tree(con, query)
    if tree is None:
        # Every reading statement (PRAGMAs come expanded) serializes; one that does not
        # cannot be checked, so it does not run.
        return [_keyword(statement)]
    return _refused_calls(tree, lake=lake)


def check_statements(
    con: duckdb.DuckDBPyConnection, sql: str, *, lake: bool = False
) -> list[duckdb.Statement]:
    """DuckDB's own parse of ``sql``, if every statement in it only reads and calls only
    allowed functions; else SqlRefused.

    Parsing must happen on the confined connection: DuckDB expands IMPORT DATABASE and some
    PRAGMAs while parsing, reading files. ``lake``: the allow-list of a lake, and its
    catalog database is refused by name.
    """
    statements = con.extract_statements(sql)
    if not statements:
        raise SqlRefused(f"no SQL statement given; juryflow sql runs {ALLOWED}")
    refused: list[str] = []
    for statement in statements:
        keyword = _refused_in(con, statement)
        if keyword is not None:
            _add(refused, keyword)
    if refused:
        raise SqlRefused(
            f"{', '.join(refused)} refused: juryflow sql is read-only and confined to the "
            f"store; it runs {ALLOWED} (nothing ran)"
        )
    for statement in statements:
        for what in _function_refusals(con, statement, lake=lake):
            _add(refused, what)
    if refused and lake:
        raise SqlRefused(
            f"{', '.join(refused)} refused: juryflow sql reads a lake through its tables "
            f"and views, not its catalog database or PostgreSQL; it runs {ALLOWED}, calling "
            f"{FUNCTIONS}, {LAKE_FILES}, and of DuckLake's functions only {LAKE_FUNCTIONS} "
            "(nothing ran)"
        )
    if refused:
        raise SqlRefused(
            f"{', '.join(refused)} refused: juryflow sql reads the store through its tables "
            f"and views; it runs {ALLOWED}, calling {FUNCTIONS} (nothing ran)"
        )
    return statements


class _Deadline:
    """Interrupts a connection's query from a timer thread once ``seconds`` have passed;
    the interrupted query then raises QueryTimeoutError."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float) -> None:
        self._con = con
        self._seconds = seconds
        self._lock = threading.Lock()
        self._expired = False
        self._over = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        # under the lock: the connection must not be interrupted once the query is over
        # (it is closed next)
        with self._lock:
            if not self._over:
                self._expired = True
                self._con.interrupt()

    def __enter__(self) -> None:
        self._timer.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self._lock:
            self._over = True
        self._timer.cancel()
        if isinstance(error, duckdb.InterruptException) and self._expired:
            raise QueryTimeoutError(self._seconds) from None


def run_confined(
    target: Path | LakeTarget,
    sql: str,
    *,
    snapshot: int | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of the last statement of ``sql``, run confined; on a lake at
    ``snapshot`` if given (every table and view then reads the past); stopped after
    ``timeout`` seconds.

    Raises SqlRefused, SqlConfinementError, QueryTimeoutError, StoreError (missing or
    locked store; SnapshotExpiredError) or duckdb.Error (the SQL itself is wrong, or
    DuckDB's sandbox refused a file).
    """
    with confined_connection(target, snapshot=snapshot) as con:
        lake = not isinstance(target, Path)
        statements: Sequence[duckdb.Statement] = check_statements(con, sql, lake=lake)
        cursor: duckdb.DuckDBPyConnection | None = None
        with _Deadline(con, timeout):
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
