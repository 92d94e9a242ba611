"""DuckLake upkeep: merging small files, expiring snapshots, deleting files nothing reads.

Every chunk a run writes is one DuckLake commit: a snapshot, a few small Parquet files (or
rows inlined into the catalog when a commit has 10 rows or fewer). :func:`compact` folds
them together with DuckLake's own maintenance calls, each its own transaction, run again
when it loses a commit conflict to a writer (runs may go on meanwhile):

1. ``ducklake_flush_inlined_data``: inlined rows into Parquet;
2. ``ducklake_merge_adjacent_files``: small files of a table into one (time travel stays:
   the merged file remembers which snapshot added each row);
3. ``ducklake_expire_snapshots`` by an explicit list: the snapshots older than
   ``keep_days``, except those a run recorded (``runs.finished_snapshot``, read by
   ``juryflow sql --at-run``) or juryflow stamped as a run's end (the window before the
   run records it), and the current one;
4. ``ducklake_cleanup_old_files`` and ``ducklake_delete_orphaned_files``, both only for
   files unreferenced for ``grace_hours``: a reader may still be reading a file a merge
   just replaced, and a writer's files are orphans until it commits.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from juryflow.storage.connection import StoreError, connect, duckdb_config, is_commit_conflict
from juryflow.storage.lake.attach import LAKE_ALIAS, LakeTarget

if TYPE_CHECKING:
    from juryflow.storage.store import Store

DEFAULT_KEEP_DAYS = 7.0
DEFAULT_GRACE_HOURS = 24.0
FILE_STORE_NOTE = (
    "a DuckDB file store needs no compaction (DuckDB reuses freed blocks and checkpoints "
    "at every close); nothing done"
)
# The catalog's own connection, as DuckLake attaches it beside the lake.
_METADATA = f"__ducklake_metadata_{LAKE_ALIAS}"
# One expire call names at most this many snapshots (the list becomes an IN (...) in the
# catalog's SQL).
_EXPIRE_BATCH = 1000
# Merging is DuckLake's most memory-hungry step: at 1,000,000 judgments it ran out of the
# store's 256 MB. It gets a larger pool ($JURYFLOW_COMPACT_MEMORY_LIMIT) and merges a
# bounded number of groups per call, called until nothing is left to merge.
COMPACT_MEMORY_ENV = "JURYFLOW_COMPACT_MEMORY_LIMIT"
DEFAULT_COMPACT_MEMORY = "1GB"
_MERGES_PER_CALL = 20
_MAX_MERGE_CALLS = 1000
# A step that lost a race to another compaction (or a writer) is run again this often.
_ATTEMPTS = 30
# Two compactions flushing the same inlined rows: PostgreSQL refuses the second one's
# DELETE ("could not serialize access due to concurrent delete"; or, when it was not the
# first statement of the catalog's transaction, "Current transaction is aborted"), and
# DuckLake raises a plain duckdb.Error. Run again, the flush finds nothing left to do.
_LOST_RACE = (
    "could not serialize access",
    "Failed to delete flushed inlined data",
    "Current transaction is aborted",
)
# DuckLake quotes the catalog query that failed, thousands of characters of it.
_QUOTED_QUERY = re.compile(r'Failed to execute query ".*?": ', re.DOTALL)


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What :func:`compact` did; with ``dry_run``, what it would do (None: not known
    without doing it). ``skipped`` says why nothing was done (a DuckDB file store)."""

    store: str
    dry_run: bool
    keep_days: float
    grace_hours: float
    skipped: str | None = None
    inlined_rows: int | None = None
    files_before: int = 0
    files_after: int | None = None
    files_merged: int | None = None
    files_written: int | None = None
    data_bytes_before: int = 0
    data_bytes_after: int | None = None
    snapshots_before: int = 0
    snapshots_expired: int = 0
    snapshots_kept_for_runs: int = 0
    old_files_deleted: int = 0
    orphaned_files_deleted: int = 0
    bytes_freed: int | None = None


def _merge(step: _Steps) -> list[tuple[Any, ...]]:
    """Every table's small files merged, in calls of bounded size, with the merge's pool."""
    limit = os.environ.get(COMPACT_MEMORY_ENV, DEFAULT_COMPACT_MEMORY)
    merged: list[tuple[Any, ...]] = []
    with step.memory_limit(limit):
        # each call leaves fewer, larger files; the bound only guards against a DuckLake
        # that kept answering that it merged something
        for _ in range(_MAX_MERGE_CALLS):
            rows = step.write(
                "merge small files",
                f"CALL ducklake_merge_adjacent_files('{LAKE_ALIAS}', "
                f"max_compacted_files => {_MERGES_PER_CALL})",
            )
            merged += rows
            if not any(int(row[2]) > 1 for row in rows):
                break
    return merged


