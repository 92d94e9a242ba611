"""A DuckLake store: the catalog in PostgreSQL (or a DuckDB file), the data as Parquet files.

``--db ducklake:...`` selects it (:func:`juryflow.storage.connection.resolve_target`).
The DuckLake and PostgreSQL extensions come from the PyPI wheels ``duckdb-extension-ducklake`` and
``duckdb-extension-postgres`` (the ``lake`` extra): they are LOADed from the installed
package's file with DuckDB's autoinstall and autoload off, so nothing is downloaded at run
time and no extension other than these two is ever loaded behind the store's back.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from juryflow.storage import StoreError, StoreMissingError, without_progress_bar
from juryflow.storage.lake.extensions import (
    _literal,
    load_lake_extensions,
)

LAKE_PREFIX = "ducklake:"
POSTGRES_PREFIX = "postgres:"
# The name the attached lake has in every connection (``USE lake``; ``lake.runs``).
LAKE_ALIAS = "lake"

CatalogKind = Literal["postgres", "duckdb"]
# libpq's password=VALUE, quoted or not; messages must never show it.
_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
# ``${NAME}``: a part of ``--db`` read from the environment when the lake is attached.
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SEALED_PASSWORD_ENV = "JURYFLOW_LAKE_PASSWORD"
"""Where :func:`seal` keeps a catalog password given literally in ``--db``."""


@dataclass(frozen=True, slots=True)
class LakeTarget:
    """What ``--db ducklake:...`` names: where the catalog is, and where the data goes.

    ``catalog`` is a libpq connection string (kind ``postgres``) or the path of a DuckDB
    file holding the catalog (kind ``duckdb``, a single-writer lake). ``data_path`` is the
    directory or object-store prefix of the Parquet files; None lets DuckLake use the one
    the catalog recorded when the lake was created.
    """

    kind: CatalogKind
    catalog: str
    data_path: str | None = None

    def __str__(self) -> str:
        """The ``--db`` value, password masked: what messages and hints show."""
        prefix = LAKE_PREFIX + (POSTGRES_PREFIX if self.kind == "postgres" else "")
        return prefix + self.shown

    @property
    def shown(self) -> str:
        """The catalog as messages may show it: a PostgreSQL password is masked."""
        # A ${NAME} reference is no secret, and what a flow needs to find the password.
        return _PASSWORD.sub(
            lambda m: m.group(0) if _PLACEHOLDER.fullmatch(m.group(2)) else f"{m.group(1)}***",
            self.catalog,
        )

    @property
    def attach_path(self) -> str:
        """The string DuckDB's ATTACH takes for this catalog, ``${NAME}`` parts read from
        the environment (a libpq-quoted value); StoreError naming a variable that is unset."""
        if self.kind == "postgres":
            return f"{LAKE_PREFIX}{POSTGRES_PREFIX}{_resolve(self.catalog)}"
        return f"{LAKE_PREFIX}{self.catalog}"


def _libpq_quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _resolve(conninfo: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise StoreError(
                f"--db names ${{{name}}} but the environment has no {name}: export it (the "
                "catalog's password, kept out of the command line and Prefect's records)"
            )
        return _libpq_quoted(found)

    return _PLACEHOLDER.sub(value, conninfo)


def seal(db: str | None) -> str | None:
    """``--db`` with a catalog password given literally moved to this process's environment
    (``$JURYFLOW_LAKE_PASSWORD``, which the flows it starts and their child processes
    inherit) and written ``password=${JURYFLOW_LAKE_PASSWORD}``: the text that then reaches
    Prefect's parameters, logs and artifacts holds no secret. Anything else is returned as is.

    >>> import os
    >>> seal("ducklake:postgres:dbname=x password='p w' host=h")
    'ducklake:postgres:dbname=x password=${JURYFLOW_LAKE_PASSWORD} host=h'
    >>> os.environ[SEALED_PASSWORD_ENV]
    'p w'
    >>> seal("ducklake:postgres:dbname=x password=${PGPW}")  # already a reference
    'ducklake:postgres:dbname=x password=${PGPW}'
    """
    if db is None or not is_lake_target(db):
        return db
    found = _PASSWORD.search(db)
    if found is None or _PLACEHOLDER.fullmatch(found.group(2)):
        return db
    token = found.group(2)
    if token.startswith("'") and token.endswith("'") and len(token) >= 2:
        token = re.sub(r"\\(.)", r"\1", token[1:-1])
    os.environ[SEALED_PASSWORD_ENV] = token
    return f"{db[: found.start(2)]}${{{SEALED_PASSWORD_ENV}}}{db[found.end(2) :]}"


def is_lake_target(text: str) -> bool:
    """Does ``--db`` name a lake (rather than a DuckDB file path)?"""
    return text.startswith(LAKE_PREFIX)


def parse_lake_target(text: str, data_path: str | None = None) -> LakeTarget:
    """``ducklake:postgres:dbname=... host=...`` or ``ducklake:FILE.ducklake``; else
    StoreError saying which forms there are."""
    forms = (
        "use --db ducklake:postgres:'dbname=NAME host=HOST' (a shared lake) or "
        "--db ducklake:FILE.ducklake (a single-writer lake)"
    )
    if not is_lake_target(text):
        raise StoreError(f"{text!r} is not a DuckLake target; {forms}")
    rest = text[len(LAKE_PREFIX) :].strip()
    if data_path is not None and not data_path.strip():
        raise StoreError("--data-path is empty; pass a directory or an s3://... prefix")
    if rest.startswith(POSTGRES_PREFIX):
        conninfo = rest[len(POSTGRES_PREFIX) :].strip()
        if not conninfo:
            raise StoreError(f"{text!r} names no PostgreSQL database; {forms}")
        return LakeTarget("postgres", conninfo, data_path)
    # Other catalog databases (sqlite:, mysql:) would need extensions juryflow does not ship.
    head = rest.split(":", 1)[0]
    if ":" in rest and head.isalpha() and len(head) > 1:
        raise StoreError(f"DuckLake catalog {head!r} is not supported; {forms}")
    if not rest:
        raise StoreError(f"{text!r} names no catalog; {forms}")
    return LakeTarget("duckdb", str(Path(rest).expanduser()), data_path)


def attach_lake(
    con: duckdb.DuckDBPyConnection,
    target: LakeTarget,
    data_path: str | None = None,
    *,
    read_only: bool = False,
    snapshot: int | None = None,
) -> None:
    """ATTACH the lake as ``lake`` and USE it; ``data_path`` overrides the target's.

    The extensions must be loaded (:func:`load_lake_extensions`). A lake created
    without a data path gets DuckLake's default (beside a DuckDB catalog file); a
    PostgreSQL catalog needs one when the lake is created.
    """
    chosen = data_path if data_path is not None else target.data_path
    options: list[str] = []
    if chosen is not None:
        options.append(f"DATA_PATH {_literal(chosen)}")
    if read_only:
        options.append("READ_ONLY")
    if snapshot is not None:
        options.append(f"SNAPSHOT_VERSION {int(snapshot)}")
    suffix = f" ({', '.join(options)})" if options else ""
    attach = f"ATTACH {_literal(target.attach_path)} AS {LAKE_ALIAS}{suffix}"
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            con.execute(attach)
            con.execute(f"USE {LAKE_ALIAS}")
            return
        except duckdb.Error as error:
            text = str(error).strip()
            # Two processes creating the same new catalog race on PostgreSQL's DDL; the
            # loser finds it created when it tries again.
            if _CREATE_RACE in text and attempt + 1 < _CREATE_ATTEMPTS:
                time.sleep(0.1 * (attempt + 1))
                continue
            first = text.splitlines()[0] if text else repr(error)
            where = target.catalog if target.kind == "duckdb" else f"PostgreSQL ({target.shown})"
            if _NEW_WITHOUT_DATA_PATH in text:
                raise StoreMissingError(
                    f"no juryflow store in {where} yet: create it with `juryflow run --db "
                    f"{shlex.quote(str(target))} --data-path DIR` (DIR: where its Parquet "
                    "files go, shared by every machine)"
                ) from None
            raise StoreError(
                f"cannot open the DuckLake catalog in {where}: {first}; check --db and --data-path"
            ) from None


_CREATE_RACE = "Failed to initialize DuckLake"
_NEEDS_HTTPFS = "requires the extension httpfs to be loaded"
_NEW_WITHOUT_DATA_PATH = "Attempting to create a new ducklake instance but data_path is not set"
_CREATE_ATTEMPTS = 5


# What DuckLake refuses in the store's migrations, and what replaces it (see
# storage/lake_design.md): keys are kept by the writers, as judgments' already are.
# The comma before a table key may be followed by the previous column's comment.
_TABLE_KEY = re.compile(r",([ \t]*--[^\n]*)?\s*PRIMARY KEY\s*\([^)]*\)", re.IGNORECASE)
_COLUMN_KEY = re.compile(r"[ \t]+PRIMARY KEY\b", re.IGNORECASE)
# ADD COLUMN ... DEFAULT false: DuckLake takes only a literal it can store as text; a
# boolean keyword is a cast expression to it ("non-literal default value").
_BOOLEAN_DEFAULT = re.compile(
    r"(ADD COLUMN\s+\w+\s+BOOLEAN\s+DEFAULT\s+)(false|true)\b", re.IGNORECASE
)


def lake_ddl(ddl: str) -> str:
    """A migration of :mod:`juryflow.storage.schema` as DuckLake takes it.

    DuckLake has no PRIMARY KEY / UNIQUE constraints ("not supported in DuckLake"), so the
    keys are dropped; ``ADD COLUMN x BOOLEAN DEFAULT false`` becomes ``DEFAULT 'false'``.
    Everything else (JSON, TIMESTAMPTZ, lists, DEFAULT current_timestamp on CREATE TABLE,
    RENAME, UPDATE, views) runs unchanged.
    """
    ddl = _TABLE_KEY.sub(lambda found: found.group(1) or "", ddl)
    ddl = _COLUMN_KEY.sub("", ddl)
    return _BOOLEAN_DEFAULT.sub(r"\1'\2'", ddl)


def open_lake(
    target: LakeTarget,
    *,
    read_only: bool = False,
    snapshot: int | None = None,
    config: dict[str, str | bool | int | float | list[str]] | None = None,
) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection with the lake attached as ``lake`` and in use.

    ``snapshot``: the lake as it was at that DuckLake snapshot (read-only), for
    ``juryflow sql --at-run``. The caller closes the connection.
    """
    try:
        con = without_progress_bar(duckdb.connect(config=dict(config or {})))
    except duckdb.Error as error:
        raise StoreError(f"cannot start DuckDB for the lake: {error}") from None
    from juryflow.storage.lake.object_store import enable_object_store, is_remote

    try:
        load_lake_extensions(con, postgres=target.kind == "postgres")
        remote = is_remote(target.data_path)
        if remote:
            enable_object_store(con)
        read_only = read_only or snapshot is not None
        try:
            attach_lake(con, target, read_only=read_only, snapshot=snapshot)
        except StoreError as error:
            # A lake whose catalog records an s3:// data path: only the attach tells.
            if remote or _NEEDS_HTTPFS not in str(error):
                raise
            enable_object_store(con)
            attach_lake(con, target, read_only=read_only, snapshot=snapshot)
    except BaseException:
        con.close()
        raise
    return con


def lake_data_path(con: duckdb.DuckDBPyConnection) -> str | None:
    """Where the attached lake keeps its Parquet files, as its catalog recorded it."""
    row = con.execute(
        f"SELECT value FROM {LAKE_ALIAS}.options() WHERE option_name = 'data_path'"
    ).fetchone()
    return str(row[0]) if row and row[0] else None


def current_snapshot(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(f"SELECT id FROM {LAKE_ALIAS}.current_snapshot() t(id)").fetchone()
    assert row is not None
    return int(row[0])
