"""What DuckLake (PostgreSQL catalog, local data directory) does with juryflow's store.

Groundwork for issue 14: these tests document, against a real PostgreSQL and the DuckLake
extension from its PyPI wheel, what works as is, what DuckLake refuses (with its words)
and how commit conflicts behave. storage/lake_design.md builds on them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from juryflow.storage.connection import StoreError
from juryflow.storage.lake.attach import (
    LAKE_ALIAS,
    LakeTarget,
    attach_lake,
    lake_ddl,
    load_lake_extensions,
    parse_lake_target,
)
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS, TABLES
from juryflow.storage.views import VIEWS
from tests.pg_server import PgServer, pg_server

__all__ = ["pg_server"]  # the fixture, imported so that pytest finds it here

REPO = Path(__file__).resolve().parents[1]
_databases = iter(range(10_000))


@pytest.fixture
def lake_dsn(pg_server: PgServer) -> str:
    """A new, empty PostgreSQL database: one lake per test."""
    return pg_server.create_database(f"lake_{os.getpid()}_{next(_databases)}")


def _connect(dsn: str, data: Path | None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    load_lake_extensions(con)
    attach_lake(
        con,
        parse_lake_target(f"ducklake:postgres:{dsn}"),
        None if data is None else str(data),
        read_only=read_only,
    )
    return con


@pytest.fixture
def lake(lake_dsn: str, tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = _connect(lake_dsn, tmp_path / "data")
    yield con
    con.close()


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """The store's migrations and views, as Store.migrate runs them, in one transaction."""
    con.execute("BEGIN")
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
        "applied_at TIMESTAMPTZ DEFAULT current_timestamp)"
    )
    for version, ddl in MIGRATIONS:
        con.execute(lake_ddl(ddl))
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
    for view in VIEWS:
        con.execute(view)
    con.execute("COMMIT")


# -- target parsing and extension loading (no server needed) ----------------------------


def test_targets_parse_into_catalog_kind_and_string() -> None:
    pg = parse_lake_target("ducklake:postgres:dbname=evals host=db.internal", "s3://b/lake")
    assert pg == LakeTarget("postgres", "dbname=evals host=db.internal", "s3://b/lake")
    assert pg.attach_path == "ducklake:postgres:dbname=evals host=db.internal"
    local = parse_lake_target("ducklake:runs.ducklake")
    assert (local.kind, Path(local.catalog).name, local.data_path) == (
        "duckdb",
        "runs.ducklake",
        None,
    )
    secret = parse_lake_target("ducklake:postgres:dbname=x password='p w' user=u")
    assert "p w" not in secret.shown and "password=***" in secret.shown


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("store.duckdb", "not a DuckLake target"),
        ("ducklake:", "names no catalog"),
        ("ducklake:postgres:", "names no PostgreSQL database"),
        ("ducklake:sqlite:x.db", "'sqlite' is not supported"),
    ],
)
def test_bad_targets_are_one_line_errors(text: str, says: str) -> None:
    with pytest.raises(StoreError, match=says) as caught:
        parse_lake_target(text)
    assert "\n" not in str(caught.value) and "ducklake:postgres:" in str(caught.value)


def test_extensions_load_from_the_wheels_with_autoloading_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_CACHE_DIR", str(tmp_path / "cache"))
    con = duckdb.connect()
    load_lake_extensions(con)
    loaded = dict(
        con.execute(
            "SELECT extension_name, install_path FROM duckdb_extensions() WHERE loaded"
        ).fetchall()
    )
    assert {"ducklake", "postgres_scanner"} <= set(loaded)
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name LIKE 'auto%_known_extensions'"
        ).fetchall()
    )
    assert settings == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
    # the renamed PostgreSQL extension is copied once, owner-only, and reused
    (copy,) = (tmp_path / "cache").rglob("postgres_scanner.duckdb_extension")
    assert copy.stat().st_mode & 0o077 == 0
    before = copy.stat().st_mtime_ns
    load_lake_extensions(duckdb.connect())
    assert copy.stat().st_mtime_ns == before


def test_a_missing_wheel_names_the_extra() -> None:
    from juryflow.storage.lake.extensions import _package_file

    with pytest.raises(StoreError, match=r"pip install 'juryflow\[lake\]'"):
        _package_file("duckdb_extension_not_there", "ducklake")


