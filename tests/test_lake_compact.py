"""`juryflow store compact`: a DuckLake store's small files merged, old snapshots expired,
unreferenced files deleted; every row and every view unchanged, and the snapshots runs
finished at still readable (``juryflow sql --at-run``).

The lake's catalog is a real PostgreSQL (tests/pg_server.py); writers are real processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.consensus import panel_consensus
from juryflow.maths.records import Item, Judgment, Span
from juryflow.storage.connection import close_lakes
from juryflow.storage.lake.attach import open_lake
from juryflow.storage.lake.maintenance import FILE_STORE_NOTE, compact
from juryflow.storage.schema import TABLES
from juryflow.storage.store import RunRecord, Store
from tests.pg_server import PgServer, pg_server

__all__ = ["pg_server"]  # the fixture, imported so that pytest finds it here

REPO = Path(__file__).resolve().parents[1]
TEXT = "a.b.c.d.e.f.g.h.i.j"
JUDGES = ("a", "b", "c")
ITEMS_PER_CHUNK = 5
R1_CHUNKS = 6  # run r1, completed
CHUNKS = 10  # r1's and then r2's (still running)
APPENDED = 16  # what the concurrent writer adds to r2
_databases = iter(range(10_000))
runner = CliRunner()


def run_record(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        kind="evaluate",
        suite="default",
        status="running",
        started_at=datetime.now(UTC),
        finished_at=None,
        dataset="hand-built",
        panel_name="hand",
        panel={"name": "hand", "judges": [{"id": j} for j in JUDGES]},
        prompts=[],
        quorum=2,
        n_judges=len(JUDGES),
    )


def write_chunks(store: Store, run_id: str, chunks: range) -> None:
    """One commit per chunk, as a run writes them: items, judgments with spans, consensus."""
    for k in chunks:
        ids = [f"{run_id}-c{k}-i{n}" for n in range(ITEMS_PER_CHUNK)]
        items = [
            Item(i, {"response": TEXT}, None, row_number=k * ITEMS_PER_CHUNK + n)
            for n, i in enumerate(ids)
        ]
        judgments = [
            Judgment(i, judge, "spans", 1.0, (Span(2 * n, 2 * n + 3, "x", "detector"),))
            for i in ids
            for n, judge in enumerate(JUDGES)
        ]
        by_item = {i: [j for j in judgments if j.item_id == i] for i in ids}
        consensus = panel_consensus(by_item, dict.fromkeys(ids, TEXT), len(JUDGES), 2)
        store.write_chunk(run_id, items, judgments, consensus)


@dataclass(frozen=True)
class Lake:
    db: str
    data: Path

    def store(self) -> Store:
        return Store(self.db, str(self.data))


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> Iterator[Lake]:
    """A lake holding run r1 (completed: its snapshot recorded) and run r2 (running):
    each chunk a commit of small files and inlined rows."""
    dsn = pg_server.create_database(f"compact_{os.getpid()}_{next(_databases)}")
    made = Lake(f"ducklake:postgres:{dsn}", tmp_path / "data")
    store = made.store()
    store.migrate()
    store.create_run(run_record("r1"))
    write_chunks(store, "r1", range(R1_CHUNKS))
    store.finish_run("r1", "completed")
    store.create_run(run_record("r2"))
    write_chunks(store, "r2", range(R1_CHUNKS, CHUNKS))
    yield made
    close_lakes()


def _one(store: Store, sql: str, *parameters: object) -> Any:
    with store.read() as con:
        row = con.execute(sql, list(parameters)).fetchone()
    assert row is not None
    return row[0]


def _snapshot_ids(store: Store) -> list[int]:
    with store.read() as con:
        rows = con.execute("SELECT snapshot_id FROM ducklake_snapshots('lake') ORDER BY 1")
        return [int(s) for (s,) in rows.fetchall()]


def _contents(store: Store, *, views: bool = True) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's and (``views``) every view's rows, in a fixed order."""
    with store.read() as con:
        names = [
            str(name)
            for (name,) in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE database_name = 'lake' "
                "AND NOT internal ORDER BY 1"
            ).fetchall()
        ]
        assert len(names) > 10
        return {
            name: con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
            for name in (*TABLES, *(names if views else ()))
        }


def _on_disk(data: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in data.rglob("*") if path.is_file()}


def test_compaction_merges_small_files_and_every_row_and_view_stays(lake: Lake) -> None:
    store = lake.store()
    before = _contents(store)
    assert sum(len(rows) for rows in before.values()) > 500
    files_before = len(_on_disk(lake.data))

    report = compact(store, keep_days=0, grace_hours=0)

    assert report.inlined_rows and report.inlined_rows > 0  # consensus: 5 rows a commit
    assert report.files_after is not None and report.files_merged is not None
    assert report.files_after < report.files_before / 2
    assert report.files_after <= len(TABLES)  # one file a table, each written in one go
    assert report.files_merged > report.files_before / 2
    assert report.old_files_deleted >= report.files_merged
    assert report.bytes_freed and report.bytes_freed > 0
    assert len(_on_disk(lake.data)) < files_before / 2
    assert _contents(store) == before
    # and as another process sees it, from a connection of its own
    close_lakes()
    assert _contents(lake.store(), views=False) == {t: before[t] for t in TABLES}


