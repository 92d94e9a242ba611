"""Every statement juryflow runs against its store. Bound parameters only; bulk writes go
through Arrow tables so that a chunk of judgments is one INSERT, not one per row."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from juryflow.maths import span_overlaps as so
from juryflow.maths.records import Consensus, GoldLabels, Item, Judgment, Span, Usage
from juryflow.storage.connection import (
    StoreError,
    chunk_write_memory_limit,
    connect,
    resolve_target,
    retry_conflicts,
)
from juryflow.storage.datasets import RowError
from juryflow.storage.lake.attach import LakeTarget, lake_ddl
from juryflow.storage.paths import probe_directory, reason
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS, tables_at
from juryflow.storage.views import VIEWS


def new_run_id() -> str:
    """Sortable by start time and readable: ``20261122-161530-3fa9c2``."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    kind: str
    suite: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    dataset: str | None
    panel_name: str
    panel: dict[str, Any]
    prompts: list[dict[str, Any]]
    quorum: int
    n_judges: int
    parent_run_id: str | None = None
    parameters: dict[str, Any] | None = None
    flow_run_id: str | None = None
    error: str | None = None
    consensus: dict[str, Any] | None = None
    """The consensus rule (``ConsensusRule.to_dict()``) the run's consensus was made with."""
    dataset_fingerprint: str | None = None
    """Size and SHA-256 of the dataset file the run read; None for runs started before."""


_RUN_FIELDS = (
    "run_id", "kind", "suite", "status", "started_at", "finished_at", "dataset", "panel_name",
    "panel", "prompts", "quorum", "n_judges", "parent_run_id", "parameters", "flow_run_id",
    "error", "consensus", "dataset_fingerprint",
)  # fmt: skip
_RUN_COLUMNS = ", ".join(_RUN_FIELDS)
_RUN_JSON = frozenset({"panel", "prompts", "parameters", "consensus"})


class StoreSchemaError(StoreError):
    """The file is a DuckDB database, but not a juryflow store this version can use."""


@dataclass(frozen=True, slots=True)
class CalibrationRecord:
    name: str
    created_at: datetime
    run_id: str
    rule: dict[str, Any]
    folds: int
    group_column: str | None
    seed: int
    report: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReliabilityRow:
    """One judge's estimated reliability in a run (``judge_reliability``)."""

    judge_id: str
    level: str
    method: str
    sensitivity: float | None
    specificity: float | None
    prevalence: float | None
    n_units: int
    effective_panel_size: float | None = None
    note: str | None = None


def _reliability_values(r: ReliabilityRow) -> tuple[Any, ...]:
    return (
        r.judge_id, r.level, r.method, r.sensitivity, r.specificity, r.prevalence, r.n_units,
        r.effective_panel_size, r.note,
    )  # fmt: skip


def _run_from_row(names: Sequence[str], row: Sequence[Any]) -> RunRecord:
    """A run row by column name: a store not yet migrated lacks the newest columns."""
    values = {
        name: json.loads(value) if name in _RUN_JSON and isinstance(value, str) else value
        for name, value in zip(names, row, strict=True)
        if name in _RUN_FIELDS
    }
    return RunRecord(**values)


T = TypeVar("T")


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


def _completed_message(run_id: str) -> str:
    return f"run {run_id} completed"


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


class _PoolTooSmall(Exception):
    """A chunk write ran out of the small buffer pool of chunk writes, inside its
    transaction (rolled back)."""