def test_a_single_writer_lake_needs_no_postgres(tmp_path: Path) -> None:
    con = duckdb.connect()
    load_lake_extensions(con, postgres=False)
    attach_lake(con, parse_lake_target(f"ducklake:{tmp_path / 'runs.ducklake'}"))
    _migrate(con)
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (LATEST_VERSION,)
    # DuckLake's default data path sits beside the catalog file
    con.execute(
        "INSERT INTO items SELECT 'r', 'i' || i, i, '{}', NULL, NULL, NULL FROM range(50) t(i)"
    )
    assert list((tmp_path / "runs.ducklake.files").rglob("*.parquet"))


# -- the juryflow schema on a PostgreSQL-catalogued lake --------------------------------


@pytest.mark.parametrize(
    ("ddl", "error"),
    [
        (
            "CREATE TABLE k (a VARCHAR PRIMARY KEY)",
            "PRIMARY KEY/UNIQUE constraints are not supported",
        ),
        (
            "CREATE TABLE k (a VARCHAR, PRIMARY KEY (a))",
            "PRIMARY KEY/UNIQUE constraints are not supported",
        ),
        ("CREATE TABLE k (a VARCHAR UNIQUE)", "PRIMARY KEY/UNIQUE constraints are not supported"),
        ("CREATE TABLE k (a INTEGER CHECK (a > 0))", "CHECK constraints are not supported"),
        ("CREATE SEQUENCE s", "DuckLake does not support sequences"),
        ("CREATE INDEX ix ON t (a)", "DuckLake does not support indexes"),
        ("ALTER TABLE t ADD COLUMN b BOOLEAN DEFAULT false", "non-literal default value"),
    ],
)
def test_what_ducklake_refuses(lake: duckdb.DuckDBPyConnection, ddl: str, error: str) -> None:
    lake.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(duckdb.NotImplementedException, match=error):
        lake.execute(ddl)


def test_a_refused_add_column_leaves_the_transaction_aborted(
    lake: duckdb.DuckDBPyConnection,
) -> None:
    # Even in autocommit: the next statement fails until a ROLLBACK, so every lake
    # connection must roll back after an error (Store.write already does).
    lake.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(duckdb.NotImplementedException):
        lake.execute("ALTER TABLE t ADD COLUMN b BOOLEAN DEFAULT false")
    with pytest.raises(duckdb.TransactionException, match="transaction is aborted"):
        lake.execute("SELECT 1")
    lake.execute("ROLLBACK")
    assert lake.execute("SELECT 1").fetchone() == (1,)


def test_lake_ddl_runs_every_migration_and_view(lake: duckdb.DuckDBPyConnection) -> None:
    for _, ddl in MIGRATIONS:
        assert "PRIMARY KEY" not in lake_ddl(ddl)
    _migrate(lake)
    tables = {
        name
        for (name,) in lake.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [LAKE_ALIAS]
        ).fetchall()
    }
    assert tables == {*TABLES, "schema_version"}
    views = lake.execute(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = ?", [LAKE_ALIAS]
    ).fetchone()
    assert views == (len(VIEWS),)
    # JSON, TIMESTAMPTZ defaults, literal defaults added later, rowid (judgment_intervals
    # partitions on it), RENAME (migration 7) all work
    lake.execute(
        "INSERT INTO judgments (run_id, item_id, judge_id, provider, output_kind, score, "
        "attempts, cached) VALUES ('r', 'i', 'a', 'p', 'spans', 0.9, 1, false)"
    )
    lake.execute(
        "INSERT INTO judgment_spans (run_id, item_id, judge_id, span_index, char_start, "
        "char_end, text, match_kind) VALUES ('r', 'i', 'a', 0, 2, 5, 'abc', 'exact')"
    )
    row = lake.execute("SELECT created_at, rowid FROM judgments").fetchone()
    assert row is not None
    created, rowid = row
    assert created is not None and rowid == 0
    assert lake.execute("SELECT char_start, char_end FROM judgment_intervals").fetchall() == [
        (2, 5)
    ]
    lake.execute(
        "INSERT INTO consensus (run_id, item_id, status, n_judges, n_answered, n_scored, "
        "n_span_judges, chars_any, chars_all) VALUES ('r', 'i', 'ok', 1, 1, 1, 1, 3, 3)"
    )
    assert lake.execute("SELECT unlocalised FROM consensus").fetchone() == (False,)
    for view in ("run_overview", "item_disagreement", "judge_pair_agreement", "judge_bias"):
        lake.execute(f"SELECT count(*) FROM {view}").fetchone()