def test_the_snapshot_a_run_finished_at_survives_and_unrecorded_ones_go(lake: Lake) -> None:
    store = lake.store()
    recorded = _one(store, "SELECT finished_snapshot FROM runs WHERE run_id = 'r1'")
    judged = "SELECT count(*) FROM judgments AT (VERSION => ?)"
    at_r1 = _one(store, judged, recorded)
    assert at_r1 == R1_CHUNKS * ITEMS_PER_CHUNK * len(JUDGES)
    before = _snapshot_ids(store)
    unrecorded = recorded - 1  # r1's last chunk
    assert unrecorded in before

    report = compact(store, keep_days=0, grace_hours=0)

    after = _snapshot_ids(store)
    assert recorded in after and unrecorded not in after
    assert report.snapshots_kept_for_runs == 1
    assert report.snapshots_expired == len(before) - 2  # all but r1's and the current one
    assert len(after) == 2 + 2  # ... and the flush and merge commits (expiring makes none)
    assert _one(store, judged, recorded) == at_r1
    with pytest.raises(duckdb.InvalidInputException, match="No snapshot found at version"):
        _one(store, judged, unrecorded)
    # `juryflow sql --at-run r1` attaches at the snapshot: every view reads the past
    past = open_lake(lake.store().lake or pytest.fail("not a lake"), snapshot=recorded)
    try:
        overview = past.execute("SELECT run_id, status, items FROM run_overview").fetchall()
    finally:
        past.close()
    assert overview == [("r1", "completed", R1_CHUNKS * ITEMS_PER_CHUNK)]


def test_keep_days_keeps_young_snapshots(lake: Lake) -> None:
    store = lake.store()
    before = _snapshot_ids(store)
    report = compact(store)  # 7 days: everything here is younger
    assert (report.snapshots_expired, report.snapshots_kept_for_runs) == (0, 0)
    assert set(before) <= set(_snapshot_ids(store))
    # the merged-away files wait the grace period (24 h) before they are deleted
    assert report.old_files_deleted == 0 and report.bytes_freed == 0


def test_dry_run_changes_nothing(lake: Lake) -> None:
    store = lake.store()
    compact(store, keep_days=7)  # merged-away files now wait for deletion
    snapshots = _snapshot_ids(store)
    files = _on_disk(lake.data)
    contents = _contents(store, views=False)

    report = compact(store, keep_days=0, grace_hours=0, dry_run=True)

    assert report.dry_run and report.files_after is None and report.bytes_freed is None
    assert report.snapshots_expired == len(snapshots) - 2
    assert report.old_files_deleted > 0
    assert _snapshot_ids(store) == snapshots  # not even a commit of its own
    assert _on_disk(lake.data) == files
    assert _contents(store, views=False) == contents
    # what a dry run on a fresh lake counts, a real compaction then does
    write_chunks(store, "r2", range(CHUNKS, CHUNKS + 2))
    pending = compact(store, dry_run=True).inlined_rows
    assert pending is not None and pending > 0
    assert compact(store).inlined_rows == pending


def test_orphaned_files_are_deleted_only_after_the_grace_period(lake: Lake) -> None:
    store = lake.store()
    # what a writer killed mid-transaction leaves: a Parquet file no snapshot names
    some = next((lake.data / "main" / "judgments").glob("*.parquet"))
    stray = some.with_name("ducklake-00000000-0000-0000-0000-000000000000.parquet")
    shutil.copyfile(some, stray)
    assert compact(store).orphaned_files_deleted == 0
    assert stray.exists()
    old = time.time() - 3 * 3600
    os.utime(stray, (old, old))
    assert compact(store, grace_hours=2, dry_run=True).orphaned_files_deleted == 1
    assert stray.exists()
    report = compact(store, grace_hours=2)
    assert report.orphaned_files_deleted == 1 and not stray.exists()


_APPENDER = textwrap.dedent(
    """
    import sys
    from juryflow.storage.store import Store
    from tests.test_lake_compact import write_chunks
    db, data, first, last = sys.argv[1:5]
    write_chunks(Store(db, data), "r2", range(int(first), int(last)))
    """
)