class Store:
    """The juryflow store: a DuckDB file, or a DuckLake (``--db ducklake:...``).

    Each method opens, uses and closes its own connection to a file; a lake's connection
    is shared by the process. Every write is one transaction (:meth:`transact`), which a
    lake runs again when it loses a commit conflict to another writer.
    """

    def __init__(
        self, path: str | Path | LakeTarget | None = None, data_path: str | None = None
    ) -> None:
        self.path: Path | LakeTarget = resolve_target(path, data_path)
        self._held: duckdb.DuckDBPyConnection | None = None
        self._checked = False

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
        with connect(self.path, read_only=read_only) as con:
            if not self._checked:
                _check_schema(con, self.path)
                self._checked = True
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
    def _connection(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._held is not None:
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

    # -- schema -------------------------------------------------------------------------

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

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                adapt(
                    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                    "applied_at TIMESTAMPTZ DEFAULT current_timestamp)"
                )
            )
            row = con.execute("SELECT max(version) FROM schema_version").fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            for version, ddl in MIGRATIONS:
                if version > current:
                    con.execute(adapt(ddl))
                    if version in BACKFILLS:
                        BACKFILLS[version](con)
                    con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
            _refresh_views(con, migrated=current < LATEST_VERSION)

        try:
            self.transact(_body, "bring the store to the latest schema")
        except duckdb.Error as error:
            raise StoreSchemaError(
                f"cannot bring {self.path} to juryflow schema version {LATEST_VERSION}: "
                f"{error}; pass --db a juryflow store or a new path"
            ) from None
        return LATEST_VERSION

    # -- runs ---------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> None:
        self.transact(lambda con: self.insert_run_in(con, run), f"create run {run.run_id}")

    @staticmethod
    def insert_run_in(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
        """The run's row, inside the caller's transaction."""
        con.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * len(_RUN_FIELDS))})",
            [
                run.run_id,
                run.kind,
                run.suite,
                run.status,
                run.started_at,
                run.finished_at,
                run.dataset,
                run.panel_name,
                json.dumps(run.panel),
                json.dumps(run.prompts),
                run.quorum,
                run.n_judges,
                run.parent_run_id,
                json.dumps(run.parameters) if run.parameters is not None else None,
                run.flow_run_id,
                run.error,
                json.dumps(run.consensus) if run.consensus is not None else None,
                run.dataset_fingerprint,
            ],
        )

    def mark_running(self, run_id: str, flow_run_id: str | None = None) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, "
                "flow_run_id = coalesce(?, flow_run_id) WHERE run_id = ?",
                [flow_run_id, run_id],
            )

        self.transact(_body, f"mark run {run_id} running")

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            if status == "completed":
                self.complete_run_in(con, run_id)
                return
            con.execute(
                "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
                [status, datetime.now(UTC), error, run_id],
            )

        self.transact(_body, f"record the end of run {run_id}")
        if status == "completed":
            self.record_finished_snapshot(run_id)

    def complete_run_in(self, con: duckdb.DuckDBPyConnection, run_id: str) -> None:
        """Mark the run completed, inside the caller's transaction; on a lake the commit is
        stamped so that :meth:`record_finished_snapshot` finds its snapshot."""
        con.execute(
            "UPDATE runs SET status = 'completed', finished_at = ?, error = NULL WHERE run_id = ?",
            [datetime.now(UTC), run_id],
        )
        if self.lake is not None:
            con.execute(
                "CALL lake.set_commit_message('juryflow', ?, extra_info => ?)",
                [_completed_message(run_id), json.dumps({"run_id": run_id})],
            )

    def record_finished_snapshot(self, run_id: str) -> None:
        """On a lake: the snapshot the run completed at, into ``runs.finished_snapshot``
        (``juryflow sql --at-run`` reads the store as it was there). Found by the commit's
        message, not as the current snapshot: another writer may have committed since."""
        if self.lake is None:
            return

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            row = con.execute(
                "SELECT max(snapshot_id) FROM ducklake_snapshots('lake') WHERE commit_message = ?",
                [_completed_message(run_id)],
            ).fetchone()
            if row is not None and row[0] is not None:
                con.execute(
                    "UPDATE runs SET finished_snapshot = ? WHERE run_id = ?", [row[0], run_id]
                )

        self.transact(_body, f"record the snapshot of run {run_id}")

    def get_run(self, run_id: str) -> RunRecord | None:
        with self.read() as con:
            return self.get_run_in(con, run_id)

    @staticmethod
    def get_run_in(con: duckdb.DuckDBPyConnection, run_id: str) -> RunRecord | None:
        cursor = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
        names = [d[0] for d in cursor.description or ()]
        found = cursor.fetchone()
        return _run_from_row(names, found) if found else None

    def latest_run_id(self, suite: str | None = None, status: str | None = None) -> str | None:
        with self.read() as con:
            row = con.execute(
                "SELECT run_id FROM runs WHERE (? IS NULL OR suite = ?) "
                "AND (? IS NULL OR status = ?) ORDER BY started_at DESC, run_id DESC LIMIT 1",
                [suite, suite, status, status],
            ).fetchone()
        return str(row[0]) if row else None

    # -- items --------------------------------------------------------------------------

    def insert_items(self, run_id: str, items: Sequence[Item]) -> None:
        if items:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                _insert_items(con, run_id, items)
                _record_span_sets(con, run_id, items=items)

            self.transact(_body)

    def write_chunk(
        self,
        run_id: str,
        items: Sequence[Item],
        judgments: Sequence[Judgment],
        consensus: Sequence[Consensus],
    ) -> None:
        """A finished chunk in one transaction: its items, judgments and consensus."""
        # A held session keeps its own buffer pool; a chunk's own connection gets the small
        # one of chunk writes (see chunk_write_memory_limit). A lake's connection is the
        # process's for good, so it keeps its own too.
        own_connection = self._held is None and self.lake is None
        limit = chunk_write_memory_limit() if own_connection else None
        try:
            self._write_chunk(run_id, items, judgments, consensus, limit)
        except _PoolTooSmall:
            # Long texts can need more than the small pool; the transaction was rolled
            # back, so the chunk is written again, with the store's own limit.
            self._write_chunk(run_id, items, judgments, consensus, None)

    def _write_chunk(
        self,
        run_id: str,
        items: Sequence[Item],
        judgments: Sequence[Judgment],
        consensus: Sequence[Consensus],
        memory_limit: str | None,
    ) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            if memory_limit is not None:
                # The setting outlives the transaction until this connection closes, so
                # it bounds the checkpoint at the close too.
                con.execute(f"SET memory_limit = '{memory_limit}'")
            try:
                if items:
                    _insert_items(con, run_id, items)
                judge_sets = _insert_judgments(con, run_id, judgments) if judgments else None
                consensus_sets = _insert_consensus(con, run_id, consensus) if consensus else None
                _record_span_sets(con, run_id, items, judge_sets, consensus_sets)
            except duckdb.OutOfMemoryException as error:
                if memory_limit is None:
                    raise
                raise _PoolTooSmall from error  # before COMMIT: nothing of it is stored

        self.transact(_body)

    def insert_row_errors(self, run_id: str, errors: Sequence[RowError]) -> None:
        if not errors:
            return

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM row_errors WHERE run_id = ?", [run_id])
            con.executemany(
                "INSERT INTO row_errors VALUES (?, ?, ?, ?)",
                [[run_id, e.row_number, e.item_id, e.error] for e in errors],
            )

        self.transact(_body)

    def row_errors(self, run_id: str, limit: int = 20) -> list[RowError]:
        with self.read() as con:
            rows = con.execute(
                "SELECT row_number, item_id, error FROM row_errors WHERE run_id = ? "
                "ORDER BY row_number LIMIT ?",
                [run_id, limit],
            ).fetchall()
        return [RowError(int(n), item_id, error) for n, item_id, error in rows]

    def load_items(self, run_id: str) -> list[Item]:
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id, variables, gold_hallucinated, gold_spans, row_number, metadata "
                "FROM items WHERE run_id = ? ORDER BY row_number",
                [run_id],
            ).fetchall()
        items = []
        for item_id, variables, gold_h, gold_spans, row_number, metadata in rows:
            gold = None
            if gold_h is not None or gold_spans is not None:
                spans = tuple((int(a), int(b)) for a, b in json.loads(gold_spans or "[]"))
                gold = GoldLabels(hallucinated=gold_h, spans=spans)
            items.append(
                Item(item_id, json.loads(variables), gold, row_number, json.loads(metadata or "{}"))
            )
        return items

    # -- judgments ----------------------------------------------------------------------

    def insert_judgments(self, run_id: str, judgments: Sequence[Judgment]) -> None:
        """One transaction for the judgments and their spans, so a crash keeps both or neither."""
        if judgments:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                sets = _insert_judgments(con, run_id, judgments)
                _record_span_sets(con, run_id, judge_sets=sets)

            self.transact(_body)

    def judged_pairs(self, run_id: str) -> set[tuple[str, str]]:
        """(item, judge) pairs that already have their row: what a resumed run skips."""
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id, judge_id FROM judgments WHERE run_id = ?", [run_id]
            ).fetchall()
        return {(str(a), str(b)) for a, b in rows}

    def item_ids(self, run_id: str) -> set[str]:
        with self.read() as con:
            rows = con.execute("SELECT item_id FROM items WHERE run_id = ?", [run_id]).fetchall()
        return {str(r[0]) for r in rows}

    def consensus_item_ids(self, run_id: str) -> set[str]:
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id FROM consensus WHERE run_id = ?", [run_id]
            ).fetchall()
        return {str(r[0]) for r in rows}

    def cached_judgments(self, cache_keys: Sequence[str]) -> dict[str, Judgment]:
        """Scored judgments already stored under these cache keys (newest wins)."""
        if not cache_keys:
            return {}
        with self.read() as con:
            rows = con.execute(
                "SELECT * EXCLUDE (rank) FROM ("
                "  SELECT j.*, row_number() OVER ("
                "    PARTITION BY cache_key ORDER BY created_at DESC) AS rank"
                "  FROM judgments j WHERE cache_key IN (SELECT unnest(?)) AND score IS NOT NULL"
                ") WHERE rank = 1",
                [list(cache_keys)],
            )
            judgments = _judgments_from_cursor(rows)
            spans = _spans_for(con, [(j.run_id, j.item_id, j.judge_id) for j in judgments])
        return {
            row.cache_key: row.to_judgment(spans.get((row.run_id, row.item_id, row.judge_id), ()))
            for row in judgments
            if row.cache_key
        }

    def load_judgments(self, run_id: str, *, without_consensus: bool = False) -> list[Judgment]:
        """A run's judgments with their spans; ``without_consensus``: only those of items
        that have no consensus row yet (what a resumed run still needs: at a million items
        the whole run's judgments would take gigabytes)."""
        where = "run_id = $run"
        if without_consensus:
            where += " AND item_id NOT IN (SELECT item_id FROM consensus WHERE run_id = $run)"
        with self.read() as con:
            rows = _judgments_from_cursor(
                con.execute(
                    f"SELECT * FROM judgments WHERE {where} ORDER BY item_id", {"run": run_id}
                )
            )
            spans = _spans_for(con, [(r.run_id, r.item_id, r.judge_id) for r in rows])
        return [r.to_judgment(spans.get((r.run_id, r.item_id, r.judge_id), ())) for r in rows]

    # -- consensus ----------------------------------------------------------------------

    def insert_consensus(self, run_id: str, results: Sequence[Consensus]) -> None:
        if results:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                sets = _insert_consensus(con, run_id, results)
                _record_span_sets(con, run_id, consensus_sets=sets)

            self.transact(_body)

    def replace_consensus(
        self, run_id: str, results: Sequence[Consensus], rule: dict[str, Any]
    ) -> None:
        """A run's whole consensus made again (a rule fitted over the run), in one transaction."""

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM consensus_spans WHERE run_id = ?", [run_id])
            con.execute("DELETE FROM consensus WHERE run_id = ?", [run_id])
            # the consensus's sets and everything they overlap go with it
            con.execute("DELETE FROM span_sets WHERE run_id = ? AND kind = 'consensus'", [run_id])
            con.execute(
                "DELETE FROM span_overlaps WHERE run_id = ? "
                "AND kind IN ('judge-consensus', 'consensus-gold')",
                [run_id],
            )
            if results:
                sets = _insert_consensus(con, run_id, results)
                _record_span_sets(con, run_id, consensus_sets=sets)
            con.execute(
                "UPDATE runs SET consensus = ? WHERE run_id = ?", [json.dumps(rule), run_id]
            )

        self.transact(_body)

    # -- calibrations and reliability -------------------------------------------------------

    def save_calibration(self, record: CalibrationRecord) -> None:
        """Store a named calibration; a name used before is replaced (the newest fit wins)."""

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM calibrations WHERE name = ?", [record.name])
            con.execute(
                "INSERT INTO calibrations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    record.name,
                    record.created_at,
                    record.run_id,
                    json.dumps(record.rule),
                    record.folds,
                    record.group_column,
                    record.seed,
                    json.dumps(record.report),
                ],
            )

        self.transact(_body)

    def get_calibration(self, name: str) -> CalibrationRecord | None:
        with self.read() as con:
            row = con.execute(
                "SELECT name, created_at, run_id, rule, folds, group_column, seed, report "
                "FROM calibrations WHERE name = ?",
                [name],
            ).fetchone()
        if row is None:
            return None
        values = list(row)
        values[3], values[7] = json.loads(values[3]), json.loads(values[7])
        return CalibrationRecord(*values)

    def calibration_names(self) -> list[str]:
        with self.read() as con:
            rows = con.execute("SELECT name FROM calibrations ORDER BY name").fetchall()
        return [str(r[0]) for r in rows]

    def save_reliability(self, run_id: str, rows: Sequence[ReliabilityRow]) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM judge_reliability WHERE run_id = ?", [run_id])
            if rows:
                con.executemany(
                    "INSERT INTO judge_reliability VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(run_id, *_reliability_values(r)) for r in rows],
                )

        self.transact(_body)

    def reliability(self, run_id: str) -> list[ReliabilityRow]:
        with self.read() as con:
            rows = con.execute(
                "SELECT judge_id, level, method, sensitivity, specificity, prevalence, n_units, "
                "effective_panel_size, note FROM judge_reliability WHERE run_id = ? "
                "ORDER BY level DESC, method, judge_id",
                [run_id],
            ).fetchall()
        return [ReliabilityRow(*r) for r in rows]

    # -- reading back -------------------------------------------------------------------

    def copy_run_rows(self, source_run_id: str, run_id: str) -> None:
        """Copy items, judgments and their spans of one run under another id (one
        transaction), for a re-aggregation.

        The copied judgments are marked ``cached``: the new run reused them and paid for
        none, so no sum of its cost counts them as spent again. ``run_id`` is a run just
        created, with no rows yet: nothing here is written twice.
        """

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            for table, replaced, where in (
                ("items", "", ""),
                ("judgments", ", TRUE AS cached", ""),
                ("judgment_spans", "", ""),
                # the sets travel with their rows; the consensus is made anew
                ("span_sets", "", " AND kind <> 'consensus'"),
                ("span_overlaps", "", " AND kind IN ('judge-judge', 'judge-gold')"),
            ):
                con.execute(
                    f"INSERT INTO {table} SELECT * REPLACE (?::VARCHAR AS run_id{replaced}) "
                    f"FROM {table} WHERE run_id = ?{where}",
                    [run_id, source_run_id],
                )

        self.transact(_body)

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        """A read-only query: column names and rows."""
        with self.read() as con:
            cursor = con.execute(sql, list(parameters))
            columns = [d[0] for d in cursor.description or ()]
            return columns, cursor.fetchall()

    def run_summary(self, run_id: str) -> dict[str, Any]:
        with self.read() as con:
            judged = con.execute(
                "SELECT count(*), count(score), count(*) - count(score), "
                "count(*) FILTER (WHERE cached), sum(cost_usd), sum(input_tokens), "
                "sum(output_tokens), count(DISTINCT judge_id) "
                "FROM judgments WHERE run_id = ?",
                [run_id],
            ).fetchone()
            agreed = con.execute(
                "SELECT count(*), avg(hallucinated::INTEGER), avg(score_spread), "
                "count(*) FILTER (WHERE status = 'insufficient') "
                "FROM consensus WHERE run_id = ?",
                [run_id],
            ).fetchone()
            rejected = con.execute(
                "SELECT count(*) FROM row_errors WHERE run_id = ?", [run_id]
            ).fetchone()
        assert judged is not None and agreed is not None and rejected is not None
        return {
            "judgments": judged[0],
            "scored": judged[1],
            "unscored": judged[2],
            "cache_hits": judged[3],
            "cost_usd": judged[4],
            "input_tokens": judged[5],
            "output_tokens": judged[6],
            "judges": judged[7],
            "items": agreed[0],
            "hallucination_rate": agreed[1],
            "mean_spread": agreed[2],
            "insufficient": agreed[3],
            "rejected_rows": rejected[0],
        }