# -- snapshots, time travel and maintenance ---------------------------------------------


def test_snapshots_and_time_travel(lake: duckdb.DuckDBPyConnection, lake_dsn: str) -> None:
    _migrate(lake)
    lake.execute(
        "INSERT INTO runs (run_id, kind, suite, status, started_at, panel_name, panel, "
        "prompts, quorum, n_judges) "
        "VALUES ('r1', 'evaluate', 's', 'completed', now(), 'p', '{}', '[]', 1, 1)"
    )
    at_r1 = _one(lake, f"SELECT id FROM {LAKE_ALIAS}.current_snapshot() t(id)")
    lake.execute("UPDATE runs SET status = 'failed'")
    lake.execute("DELETE FROM runs")
    snapshots = lake.execute(
        "SELECT snapshot_id FROM ducklake_snapshots(?) ORDER BY 1", [LAKE_ALIAS]
    ).fetchall()
    assert [s for (s,) in snapshots][-3:] == [at_r1, at_r1 + 1, at_r1 + 2]
    # a bound snapshot id, tables and views alike
    assert lake.execute("SELECT status FROM runs AT (VERSION => ?)", [at_r1]).fetchall() == [
        ("completed",)
    ]
    assert lake.execute("SELECT count(*) FROM run_overview").fetchone() == (0,)
    # a whole read-only connection at that snapshot: every view as it was then
    past = duckdb.connect()
    load_lake_extensions(past)
    past.execute(
        f"ATTACH 'ducklake:postgres:{lake_dsn}' AS {LAKE_ALIAS} "
        f"(READ_ONLY, SNAPSHOT_VERSION {int(at_r1)})"
    )
    past.execute(f"USE {LAKE_ALIAS}")
    assert past.execute("SELECT run_id, status FROM run_overview").fetchall() == [
        ("r1", "completed")
    ]
    with pytest.raises(duckdb.InvalidInputException, match="No snapshot found at version"):
        lake.execute("SELECT count(*) FROM runs AT (VERSION => 99999)")