@dataclass(frozen=True, slots=True)
class _Snapshots:
    total: int
    expire: tuple[int, ...]
    kept_for_runs: int


def compact(
    store: Store,
    *,
    keep_days: float = DEFAULT_KEEP_DAYS,
    grace_hours: float = DEFAULT_GRACE_HOURS,
    dry_run: bool = False,
) -> CompactionReport:
    """Compact the store's lake (see the module's docstring); StoreError, one line, when
    a step fails. A DuckDB file store is left alone (``skipped``)."""
    if not keep_days >= 0 or not grace_hours >= 0:  # also refuses NaN
        raise StoreError("--keep-days and --orphan-grace-hours must be 0 or more")
    lake = store.lake
    if lake is None:
        return CompactionReport(
            str(store.path), dry_run, keep_days, grace_hours, skipped=FILE_STORE_NOTE
        )
    step = _Steps(store, lake)
    files_before, bytes_before = step.read("count the lake's files", _live_files)
    snapshots = step.read(
        "list the lake's snapshots", lambda con: _snapshots_to_expire(con, keep_days)
    )
    grace = [grace_hours * 3600.0]
    if dry_run:
        return CompactionReport(
            str(lake),
            True,
            keep_days,
            grace_hours,
            inlined_rows=step.read("count the inlined rows", _pending_inlined_rows),
            files_before=files_before,
            data_bytes_before=bytes_before,
            snapshots_before=snapshots.total,
            snapshots_expired=len(snapshots.expire),
            snapshots_kept_for_runs=snapshots.kept_for_runs,
            old_files_deleted=len(step.listed("list the old files", _OLD_FILES, grace)),
            orphaned_files_deleted=len(step.listed("list orphaned files", _ORPHANS, grace)),
        )
    flushed = step.write(
        "write the inlined rows to Parquet", f"CALL ducklake_flush_inlined_data('{LAKE_ALIAS}')"
    )
    merged = _merge(step)
    for start in range(0, len(snapshots.expire), _EXPIRE_BATCH):
        batch = list(snapshots.expire[start : start + _EXPIRE_BATCH])
        step.write(
            "expire old snapshots",
            f"CALL ducklake_expire_snapshots('{LAKE_ALIAS}', versions => ?)",
            [batch],
        )
    old, old_bytes = step.delete("delete old files", _OLD_FILES, grace)
    orphans, orphan_bytes = step.delete("delete orphaned files", _ORPHANS, grace)
    files_after, bytes_after = step.read("count the lake's files", _live_files)
    return CompactionReport(
        str(lake),
        False,
        keep_days,
        grace_hours,
        inlined_rows=sum(int(row[2]) for row in flushed),
        files_before=files_before,
        files_after=files_after,
        files_merged=sum(int(row[2]) for row in merged),
        files_written=sum(int(row[3]) for row in merged),
        data_bytes_before=bytes_before,
        data_bytes_after=bytes_after,
        snapshots_before=snapshots.total,
        snapshots_expired=len(snapshots.expire),
        snapshots_kept_for_runs=snapshots.kept_for_runs,
        old_files_deleted=old,
        orphaned_files_deleted=orphans,
        bytes_freed=None if old_bytes is None or orphan_bytes is None else old_bytes + orphan_bytes,
    )


_OLD_FILES = (
    f"CALL ducklake_cleanup_old_files('{LAKE_ALIAS}', dry_run => {{dry_run}}, "
    "older_than => now() - to_seconds(CAST(? AS DOUBLE)))"
)
_ORPHANS = (
    f"CALL ducklake_delete_orphaned_files('{LAKE_ALIAS}', dry_run => {{dry_run}}, "
    "older_than => now() - to_seconds(CAST(? AS DOUBLE)))"
)