# -- bulk inserts (inside a caller's transaction) ------------------------------------------


# The chunk's items that the run has not stored yet: ``items`` has no key (schema
# migration 7), so this anti-join is what keeps one row per (run_id, item_id).
_NEW_ITEMS = (
    "SELECT n.* FROM incoming_rows n ANTI JOIN "
    "(SELECT item_id FROM items WHERE run_id = ?) s USING (item_id)"
)


def _insert_items(con: duckdb.DuckDBPyConnection, run_id: str, items: Sequence[Item]) -> None:
    """Append the items the run has not stored yet (a resumed run writes again the chunk of
    an item it had already stored; of one id given twice, the first is kept)."""
    first: dict[str, Item] = {}
    for item in items:
        first.setdefault(item.item_id, item)
    items = list(first.values())
    table = pa.table(
        {
            "run_id": pa.array([run_id] * len(items), pa.string()),
            "item_id": pa.array([i.item_id for i in items], pa.string()),
            "row_number": pa.array([i.row_number for i in items], pa.int32()),
            "variables": pa.array([json.dumps(i.variables) for i in items], pa.string()),
            "gold_hallucinated": pa.array(
                [i.gold.hallucinated if i.gold else None for i in items], pa.bool_()
            ),
            "gold_spans": pa.array(
                [json.dumps([list(s) for s in i.gold.spans]) if i.gold else None for i in items],
                pa.string(),
            ),
            "metadata": pa.array([json.dumps(i.metadata) for i in items], pa.string()),
        }
    )
    _append(con, "items", table, select=_NEW_ITEMS, parameters=[run_id])