def test_compaction_merge_expire_cleanup(lake: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake.execute("CREATE TABLE j (k VARCHAR, v DOUBLE)")
    for chunk in range(12):  # 12 commits of 100 rows: 12 Parquet files (over the inline limit)
        lake.execute("INSERT INTO j SELECT ? || i, random() FROM range(100) t(i)", [f"c{chunk}-"])
    files = "SELECT count(*) FROM ducklake_list_files(?, 'j')"
    assert lake.execute(files, [LAKE_ALIAS]).fetchone() == (12,)
    merged = lake.execute(f"CALL ducklake_merge_adjacent_files('{LAKE_ALIAS}')").fetchall()
    assert merged == [("main", "j", 12, 1)]
    assert lake.execute(files, [LAKE_ALIAS]).fetchone() == (1,)
    on_disk = lambda: len(list((tmp_path / "data").rglob("*.parquet")))  # noqa: E731
    assert on_disk() == 13  # the merged file is new; the old ones wait for their snapshots
    expired = lake.execute(
        f"CALL ducklake_expire_snapshots('{LAKE_ALIAS}', older_than => now())"
    ).fetchall()
    assert expired
    removed = lake.execute(
        f"CALL ducklake_cleanup_old_files('{LAKE_ALIAS}', cleanup_all => true)"
    ).fetchall()
    assert len(removed) == 12 and on_disk() == 1
    assert lake.execute("SELECT count(*), count(DISTINCT k) FROM j").fetchone() == (1200, 1200)


# -- concurrent writers -----------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import json, sys, time, duckdb
    from juryflow.storage.lake.attach import attach_lake, load_lake_extensions, parse_lake_target
    dsn, data, mode, worker, n, retries = sys.argv[1:7]
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # a loaded machine drew it into the JSON
    load_lake_extensions(con)
    if retries != "default":
        con.execute(f"SET ducklake_max_retry_count = {int(retries)}")
    attach_lake(con, parse_lake_target("ducklake:postgres:" + dsn), data)
    failures = []
    for k in range(int(n)):
        for attempt in range(30):
            try:
                con.execute("BEGIN")
                con.execute("INSERT INTO j SELECT ?, i FROM range(50) t(i)", [f"w{worker}-{k}"])
                if mode == "update":
                    con.execute("UPDATE runs SET status = ? WHERE run_id = ?", [str(k), worker])
                con.execute("COMMIT")
                break
            except duckdb.Error as error:
                failures.append([type(error).__name__, str(error).replace(chr(10), " ")])
                try:  # a failed COMMIT has already ended the transaction
                    con.execute("ROLLBACK")
                except duckdb.TransactionException:
                    pass
                time.sleep(0.02 * (attempt + 1))
        else:
            sys.exit(f"gave up after {attempt + 1} attempts")
    print(json.dumps(failures))
    """
)


def _writers(dsn: str, data: Path, mode: str, retries: str, workers: int = 3) -> list[list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, dsn, str(data), mode, str(w), "8", retries],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(workers)
    ]
    failures: list[list[str]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        failures.extend(json.loads(out))
    return failures


def _prepare(dsn: str, data: Path) -> None:
    con = _connect(dsn, data)
    con.execute("CREATE TABLE j (chunk VARCHAR, i BIGINT)")
    con.execute("CREATE TABLE runs (run_id VARCHAR, status VARCHAR)")
    con.execute("INSERT INTO runs VALUES ('0', ''), ('1', ''), ('2', '')")
    con.close()


def _exactly_once(dsn: str, data: Path, workers: int = 3) -> None:
    con = _connect(dsn, data, read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT (chunk, i)) FROM j").fetchone() == (
        workers * 8 * 50,
        workers * 8 * 50,
    )


def test_concurrent_appends_are_retried_by_ducklake_itself(lake_dsn: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _prepare(lake_dsn, data)
    # ducklake_max_retry_count (default 10) retries an append that lost the race for the
    # next snapshot id; nothing reaches the application
    assert _writers(lake_dsn, data, "append", "default") == []
    _exactly_once(lake_dsn, data)


def test_without_ducklake_retries_a_lost_commit_is_a_transaction_exception(
    lake_dsn: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _prepare(lake_dsn, data)
    failures = _writers(lake_dsn, data, "append", "0")
    # Which commits collide is up to the scheduler; what a collision looks like is not.
    for kind, text in failures:
        assert kind == "TransactionException"
        assert "Failed to commit DuckLake transaction" in text
        assert "Exceeded the maximum retry count of 0" in text
    _exactly_once(lake_dsn, data)  # each failed transaction left nothing; its retry did it


def test_concurrent_updates_of_one_table_conflict_and_an_application_retry_succeeds(
    lake_dsn: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _prepare(lake_dsn, data)
    failures = _writers(lake_dsn, data, "update", "default")
    # UPDATEs of different rows of one small (inlined) table still conflict: DuckLake
    # does not retry those, the application must (the whole transaction, after ROLLBACK)
    for kind, text in failures:
        assert kind == "TransactionException"
        assert "Transaction conflict" in text
    _exactly_once(lake_dsn, data)
    con = _connect(lake_dsn, data, read_only=True)
    assert sorted(con.execute("SELECT run_id, status FROM runs").fetchall()) == [
        ("0", "7"),
        ("1", "7"),
        ("2", "7"),
    ]


# -- `juryflow sql` confinement on a lake -----------------------------------------------


def test_confinement_needs_the_data_path_allowed_and_leaves_postgres_query_open(
    lake_dsn: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    con = _connect(lake_dsn, data)
    con.execute("CREATE TABLE t AS SELECT range AS a FROM range(100)")
    con.close()

    def confined(allowed: list[str]) -> duckdb.DuckDBPyConnection:
        con = _connect(lake_dsn, None, read_only=True)
        con.execute("SET allowed_directories = ?", [allowed])
        for setting in ("enable_external_access = false", "lock_configuration = true"):
            con.execute(f"SET {setting}")
        return con

    blind = confined([])
    with pytest.raises(duckdb.PermissionException, match="file system operations are disabled"):
        blind.execute("SELECT sum(a) FROM t").fetchall()
    sighted = confined([f"{data}/"])
    assert sighted.execute("SELECT sum(a) FROM t").fetchone() == (4950,)
    with pytest.raises(
        duckdb.PermissionException, match="Attaching Postgres databases is disabled"
    ):
        sighted.execute(f"ATTACH '{lake_dsn}' AS other (TYPE postgres)")
    with pytest.raises(duckdb.Error, match="read-only"):
        sighted.execute("INSERT INTO t VALUES (1)")
    # The gap the statement check must close: the catalog's own PostgreSQL connection
    # answers any read-only query, outside the lake's tables.
    assert sighted.execute(
        "SELECT * FROM postgres_query('__ducklake_metadata_lake', 'SELECT current_user')"
    ).fetchone() == ("juryflow",)


_CLAIMER = textwrap.dedent(
    """
    import json, sys, time, duckdb
    from juryflow.storage.lake.attach import attach_lake, load_lake_extensions, parse_lake_target
    dsn, me = sys.argv[1:3]
    con = duckdb.connect()
    load_lake_extensions(con)
    attach_lake(con, parse_lake_target("ducklake:postgres:" + dsn))
    won = []
    for shard in range(12):
        try:
            con.execute("BEGIN")
            (owner,) = con.execute("SELECT owner FROM claims WHERE shard = ?", [shard]).fetchone()
            if owner == "":
                time.sleep(0.01)  # widen the race
                con.execute("UPDATE claims SET owner = ? WHERE shard = ?", [me, shard])
            con.execute("COMMIT")
            if owner == "":
                won.append(shard)
        except duckdb.TransactionException:
            pass  # lost the race: the failed COMMIT ended the transaction
    print(json.dumps(won))
    """
)


def test_claims_by_update_replace_keys(lake_dsn: str, tmp_path: Path) -> None:
    # What replaces a primary key for the rows that must exist once (a run's shard owner):
    # read-then-UPDATE in one transaction. DuckLake lets concurrent appends through, but
    # two commits that both UPDATE the table conflict, so no shard is claimed twice.
    con = _connect(lake_dsn, tmp_path / "data")
    con.execute("CREATE TABLE claims (shard INTEGER, owner VARCHAR)")
    con.execute("INSERT INTO claims SELECT i, '' FROM range(12) t(i)")
    con.close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, lake_dsn, f"w{w}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(3)
    ]
    won: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        won.extend(json.loads(out))
    assert sorted(won) == sorted(set(won))  # nobody won a shard another one won
    con = _connect(lake_dsn, None, read_only=True)
    owners = con.execute("SELECT shard, owner FROM claims ORDER BY shard").fetchall()
    assert sorted(s for s, owner in owners if owner) == sorted(won)


def test_concurrent_first_attach_of_a_new_catalog_is_retried(lake_dsn: str, tmp_path: Path) -> None:
    # Creating the lake (DuckLake's own catalog tables) races in PostgreSQL: a loser's
    # ATTACH fails with "Failed to initialize DuckLake: ... duplicate key value violates
    # unique constraint" and attach_lake tries again, finding the lake created.
    code = textwrap.dedent(
        """
        import sys, duckdb
        from juryflow.storage.connection import StoreError
        from juryflow.storage.lake.attach import (
            attach_lake, load_lake_extensions, parse_lake_target,
        )
        con = duckdb.connect()
        load_lake_extensions(con)
        try:
            attach_lake(con, parse_lake_target("ducklake:postgres:" + sys.argv[1]), sys.argv[2])
        except StoreError as error:
            print(error)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, lake_dsn, str(tmp_path / "data")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    errors = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert errors == ["", "", ""]
    # once created, attaching is safe and the lake is whole
    con = _connect(lake_dsn, tmp_path / "data")
    assert con.execute(f"SELECT count(*) FROM ducklake_snapshots('{LAKE_ALIAS}')").fetchone() == (
        1,
    )


def test_a_commit_can_say_which_run_made_it(tmp_path: Path) -> None:
    # The audit trail of issue 14: each run's commits carry its id, so the snapshot a run
    # finished at can be found in ducklake_snapshots without a column of our own.
    con = duckdb.connect()
    load_lake_extensions(con, postgres=False)
    attach_lake(con, parse_lake_target(f"ducklake:{tmp_path / 'a.ducklake'}"))
    con.execute("CREATE TABLE t (a INTEGER)")
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (1)")
    con.execute(
        f"CALL {LAKE_ALIAS}.set_commit_message('juryflow', 'run r1 shard 1/3', "
        'extra_info => \'{"run_id": "r1", "shard": "1/3"}\')'
    )
    con.execute("COMMIT")
    found = con.execute(
        "SELECT snapshot_id, author, commit_message, commit_extra_info::JSON->>'run_id' "
        "FROM ducklake_snapshots(?) WHERE author = 'juryflow'",
        [LAKE_ALIAS],
    ).fetchall()
    assert found == [(2, "juryflow", "run r1 shard 1/3", "r1")]