@pytest.mark.slow
def test_compaction_while_another_process_appends(lake: Lake) -> None:
    store = lake.store()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _APPENDER,
            lake.db,
            str(lake.data),
            str(CHUNKS),
            str(CHUNKS + APPENDED),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    reports = []
    while writer.poll() is None:
        # every snapshot but the recorded one expired, every unreferenced file deleted at
        # once except orphans (the writer's uncommitted files): the harshest settings
        reports.append(compact(store, keep_days=0))
    _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err[-3000:]
    reports.append(compact(store, keep_days=0))
    assert len(reports) >= 2
    assert sum(r.files_merged or 0 for r in reports) > 0
    judgments = (CHUNKS + APPENDED) * ITEMS_PER_CHUNK * len(JUDGES)
    assert _one(store, "SELECT count(*) FROM judgments") == judgments
    assert (
        _one(
            store,
            "SELECT count(*) FROM (SELECT item_id, judge_id FROM judgments "
            "GROUP BY ALL HAVING count(*) > 1)",
        )
        == 0
    )
    assert _one(store, "SELECT count(*) FROM consensus") == (CHUNKS + APPENDED) * ITEMS_PER_CHUNK
    recorded = _one(store, "SELECT finished_snapshot FROM runs WHERE run_id = 'r1'")
    assert _one(store, "SELECT count(*) FROM judgments AT (VERSION => ?)", recorded) == (
        R1_CHUNKS * ITEMS_PER_CHUNK * len(JUDGES)
    )


_COMPACTOR = textwrap.dedent(
    """
    import dataclasses, json, sys
    from juryflow.storage.lake.maintenance import compact
    from juryflow.storage.store import Store
    print(json.dumps(dataclasses.asdict(compact(Store(sys.argv[1]), keep_days=0))))
    """
)


@pytest.mark.slow
def test_compactions_at_the_same_time_both_succeed(lake: Lake) -> None:
    # Two nightly jobs on two machines: the loser of a flush gets PostgreSQL's "could not
    # serialize access due to concurrent delete" and runs the step again.
    store = lake.store()
    before = _contents(store, views=False)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _COMPACTOR, lake.db],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    reports = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err[-3000:]
        reports.append(json.loads(out))
    assert sum(r["files_merged"] for r in reports) > 0
    assert _contents(store, views=False) == before
    assert _one(store, "SELECT sum(file_count) FROM ducklake_table_info('lake')") <= len(TABLES)


def test_a_single_writer_lake_compacts_the_same(tmp_path: Path) -> None:
    # ducklake:FILE.ducklake: the catalog in a DuckDB file, no PostgreSQL
    store = Store(f"ducklake:{tmp_path / 'runs.ducklake'}", str(tmp_path / "data"))
    try:
        store.migrate()
        store.create_run(run_record("r1"))
        write_chunks(store, "r1", range(4))
        store.finish_run("r1", "completed")
        recorded = _one(store, "SELECT finished_snapshot FROM runs")
        pending = compact(store, keep_days=0, dry_run=True).inlined_rows
        report = compact(store, keep_days=0, grace_hours=0)
        assert report.inlined_rows == pending and report.snapshots_kept_for_runs == 1
        assert report.files_after is not None and report.files_after < report.files_before
        assert _one(store, "SELECT count(*) FROM judgments AT (VERSION => ?)", recorded) == (
            4 * ITEMS_PER_CHUNK * len(JUDGES)
        )
    finally:
        close_lakes()


def test_a_file_store_needs_no_compaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.duckdb")
    store.migrate()
    report = compact(store)
    assert report.skipped == FILE_STORE_NOTE
    result = runner.invoke(app, ["store", "compact", "--db", str(tmp_path / "store.duckdb")])
    assert result.exit_code == 0, result.output
    assert "needs no compaction" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_prints_each_step_and_json(lake: Lake) -> None:
    dry = runner.invoke(app, ["store", "compact", "--db", lake.db, "--dry-run", "--keep-days", "0"])
    assert dry.exit_code == 0, dry.output
    for step in ("flush inlined rows", "merge small files", "expire snapshots", "orphaned"):
        assert step in dry.output
    assert "dry run, nothing changed" in dry.output
    done = runner.invoke(
        app, ["store", "compact", "--db", lake.db, "--keep-days", "0", "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["dry_run"] is False and report["snapshots_kept_for_runs"] == 1
    assert report["files_after"] < report["files_before"]
    assert "password" not in report["store"]
    table = runner.invoke(app, ["store", "compact", "--db", lake.db])
    assert table.exit_code == 0 and "compacted" in table.output
    bad = runner.invoke(app, ["store", "compact", "--db", lake.db, "--format", "xml"])
    assert bad.exit_code == 2 and "--format must be table or json" in bad.output
    negative = runner.invoke(app, ["store", "compact", "--db", lake.db, "--keep-days", "-1"])
    assert negative.exit_code == 2


def test_a_lake_without_a_juryflow_store_is_one_line(pg_server: PgServer, tmp_path: Path) -> None:
    dsn = pg_server.create_database(f"compact_{os.getpid()}_{next(_databases)}")
    try:
        result = runner.invoke(
            app,
            ["store", "compact", "--db", f"ducklake:postgres:{dsn}"],
            env={"JURYFLOW_DATA_PATH": str(tmp_path / "data")},
        )
    finally:
        close_lakes()
    assert result.exit_code == 2
    assert "holds no juryflow store" in result.output