def _insert_judgments(
    con: duckdb.DuckDBPyConnection, run_id: str, judgments: Sequence[Judgment]
) -> _Sets:
    """Append ``judgments`` and their spans; returns their span sets for
    :func:`_record_span_sets`, whose sizes also fill ``judgments.span_chars``."""
    judgment_table, span_table = judgment_tables(run_id, judgments)
    sets, sizes, eligible = _judgment_sets(judgments, span_table)
    span_chars = pa.array(sizes, pa.int64(), mask=~eligible)
    _append(con, "judgments", judgment_table.append_column("span_chars", span_chars))
    _append(con, "judgment_spans", span_table)
    return sets


def _insert_consensus(
    con: duckdb.DuckDBPyConnection, run_id: str, results: Sequence[Consensus]
) -> _Sets:
    consensus_table, span_table = consensus_tables(run_id, results)
    _append(con, "consensus", consensus_table)
    _append(con, "consensus_spans", span_table)
    return _consensus_sets(results, span_table)


# -- span sets (inside a caller's transaction) -------------------------------------------

_KINDS = ("judge", "consensus", "gold")
_PAIR_KINDS = np.array([f"{a}-{b}" for a in _KINDS for b in _KINDS], dtype=object)


@dataclass(frozen=True, slots=True)
class _Sets:
    """Span sets (one per row of ``item_ids``) and their intervals, ``owner`` indexing rows."""

    item_ids: list[str]
    kind: np.ndarray
    judge_ids: list[str]
    owner: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _from_spans(
    item_ids: list[str],
    judge_ids: list[str],
    kind: int,
    counts: np.ndarray,
    eligible: np.ndarray,
    spans: pa.Table,
    clip: bool,
) -> tuple[_Sets, np.ndarray]:
    """The non-empty sets among rows whose spans are the consecutive rows of ``spans``, and
    every row's size (0 where not eligible)."""
    owner = np.repeat(np.arange(len(item_ids), dtype=np.int64), counts)
    start_col, end_col = spans["char_start"], spans["char_end"]
    valid = pc.and_(pc.is_valid(start_col), pc.is_valid(end_col)).to_numpy(zero_copy_only=False)
    starts = pc.fill_null(start_col, 0).to_numpy().astype(np.int64)
    ends = pc.fill_null(end_col, 0).to_numpy().astype(np.int64)
    if clip:
        starts = np.maximum(starts, 0)
    keep = valid & eligible[owner]
    merged = so.disjoint(owner[keep], starts[keep], ends[keep])
    sizes = so.set_sizes(merged, len(item_ids))
    flagging = np.flatnonzero(sizes > 0)
    sets = _Sets(
        [item_ids[i] for i in flagging],
        np.full(len(flagging), kind, dtype=np.int64),
        [judge_ids[i] for i in flagging],
        np.searchsorted(flagging, merged.owner),
        merged.starts,
        merged.ends,
    )
    return sets, sizes