class _Steps:
    """The lake's maintenance calls, each one transaction, run again when it loses a
    commit conflict; a ``duckdb.Error`` said as one StoreError line naming the step."""

    def __init__(self, store: Store, lake: LakeTarget) -> None:
        self._store = store
        self._lake = lake
        self._checked = False

    def _failed(self, what: str, error: duckdb.Error) -> StoreError:
        text = " ".join(_QUOTED_QUERY.sub("", str(error)).split())
        if len(text) > 300:
            text = text[:297] + "..."
        return StoreError(
            f"cannot {what} in {self._lake}: {text or type(error).__name__}; nothing is "
            "lost, run `juryflow store compact` again"
        )

    @contextmanager
    def memory_limit(self, limit: str) -> Iterator[None]:
        """The lake's connection with another buffer pool, the store's own again after."""
        try:
            with connect(self._lake) as con:
                con.execute("SET memory_limit = ?", [limit])
        except duckdb.Error as error:
            raise StoreError(
                f"{COMPACT_MEMORY_ENV}={limit!r} is not a DuckDB memory size; set e.g. 1GB "
                f"({type(error).__name__})"
            ) from None
        try:
            yield
        finally:
            with connect(self._lake) as con:
                con.execute("SET memory_limit = ?", [duckdb_config()["memory_limit"]])

    def read(self, what: str, body: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        try:
            with self._store.read() as con:
                if not self._checked:
                    _require_store(con, self._lake)
                    self._checked = True
                return body(con)
        except duckdb.Error as error:
            raise self._failed(what, error) from None

    def write(self, what: str, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One CALL, its own transaction (autocommit), run again while it loses a race."""
        delay = 0.05
        for attempt in range(_ATTEMPTS):
            try:
                with connect(self._lake) as con:
                    return con.execute(sql, parameters).fetchall()
            except duckdb.Error as error:
                lost = is_commit_conflict(error) or any(m in str(error) for m in _LOST_RACE)
                if not lost or attempt + 1 == _ATTEMPTS:
                    raise self._failed(what, error) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    def listed(self, what: str, template: str, parameters: Sequence[Any]) -> list[str]:
        rows = self.read(
            what, lambda con: con.execute(template.format(dry_run="true"), parameters).fetchall()
        )
        return [str(row[0]) for row in rows]

    def delete(self, what: str, template: str, parameters: Sequence[Any]) -> tuple[int, int | None]:
        """How many files the call deleted, and their bytes (None: not all on local disk).

        DuckLake says only which paths it deleted, so their sizes are read from a dry run
        just before; a file that became deletable in between is counted without its size.
        """
        sizes = _local_sizes(self.listed(what, template, parameters))
        deleted = self.write(what, template.format(dry_run="false"), parameters)
        if sizes is None:
            return len(deleted), None
        return len(deleted), sum(sizes.get(str(row[0]), 0) for row in deleted)


def _require_store(con: duckdb.DuckDBPyConnection, lake: LakeTarget) -> None:
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = 'runs'",
        [LAKE_ALIAS],
    ).fetchone()
    if not row or not row[0]:
        raise StoreError(
            f"{lake} holds no juryflow store; run `juryflow run --db ...` on it first, "
            "or check --db"
        )


def _live_files(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    row = con.execute(
        "SELECT coalesce(sum(file_count), 0), "
        "coalesce(sum(file_size_bytes + delete_file_size_bytes), 0) "
        "FROM ducklake_table_info(?)",
        [LAKE_ALIAS],
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _snapshots_to_expire(con: duckdb.DuckDBPyConnection, keep_days: float) -> _Snapshots:
    rows = con.execute(
        "SELECT snapshot_id, snapshot_time < now() - to_seconds(CAST(? AS DOUBLE)) AS old, "
        "coalesce(author = 'juryflow', false) AS stamped FROM ducklake_snapshots(?)",
        [keep_days * 86400.0, LAKE_ALIAS],
    ).fetchall()
    recorded = {
        int(snapshot)
        for (snapshot,) in con.execute(
            "SELECT DISTINCT finished_snapshot FROM runs WHERE finished_snapshot IS NOT NULL"
        ).fetchall()
    }
    current = max((int(snapshot) for snapshot, _, _ in rows), default=-1)
    expire: list[int] = []
    kept = 0
    for snapshot, old, stamped in rows:
        if not old or snapshot == current:
            continue
        if stamped or int(snapshot) in recorded:
            kept += 1
        else:
            expire.append(int(snapshot))
    return _Snapshots(len(rows), tuple(sorted(expire)), kept)


def _pending_inlined_rows(con: duckdb.DuckDBPyConnection) -> int | None:
    """Rows kept in the catalog that a flush would write out (read from DuckLake's own
    catalog tables, whose layout is DuckLake's: None when it is not the expected one)."""
    try:
        names = con.execute(f"SELECT table_name FROM {_METADATA}.ducklake_inlined_data_tables")
        total = 0
        for (name,) in names.fetchall():
            quoted = '"' + str(name).replace('"', '""') + '"'
            # Rows deleted since are flushed too: time travel still reads them.
            row = con.execute(f"SELECT count(*) FROM {_METADATA}.{quoted}").fetchone()
            total += int(row[0]) if row else 0
    except duckdb.CatalogException:
        return None
    return total


def _local_sizes(paths: Sequence[str]) -> dict[str, int] | None:
    """Sizes of files on this machine's disk; None for an object store (s3://...)."""
    sizes: dict[str, int] = {}
    for path in paths:
        if "://" in path:
            return None
        try:
            sizes[path] = os.stat(path).st_size
        except OSError:  # deleted meanwhile by another compaction
            continue
    return sizes