def _judgment_sets(
    judgments: Sequence[Judgment], spans: pa.Table
) -> tuple[_Sets, np.ndarray, np.ndarray]:
    """Scored span answers' anchored spans (a negative start clipped to 0)."""
    counts = np.fromiter((len(j.spans) for j in judgments), np.int64, len(judgments))
    eligible = np.fromiter(
        (j.score is not None and j.output_kind == "spans" for j in judgments),
        bool,
        len(judgments),
    )
    sets, sizes = _from_spans(
        [j.item_id for j in judgments],
        [j.judge_id for j in judgments],
        0,
        counts,
        eligible,
        spans,
        clip=True,
    )
    return sets, sizes, eligible


def _consensus_sets(results: Sequence[Consensus], spans: pa.Table) -> _Sets:
    counts = np.fromiter((len(c.spans) for c in results), np.int64, len(results))
    eligible = np.fromiter((c.status == "ok" for c in results), bool, len(results))
    item_ids = [c.item_id for c in results]
    return _from_spans(item_ids, [""] * len(results), 1, counts, eligible, spans, clip=False)[0]


def _stored_sets(table: pa.Table) -> _Sets:
    """Rows of ``span_sets`` (or gold intervals, one row per interval) as sets."""
    starts, ends = table["starts"].combine_chunks(), table["ends"].combine_chunks()
    counts = pc.list_value_length(starts).to_numpy(zero_copy_only=False).astype(np.int64)
    kinds = {name: code for code, name in enumerate(_KINDS)}
    return _Sets(
        table["item_id"].to_pylist(),
        np.array([kinds[k] for k in table["kind"].to_pylist()], dtype=np.int64),
        table["judge_id"].to_pylist(),
        np.repeat(np.arange(len(table), dtype=np.int64), counts),
        pc.list_flatten(starts).to_numpy(zero_copy_only=False).astype(np.int64),
        pc.list_flatten(ends).to_numpy(zero_copy_only=False).astype(np.int64),
    )


_STORED_SETS_SQL = (
    "SELECT s.item_id, s.kind, s.judge_id, s.starts, s.ends "
    "FROM span_sets s JOIN span_lookup l USING (run_id, item_id)"
)

# An item's gold spans as the gold_intervals view reads them (negative starts clipped).
_GOLD_SETS_SQL = """
    SELECT item_id, 'gold' AS kind, '' AS judge_id,
           list(greatest(g[1], 0)) AS starts, list(g[2]) AS ends
    FROM (
        SELECT i.item_id, unnest(json_transform(i.gold_spans, '[["BIGINT"]]')) AS g
        FROM items i JOIN span_lookup l USING (run_id, item_id)
        WHERE i.gold_spans IS NOT NULL
    )
    WHERE g[2] > greatest(g[1], 0)
    GROUP BY item_id
"""


def _record_span_sets(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    items: Sequence[Item] = (),
    judge_sets: _Sets | None = None,
    consensus_sets: _Sets | None = None,
) -> None:
    """Add the span sets of rows just written, and their overlaps with every set already
    stored for the same items, to ``span_sets`` / ``span_overlaps`` (the caller's
    transaction), so the span views only add up rows.

    Items already stored are not written again, so their gold sets are read back from the
    table, and only for items that have none yet.
    """
    new = [s for s in (judge_sets, consensus_sets) if s is not None]
    wanted = dict.fromkeys(i for sets in new for i in sets.item_ids)
    wanted.update(dict.fromkeys(i.item_id for i in items))
    if not wanted:
        return
    con.register(
        "span_lookup",
        pa.table({"run_id": [run_id] * len(wanted), "item_id": list(wanted)}),
    )
    try:
        stored = _stored_sets(con.execute(_STORED_SETS_SQL).to_arrow_table())
        if items:
            gold = _stored_sets(con.execute(_GOLD_SETS_SQL).to_arrow_table())
            have = {i for i, k in zip(stored.item_ids, stored.kind, strict=True) if k == 2}
            if have:
                fresh = np.array([i not in have for i in gold.item_ids], dtype=bool)
                gold = _subset(gold, fresh)
            new.append(_merged(gold))
    finally:
        con.unregister("span_lookup")
    if not any(s.item_ids for s in new):
        return
    sets_rows, overlap_rows = _set_rows(run_id, new, stored)
    if len(sets_rows):
        _append(con, "span_sets", sets_rows)
    if len(overlap_rows):
        _append(con, "span_overlaps", overlap_rows)


# The sets of rows written before migration 5, read back the way the views read them.
_BACKFILL_SETS_SQL = """
    SELECT s.item_id, 'judge' AS kind, s.judge_id,
           list(greatest(s.char_start, 0)::BIGINT) AS starts, list(s.char_end::BIGINT) AS ends
    FROM judgment_spans s
    JOIN judgments j USING (run_id, item_id, judge_id)
    JOIN span_lookup l USING (run_id, item_id)
    WHERE j.score IS NOT NULL AND j.output_kind = 'spans'
      AND s.char_start IS NOT NULL AND s.char_end IS NOT NULL
    GROUP BY s.item_id, s.judge_id
    UNION ALL
    SELECT s.item_id, 'consensus', '', list(s.char_start::BIGINT), list(s.char_end::BIGINT)
    FROM consensus_spans s
    JOIN consensus c USING (run_id, item_id)
    JOIN span_lookup l USING (run_id, item_id)
    WHERE c.status = 'ok'
    GROUP BY s.item_id
"""

_BACKFILL_CHUNK = 20_000


def _backfill_span_sets(con: duckdb.DuckDBPyConnection) -> None:
    """Migration 5: ``span_sets`` / ``span_overlaps`` of every stored run, a chunk of items
    at a time (one query over a whole large run does not fit the memory limit)."""
    keys = con.execute(
        "SELECT DISTINCT run_id, item_id FROM ("
        "SELECT run_id, item_id FROM judgment_spans UNION ALL "
        "SELECT run_id, item_id FROM consensus_spans UNION ALL "
        "SELECT run_id, item_id FROM items WHERE gold_spans IS NOT NULL) ORDER BY ALL"
    ).fetchall()
    by_run: dict[str, list[str]] = {}
    for run_id, item_id in keys:
        by_run.setdefault(str(run_id), []).append(str(item_id))
    for run_id, item_ids in by_run.items():
        for start in range(0, len(item_ids), _BACKFILL_CHUNK):
            chunk = item_ids[start : start + _BACKFILL_CHUNK]
            con.register(
                "span_lookup", pa.table({"run_id": [run_id] * len(chunk), "item_id": chunk})
            )
            try:
                spans = con.execute(_BACKFILL_SETS_SQL).to_arrow_table()
                gold = con.execute(_GOLD_SETS_SQL).to_arrow_table()
            finally:
                con.unregister("span_lookup")
            new = [_merged(_stored_sets(spans)), _merged(_stored_sets(gold))]
            sets_rows, overlap_rows = _set_rows(run_id, new, _no_sets())
            if len(sets_rows):
                _append(con, "span_sets", sets_rows)
            if len(overlap_rows):
                _append(con, "span_overlaps", overlap_rows)
    con.execute(
        "UPDATE judgments j SET span_chars = coalesce(("
        "SELECT s.n_chars FROM span_sets s WHERE s.kind = 'judge' AND s.run_id = j.run_id "
        "AND s.item_id = j.item_id AND s.judge_id = j.judge_id), 0) "
        "WHERE j.score IS NOT NULL AND j.output_kind = 'spans'"
    )


BACKFILLS = {5: _backfill_span_sets}
"""Python steps of a migration, run right after its DDL in the same transaction."""


def _no_sets() -> _Sets:
    none = np.zeros(0, dtype=np.int64)
    return _Sets([], none, [], none, none, none)


def _subset(sets: _Sets, keep: np.ndarray) -> _Sets:
    rows = np.flatnonzero(keep)
    on = keep[sets.owner]
    return _Sets(
        [sets.item_ids[i] for i in rows],
        sets.kind[rows],
        [sets.judge_ids[i] for i in rows],
        np.searchsorted(rows, sets.owner[on]),
        sets.starts[on],
        sets.ends[on],
    )


def _merged(sets: _Sets) -> _Sets:
    """Gold spans read back as written: merged, and sets with no character dropped."""
    merged = so.disjoint(sets.owner, sets.starts, sets.ends)
    flagging = so.set_sizes(merged, len(sets.item_ids)) > 0
    return _subset(_Sets(sets.item_ids, sets.kind, sets.judge_ids, *_fields(merged)), flagging)


def _fields(iv: so.Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return iv.owner, iv.starts, iv.ends


def _set_rows(run_id: str, new: list[_Sets], stored: _Sets) -> tuple[pa.Table, pa.Table]:
    """The ``span_sets`` rows of the new sets, and the ``span_overlaps`` rows of every pair
    of sets on one item with at least one of them new."""
    parts = [*new, stored]
    item_ids = [i for s in parts for i in s.item_ids]
    judge_ids = np.array([j for s in parts for j in s.judge_ids], dtype=object)
    kind = np.concatenate([s.kind for s in parts])
    is_new = np.concatenate([np.full(len(s.item_ids), s is not stored, dtype=bool) for s in parts])
    base = np.cumsum([0, *(len(s.item_ids) for s in parts)])[:-1]
    owner = np.concatenate([s.owner + b for s, b in zip(parts, base, strict=True)])
    codes: dict[str, int] = {}
    item_code = np.fromiter((codes.setdefault(i, len(codes)) for i in item_ids), np.int64)
    # sets of one item side by side: pairs are then neighbours in one array pass
    order = np.argsort(item_code, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    n_sets = len(order)
    item_code, kind, judge_ids, is_new = (
        item_code[order],
        kind[order],
        judge_ids[order],
        is_new[order],
    )
    iv = so.disjoint(
        rank[owner],
        np.concatenate([s.starts for s in parts]),
        np.concatenate([s.ends for s in parts]),
    )
    sizes = so.set_sizes(iv, n_sets)
    counts = np.bincount(iv.owner, minlength=n_sets)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    fresh = np.flatnonzero(is_new)
    ids = np.array(list(codes), dtype=object)
    sets_rows = pa.table(
        {
            "run_id": pa.array([run_id] * len(fresh), pa.string()),
            "item_id": pa.array(ids[item_code[fresh]], pa.string()),
            "kind": pa.array(np.array(_KINDS, dtype=object)[kind[fresh]], pa.string()),
            "judge_id": pa.array(judge_ids[fresh], pa.string()),
            "n_chars": pa.array(sizes[fresh], pa.int64()),
            "starts": pa.ListArray.from_arrays(offsets, pa.array(iv.starts)).take(fresh),
            "ends": pa.ListArray.from_arrays(offsets, pa.array(iv.ends)).take(fresh),
        }
    )
    a, b = so.pairs_within(item_code)
    ka, kb = kind[a], kind[b]
    wanted = (is_new[a] | is_new[b]) & ((ka != kb) | (ka == 0))
    wanted &= ~((ka == 0) & (kb == 0) & (judge_ids[a] == judge_ids[b]))
    a, b = a[wanted], b[wanted]
    # judge before consensus before gold; two judges in id order, as the views compare them
    swap = (kind[a] > kind[b]) | ((kind[a] == kind[b]) & (judge_ids[a] > judge_ids[b]).astype(bool))
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    shared = so.overlaps(iv, n_sets, a, b)
    hit = shared > 0
    a, b, shared = a[hit], b[hit], shared[hit]
    overlap_rows = pa.table(
        {
            "run_id": pa.array([run_id] * len(a), pa.string()),
            "item_id": pa.array(ids[item_code[a]], pa.string()),
            "kind": pa.array(_PAIR_KINDS[kind[a] * 3 + kind[b]], pa.string()),
            "judge_a": pa.array(judge_ids[a], pa.string()),
            "judge_b": pa.array(judge_ids[b], pa.string()),
            "overlap_chars": pa.array(shared, pa.int64()),
        }
    )
    return sets_rows, overlap_rows


def _append(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: pa.Table,
    select: str = "SELECT * FROM incoming_rows",
    parameters: Sequence[Any] = (),
) -> None:
    """Bulk-append an Arrow table; ``table`` and ``select`` (a query of ``incoming_rows``)
    are this module's constants."""
    con.register("incoming_rows", rows)
    try:
        # BY NAME: columns added by later migrations sit at the end of the table, wherever
        # the Arrow table has them; columns it leaves out take their defaults.
        con.execute(f"INSERT INTO {table} BY NAME {select}", list(parameters))
    finally:
        con.unregister("incoming_rows")


# -- row conversion ---------------------------------------------------------------------

_JUDGMENT_FIELDS = [
    "run_id",
    "item_id",
    "judge_id",
    "provider",
    "model",
    "prompt_name",
    "prompt_hash",
    "output_kind",
    "score",
    "verdict",
    "unscored_reason",
    "reasoning",
    "raw_output",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "attempts",
    "cache_key",
    "cached",
    "created_at",
    "verdict_threshold",
]


@dataclass(frozen=True, slots=True)
class _JudgmentRow:
    run_id: str
    item_id: str
    judge_id: str
    provider: str
    model: str | None
    prompt_name: str | None
    prompt_hash: str | None
    output_kind: Any
    score: float | None
    verdict: bool | None
    unscored_reason: str | None
    reasoning: str | None
    raw_output: str | None
    latency_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    attempts: int
    cache_key: str | None
    cached: bool
    created_at: Any
    verdict_threshold: float | None

    def to_judgment(self, spans: tuple[Span, ...]) -> Judgment:
        return Judgment(
            item_id=self.item_id,
            judge_id=self.judge_id,
            output_kind=self.output_kind,
            score=self.score,
            spans=spans,
            reasoning=self.reasoning,
            raw_output=self.raw_output,
            unscored_reason=self.unscored_reason,
            latency_ms=self.latency_ms or 0.0,
            prompt_name=self.prompt_name,
            prompt_hash=self.prompt_hash,
            provider=self.provider,
            model=self.model,
            usage=Usage(self.input_tokens, self.output_tokens, self.cost_usd),
            attempts=self.attempts,
            cache_key=self.cache_key,
            cached=self.cached,
            verdict_threshold=(
                self.verdict_threshold if self.verdict_threshold is not None else 0.5
            ),
        )


def _judgments_from_cursor(cursor: duckdb.DuckDBPyConnection) -> list[_JudgmentRow]:
    names = [d[0] for d in cursor.description or ()]
    order = [names.index(f) for f in _JUDGMENT_FIELDS]
    return [_JudgmentRow(*(row[i] for i in order)) for row in cursor.fetchall()]


def _spans_for(
    con: duckdb.DuckDBPyConnection, keys: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], tuple[Span, ...]]:
    wanted = list(set(keys))
    if not wanted:
        return {}
    table = pa.table(
        {
            "run_id": [k[0] for k in wanted],
            "item_id": [k[1] for k in wanted],
            "judge_id": [k[2] for k in wanted],
        }
    )
    con.register("wanted_spans", table)
    rows = con.execute(
        "SELECT s.run_id, s.item_id, s.judge_id, s.char_start, s.char_end, s.text, "
        "s.match_kind, s.requested, s.similarity FROM judgment_spans s "
        "JOIN wanted_spans w USING (run_id, item_id, judge_id) "
        "ORDER BY s.run_id, s.item_id, s.judge_id, s.span_index"
    ).fetchall()
    con.unregister("wanted_spans")
    spans: dict[tuple[str, str, str], list[Span]] = {}
    for run_id, item_id, judge_id, start, end, text, match, requested, similarity in rows:
        spans.setdefault((run_id, item_id, judge_id), []).append(
            Span(start, end, text, match, requested or "", similarity)
        )
    return {k: tuple(v) for k, v in spans.items()}


def judgment_tables(run_id: str, judgments: Sequence[Judgment]) -> tuple[pa.Table, pa.Table]:
    """The Arrow tables one insert of ``judgments`` (and their spans) writes."""
    n = len(judgments)
    judgment_table = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "item_id": pa.array([j.item_id for j in judgments], pa.string()),
            "judge_id": pa.array([j.judge_id for j in judgments], pa.string()),
            "provider": pa.array([j.provider for j in judgments], pa.string()),
            "model": pa.array([j.model for j in judgments], pa.string()),
            "prompt_name": pa.array([j.prompt_name for j in judgments], pa.string()),
            "prompt_hash": pa.array([j.prompt_hash for j in judgments], pa.string()),
            "output_kind": pa.array([j.output_kind for j in judgments], pa.string()),
            "score": pa.array([j.score for j in judgments], pa.float64()),
            "verdict": pa.array([j.verdict for j in judgments], pa.bool_()),
            "unscored_reason": pa.array([j.unscored_reason for j in judgments], pa.string()),
            "reasoning": pa.array([j.reasoning for j in judgments], pa.string()),
            "raw_output": pa.array([j.raw_output for j in judgments], pa.string()),
            "latency_ms": pa.array([j.latency_ms for j in judgments], pa.float64()),
            "input_tokens": pa.array([j.usage.input_tokens for j in judgments], pa.int64()),
            "output_tokens": pa.array([j.usage.output_tokens for j in judgments], pa.int64()),
            "cost_usd": pa.array([j.usage.cost_usd for j in judgments], pa.float64()),
            "attempts": pa.array([j.attempts for j in judgments], pa.int32()),
            "cache_key": pa.array([j.cache_key for j in judgments], pa.string()),
            "cached": pa.array([j.cached for j in judgments], pa.bool_()),
            "verdict_threshold": pa.array([j.verdict_threshold for j in judgments], pa.float64()),
        }
    )
    span_rows = [
        (j.item_id, j.judge_id, index, s) for j in judgments for index, s in enumerate(j.spans)
    ]
    span_table = pa.table(
        {
            "run_id": pa.array([run_id] * len(span_rows), pa.string()),
            "item_id": pa.array([r[0] for r in span_rows], pa.string()),
            "judge_id": pa.array([r[1] for r in span_rows], pa.string()),
            "span_index": pa.array([r[2] for r in span_rows], pa.int32()),
            "char_start": pa.array([r[3].char_start for r in span_rows], pa.int32()),
            "char_end": pa.array([r[3].char_end for r in span_rows], pa.int32()),
            "text": pa.array([r[3].text for r in span_rows], pa.string()),
            "match_kind": pa.array([r[3].match for r in span_rows], pa.string()),
            "requested": pa.array([r[3].requested for r in span_rows], pa.string()),
            "similarity": pa.array([r[3].similarity for r in span_rows], pa.float64()),
        }
    )
    return judgment_table, span_table


def consensus_tables(run_id: str, results: Sequence[Consensus]) -> tuple[pa.Table, pa.Table]:
    n = len(results)
    consensus_table = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "item_id": pa.array([c.item_id for c in results], pa.string()),
            "status": pa.array([c.status for c in results], pa.string()),
            "n_judges": pa.array([c.n_judges for c in results], pa.int32()),
            "n_answered": pa.array([c.n_answered for c in results], pa.int32()),
            "n_scored": pa.array([c.n_scored for c in results], pa.int32()),
            "n_span_judges": pa.array([c.n_span_judges for c in results], pa.int32()),
            "score_median": pa.array([c.score_median for c in results], pa.float64()),
            "score_min": pa.array([c.score_min for c in results], pa.float64()),
            "score_max": pa.array([c.score_max for c in results], pa.float64()),
            "score_spread": pa.array([c.score_spread for c in results], pa.float64()),
            "hallucinated": pa.array([c.hallucinated for c in results], pa.bool_()),
            "chars_any": pa.array([c.chars_any for c in results], pa.int32()),
            "chars_all": pa.array([c.chars_all for c in results], pa.int32()),
            "score": pa.array([c.score for c in results], pa.float64()),
            "verdict_rule": pa.array([c.verdict_rule for c in results], pa.string()),
            "unlocalised": pa.array([c.unlocalised for c in results], pa.bool_()),
        }
    )
    span_rows = [(c.item_id, i, s) for c in results for i, s in enumerate(c.spans)]
    span_table = pa.table(
        {
            "run_id": pa.array([run_id] * len(span_rows), pa.string()),
            "item_id": pa.array([r[0] for r in span_rows], pa.string()),
            "span_index": pa.array([r[1] for r in span_rows], pa.int32()),
            "char_start": pa.array([r[2].char_start for r in span_rows], pa.int32()),
            "char_end": pa.array([r[2].char_end for r in span_rows], pa.int32()),
            "text": pa.array([r[2].text for r in span_rows], pa.string()),
            "votes": pa.array([r[2].votes for r in span_rows], pa.int32()),
            "min_votes": pa.array([r[2].min_votes for r in span_rows], pa.int32()),
        }
    )
    return consensus_table, span_table
