"""`juryflow sql` on a DuckLake store: confined as on a file, and `--at-run RUN`.

A real PostgreSQL catalog (tests/pg_server.py) and a lake filled by a real offline
`juryflow run`; every query goes through the real command line (a subprocess). What a lake
adds to the file store's attacks (tests/test_sql_confined.py): its catalog database,
attached beside it, and the PostgreSQL functions that query that server directly.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.storage.connection import close_lakes, resolve_target
from juryflow.storage.lake.attach import LakeTarget, current_snapshot, open_lake
from juryflow.storage.sql_guard import confined_connection
from juryflow.storage.store import RunRecord, Store
from tests.pg_server import PgServer, pg_server

__all__ = ["pg_server"]  # the fixture, imported so that pytest finds it here

REPO = Path(__file__).resolve().parents[1]
_databases = iter(range(10_000))


@dataclass(frozen=True)
class Lake:
    db: str  # the --db value
    data: Path  # the lake's data directory
    outside: Path  # a directory beside it holding a file no query may read
    cwd: Path  # the commands' working directory; must stay empty
    first_run: str  # the offline run that filled the lake


def child_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["JURYFLOW_DATA_PATH"] = str(data)
    env["JURYFLOW_JOURNAL_DIR"] = str(data.parent / "journals")
    env["COLUMNS"] = "200"
    return env


@pytest.fixture(scope="module")
def lake(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """A lake holding one completed offline run (60 items x 3 judges)."""
    root = tmp_path_factory.mktemp("lake-sql")
    dsn = pg_server.create_database(f"lake_sql_{os.getpid()}")
    data = root / "data"
    db = f"ducklake:postgres:{dsn}"
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", "run", "--db", db],
        env=child_env(data),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (root / "outside").mkdir()
    (root / "cwd").mkdir()
    duckdb.execute(f"COPY (SELECT 'secret' AS s) TO '{root / 'outside' / 'secret.parquet'}'")
    run_id = Store(db).latest_run_id()
    assert run_id is not None
    yield Lake(db, data, root / "outside", root / "cwd", run_id)
    close_lakes()


def sql_process(lake: Lake, statement: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`juryflow sql` as a user runs it: a process of its own."""
    # another data path in the environment must not matter to a reader
    return subprocess.run(
        [sys.executable, "-m", "juryflow", "sql", statement, "--db", lake.db, *extra],
        cwd=lake.cwd,
        env=child_env(lake.cwd.parent / "elsewhere"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def sql(lake: Lake, statement: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The same command in this process (typer's runner): ~1.7 s less of start-up each."""
    result = CliRunner().invoke(
        app,
        ["sql", statement, "--db", lake.db, *extra],
        env={"JURYFLOW_DATA_PATH": str(lake.cwd.parent / "elsewhere"), "COLUMNS": "200"},
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["juryflow", "sql"], result.exit_code, result.stdout, result.stderr
    )


def csv_rows(lake: Lake, statement: str, *extra: str, process: bool = False) -> list[list[str]]:
    result = (sql_process if process else sql)(lake, statement, "--format", "csv", *extra)
    assert result.returncode == 0, result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))


def refused_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def snapshot_count(lake: Lake) -> int:
    with Store(lake.db).read() as con:
        row = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()
    assert row is not None
    return int(row[0])


# -- reading works ------------------------------------------------------------------------


@pytest.mark.slow
def test_tables_views_and_duckdb_statements_read_the_lake(lake: Lake) -> None:
    assert csv_rows(lake, "SELECT count(*) AS n FROM judgments", process=True) == [
        ["n"],
        ["180"],
    ]
    rows = csv_rows(lake, "SELECT judge_id FROM judge_accuracy ORDER BY judge_id")
    assert rows == [["judge_id"], ["consensus"], ["content"], ["names"], ["numbers"]]
    rows = csv_rows(lake, "WITH d AS (SELECT * FROM item_disagreement) SELECT count(*) AS n FROM d")
    assert rows == [["n"], ["60"]]
    assert "score_median" in {r[1] for r in csv_rows(lake, "PRAGMA table_info('consensus')")}
    assert {"judgments", "judge_bias"} <= {r[0] for r in csv_rows(lake, "SHOW TABLES")}
    assert len(csv_rows(lake, "SUMMARIZE consensus")) > 1
    assert csv_rows(lake, "EXPLAIN SELECT * FROM item_disagreement")[0][0] == "explain_key"


def test_duckdb_s_read_only_lake_functions_and_time_travel_work(lake: Lake) -> None:
    snapshots = csv_rows(lake, "SELECT max(snapshot_id) AS s FROM lake.snapshots()")
    latest = int(snapshots[1][0])
    assert latest > 1
    current = csv_rows(lake, "SELECT id FROM lake.current_snapshot() t(id)")
    assert int(current[1][0]) == latest
    assert csv_rows(lake, "SELECT value FROM lake.options() WHERE option_name = 'data_path'")[1][
        0
    ].startswith(str(lake.data))
    changes = csv_rows(
        lake,
        f"SELECT count(*) AS n FROM ducklake_table_changes('lake', 'main', 'runs', 0, {latest})",
    )
    assert int(changes[1][0]) >= 1
    # before the run's judgments were written, as a query of DuckDB's own syntax
    assert csv_rows(lake, "SELECT count(*) AS n FROM judgments AT (VERSION => 1)") == [
        ["n"],
        ["0"],
    ]


def test_the_lake_s_own_parquet_files_can_be_read(lake: Lake) -> None:
    rows = csv_rows(lake, f"SELECT count(*) AS n FROM read_parquet('{lake.data}/**/*.parquet')")
    assert int(rows[1][0]) > 0


# -- what a lake adds to the attacks ------------------------------------------------------

LAKE_ATTACKS = {
    # issue 44, point 9: the catalog named in a string answered its tables' columns
    "the catalog in a string": (
        "SELECT * FROM pragma_table_info('__ducklake_metadata_lake.ducklake_table')",
        "__ducklake_metadata_lake.ducklake_table refused",
    ),
    "postgres_query": (
        "SELECT * FROM postgres_query('__ducklake_metadata_lake', 'SELECT current_user')",
        "postgres_query() refused",
    ),
    "postgres_scan in a CTE": (
        "WITH t AS (SELECT * FROM postgres_scan('host=127.0.0.1', 'public', 'x')) FROM t",
        "postgres_scan() refused",
    ),
    "postgres_execute in a subquery": (
        "SELECT 1 WHERE EXISTS (SELECT * FROM postgres_execute('__ducklake_metadata_lake', "
        "'DROP TABLE ducklake_snapshot'))",
        "postgres_execute() refused",
    ),
    "metadata table": (
        "SELECT * FROM __ducklake_metadata_lake.ducklake_snapshot",
        "__ducklake_metadata_lake refused",
    ),
    "metadata table, three parts": (
        "SELECT * FROM __ducklake_metadata_lake.public.ducklake_snapshot",
        "__ducklake_metadata_lake refused",
    ),
    "summarize the metadata": (
        "SUMMARIZE __ducklake_metadata_lake.ducklake_snapshot",
        "__ducklake_metadata_lake refused",
    ),
    "metadata in a union": (
        "SELECT 1 UNION ALL SELECT count(*) FROM __DUCKLAKE_METADATA_LAKE.ducklake_data_file",
        "__DUCKLAKE_METADATA_LAKE refused",
    ),
    "query() hides SQL in a string": (
        "SELECT * FROM query('SELECT * FROM __ducklake_metadata_lake.ducklake_snapshot')",
        "query() refused",
    ),
    "query_table() hides a name in a string": (
        "SELECT * FROM query_table('__ducklake_metadata_lake.ducklake_snapshot')",
        "query_table() refused",
    ),
    "a DuckLake function that writes": (
        "SELECT * FROM ducklake_expire_snapshots('lake', versions => [1])",
        "ducklake_expire_snapshots() refused",
    ),
    "the lake's own form of it": (
        "SELECT * FROM lake.set_commit_message('me', 'hello')",
        "set_commit_message() refused",
    ),
    "unqualified, as DuckLake also registers it": (
        "SELECT * FROM set_commit_message('me', 'hello')",
        "set_commit_message() refused",
    ),
    "in the lake's schema": (
        "FROM main.set_commit_message('me', 'hello')",
        "set_commit_message() refused",
    ),
    "explain analyze": (
        "EXPLAIN ANALYZE SELECT * FROM postgres_query('__ducklake_metadata_lake', 'SELECT 1')",
        "postgres_query() refused",
    ),
    "attach": ("ATTACH 'ducklake:postgres:dbname=postgres' AS other", "ATTACH refused"),
    "insert": ("INSERT INTO runs (run_id) VALUES ('forged')", "INSERT refused"),
    "set": ("SET allowed_directories = ['/']", "SET refused"),
    "detach": ("DETACH __ducklake_metadata_lake", "DETACH refused"),
    "call": ("CALL ducklake_expire_snapshots('lake', versions => [1])", "CALL refused"),
}


@pytest.mark.parametrize("name", list(LAKE_ATTACKS))
def test_what_reaches_past_the_lake_is_refused_in_one_line(lake: Lake, name: str) -> None:
    statement, says = LAKE_ATTACKS[name]
    before = snapshot_count(lake)
    line = refused_line(sql(lake, statement))
    assert says in line, line
    assert "(nothing ran)" in line and "it runs SELECT" in line
    assert "juryflow" not in line.split("refused")[0]  # PostgreSQL's user was not queried
    assert snapshot_count(lake) == before
    assert list(lake.cwd.iterdir()) == []


def test_a_refusal_from_the_command_line_is_one_line(lake: Lake) -> None:
    statement = "SELECT * FROM postgres_query('__ducklake_metadata_lake', 'SELECT current_user')"
    line = refused_line(sql_process(lake, statement))
    assert line.startswith("error: postgres_query() refused: juryflow sql reads a lake")


@pytest.mark.parametrize(
    "where",
    ["/etc/hostname", "{outside}/secret.parquet", "{data}/../outside/secret.parquet"],
)
def test_files_outside_the_lake_s_data_directory_are_refused(lake: Lake, where: str) -> None:
    path = where.format(outside=lake.outside, data=lake.data)
    line = refused_line(sql(lake, f"SELECT * FROM read_parquet('{path}')"))
    assert "reads only the store; file, network and extension access is off" in line
    assert "secret" not in line.split("(")[0]


def test_the_connection_holds_without_the_statement_check(lake: Lake) -> None:
    """Defence in depth: DuckDB's sandbox on the lake's connection, statement check bypassed."""
    target = resolve_target(lake.db)
    assert isinstance(target, LakeTarget)
    with confined_connection(target) as con:
        for statement in (
            f"SELECT * FROM read_parquet('{lake.outside}/secret.parquet')",
            f"COPY (SELECT 1) TO '{lake.outside}/x.csv'",
            "INSERT INTO runs (run_id) VALUES ('forged')",
            "SET allowed_directories = ['/']",
            "SET enable_external_access = true",
            "ATTACH 'ducklake:postgres:dbname=postgres' AS other",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(statement)
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN "
                "('allowed_directories', 'enable_external_access', 'lock_configuration')"
            ).fetchall()
        )
    assert settings == {
        "allowed_directories": f"[{lake.data}/]",
        "enable_external_access": "false",
        "lock_configuration": "true",
    }
    assert list(lake.outside.iterdir()) == [lake.outside / "secret.parquet"]


# -- --at-run ------------------------------------------------------------------------------


def _record(run_id: str, status: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        kind="evaluate",
        suite="at-run",
        status=status,
        started_at=datetime.now(UTC),
        finished_at=None,
        dataset=None,
        panel_name="copied",
        panel={},
        prompts=[],
        quorum=2,
        n_judges=3,
    )


@pytest.fixture(scope="module")
def later(lake: Lake) -> str:
    """A second completed run written after the first: 180 more judgments."""
    store = Store(lake.db)
    run_id = "zz-later-run"
    store.create_run(_record(run_id, "running"))
    store.copy_run_rows(lake.first_run, run_id)
    store.finish_run(run_id, "completed")
    return run_id


def test_at_run_reads_the_lake_as_the_run_left_it(lake: Lake, later: str) -> None:
    counts = "SELECT (FROM runs SELECT count(*)) AS runs, (FROM judgments SELECT count(*)) AS j"
    assert csv_rows(lake, counts) == [["runs", "j"], ["2", "360"]]
    at_first = csv_rows(lake, counts, "--at-run", lake.first_run, process=True)
    assert at_first == [["runs", "j"], ["1", "180"]]
    # a unique prefix names the run, as everywhere
    assert csv_rows(lake, counts, "--at-run", later[:5]) == [["runs", "j"], ["2", "360"]]
    # views read the past too
    at_first = csv_rows(
        lake, "SELECT count(DISTINCT run_id) AS n FROM item_disagreement", "--at-run", later
    )
    assert at_first == [["n"], ["2"]]
    at_first = csv_rows(
        lake,
        "SELECT count(DISTINCT run_id) AS n FROM item_disagreement",
        "--at-run",
        lake.first_run,
    )
    assert at_first == [["n"], ["1"]]
    # and the confinement holds there
    line = refused_line(
        sql(lake, "FROM __ducklake_metadata_lake.ducklake_snapshot", "--at-run", later)
    )
    assert "__ducklake_metadata_lake refused" in line


def test_at_run_on_a_duckdb_file_is_one_line(lake: Lake, tmp_path: Path) -> None:
    line = refused_line(
        sql(replace(lake, db=str(tmp_path / "x.duckdb")), "SELECT 1", "--at-run", "a")
    )
    assert "--at-run reads a DuckLake snapshot; a DuckDB file keeps none" in line
    assert "--db ducklake:" in line


def test_at_run_names_runs_without_a_snapshot_and_unknown_runs(lake: Lake, later: str) -> None:
    store = Store(lake.db)
    store.create_run(_record("zz-still-running", "running"))
    store.create_run(_record("zz-old-completed", "completed"))
    line = refused_line(sql(lake, "SELECT 1", "--at-run", "zz-still-running"))
    assert "run zz-still-running is running" in line and "when it completes" in line
    line = refused_line(sql(lake, "SELECT 1", "--at-run", "zz-old-completed"))
    assert "completed before runs recorded their snapshot" in line
    assert "AT (VERSION => n)" in line
    line = refused_line(sql(lake, "SELECT 1", "--at-run", "no-such-run"))
    assert "no run 'no-such-run'" in line
    line = refused_line(sql(lake, "SELECT 1", "--at-run", "zz-"))
    assert "ambiguous" in line


def test_at_run_of_an_expired_snapshot_says_so(pg_server: PgServer, tmp_path: Path) -> None:
    dsn = pg_server.create_database(f"lake_sql_expired_{os.getpid()}_{next(_databases)}")
    db = f"ducklake:postgres:{dsn}"
    store = Store(db, str(tmp_path / "data"))
    store.migrate()
    store.create_run(_record("expired-run", "running"))
    store.finish_run("expired-run", "completed")
    store.create_run(_record("next-run", "running"))
    snapshot = store.query("SELECT finished_snapshot FROM runs WHERE run_id = 'expired-run'")[1]
    (expired,) = snapshot[0]
    assert expired is not None
    # as compaction of a juryflow that did not keep runs' snapshots, or by hand
    store.transact(
        lambda con: con.execute(
            "CALL ducklake_expire_snapshots('lake', versions => ?)", [[int(expired)]]
        ),
        "expire",
    )
    lake = Lake(db, tmp_path / "data", tmp_path, tmp_path, "expired-run")
    line = refused_line(sql(lake, "SELECT count(*) FROM runs", "--at-run", "expired-run"))
    assert f"run expired-run finished at snapshot {expired}" in line
    assert "which compaction has since expired" in line and "without --at-run" in line
    # the lake itself still reads
    assert csv_rows(lake, "SELECT count(*) AS n FROM runs") == [["n"], ["2"]]
    close_lakes()


def test_a_snapshot_reads_in_process_too(lake: Lake, later: str) -> None:
    """run_confined's ``snapshot`` is DuckLake's SNAPSHOT_VERSION: the catalog as it was."""
    from juryflow.storage.sql_guard import run_confined

    target = resolve_target(lake.db)
    assert isinstance(target, LakeTarget)
    con = open_lake(replace(target, data_path=None), read_only=True)
    try:
        now = current_snapshot(con)
    finally:
        con.close()
    _, rows = run_confined(target, "SELECT count(*) FROM judgments", snapshot=now)
    assert rows == [(360,)]


@pytest.mark.parametrize("extra", [(), ("--at-run", "abc")])
def test_a_lake_that_does_not_exist_is_not_created(tmp_path: Path, extra: tuple[str, ...]) -> None:
    """`sql` attaches read-only, --at-run's lookup too: a wrong --db creates nothing."""
    catalog = tmp_path / "none.ducklake"
    lake = Lake(f"ducklake:{catalog}", tmp_path / "data", tmp_path, tmp_path, "")
    line = refused_line(sql(lake, "SELECT 1", *extra))
    assert f"no DuckLake store at ducklake:{catalog} yet" in line
    assert "juryflow sql reads an existing lake" in line
    assert list(tmp_path.iterdir()) == []


# -- issue 29: SQL carried as data, checkpoints --------------------------------------------


def quoted(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def serialized(statement: str) -> str:
    """``statement`` run through json_execute_serialized_sql, as the attacker did: the parse
    tree of the outer query shows only a string."""
    return f"SELECT * FROM json_execute_serialized_sql(json_serialize_sql({quoted(statement)}))"


# What the attacker reached through json_execute_serialized_sql; {other} is a DSN of
# another database on the catalog's server.
ESCAPES = {
    "the catalog server's files": (
        "SELECT * FROM postgres_query('__ducklake_metadata_lake', "
        "'SELECT left(pg_read_file(''/etc/passwd''), 60) AS secret')"
    ),
    "the catalog server's password hashes": (
        "SELECT * FROM postgres_query('__ducklake_metadata_lake', "
        "'SELECT usename, passwd FROM pg_shadow')"
    ),
    "the raw catalog tables": "SELECT * FROM __ducklake_metadata_lake.ducklake_snapshot",
    "a DuckLake maintenance function": (
        "SELECT * FROM ducklake_expire_snapshots('lake', dry_run => true, older_than => now())"
    ),
    "another database on the server": (
        "SELECT * FROM postgres_scan('{other}', 'pg_catalog', 'pg_database')"
    ),
}

# The exact query of the report: it printed the catalog server's /etc/passwd.
REPORTED = (
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT * FROM "
    "postgres_query(''__ducklake_metadata_lake'', ''SELECT left(pg_read_file(''''/etc/passwd''''"
    "),60)'')'))"
)


def escape(name: str, pg_server: PgServer) -> str:
    return ESCAPES[name].format(other=pg_server.dsn("postgres"))


def leaked(result: subprocess.CompletedProcess[str]) -> bool:
    """Did the output carry anything of the server's files or catalog?"""
    shown = result.stdout + result.stderr
    return any(mark in shown for mark in ("root:", "SCRAM-SHA", "md5", "template1"))


@pytest.mark.parametrize("at_run", [False, True], ids=["now", "at-run"])
@pytest.mark.parametrize("name", list(ESCAPES))
def test_sql_carried_as_data_is_refused(
    lake: Lake, pg_server: PgServer, name: str, at_run: bool
) -> None:
    extra = ("--at-run", lake.first_run) if at_run else ()
    before = snapshot_count(lake)
    result = sql(lake, serialized(escape(name, pg_server)), *extra)
    line = refused_line(result)
    assert "json_execute_serialized_sql()" in line.split(" refused")[0], line
    assert "(nothing ran)" in line and "it runs SELECT" in line
    assert not leaked(result)
    assert snapshot_count(lake) == before
    assert list(lake.cwd.iterdir()) == []


def test_the_reported_escape_is_refused_from_the_command_line(lake: Lake) -> None:
    for extra in ((), ("--at-run", lake.first_run)):
        result = sql_process(lake, REPORTED, *extra)
        line = refused_line(result)
        assert line.startswith("error: json_execute_serialized_sql()"), line
        assert not leaked(result)


def data_files(lake: Lake) -> set[Path]:
    return {path for path in lake.data.rglob("*") if path.is_file()}


CHECKPOINTS = {
    "checkpoint()": ("SELECT * FROM checkpoint()", "checkpoint() refused"),
    "checkpoint of the lake": ("FROM checkpoint('lake')", "checkpoint() refused"),
    "force_checkpoint": ("SELECT * FROM force_checkpoint('lake')", "force_checkpoint() refused"),
    "in a subquery": ("SELECT (SELECT count(*) FROM checkpoint()) AS n", "checkpoint() refused"),
    "carried as data": (
        serialized("SELECT * FROM checkpoint()"),
        "json_execute_serialized_sql(), json_serialize_sql() refused",
    ),
}


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_a_checkpoint_is_refused_and_writes_no_file(lake: Lake, name: str) -> None:
    """A checkpoint flushed the lake's inlined rows to new Parquet files, then failed."""
    statement, says = CHECKPOINTS[name]
    before = data_files(lake)
    line = refused_line(sql(lake, statement))
    assert line.startswith(f"error: {says}: juryflow sql reads a lake"), line
    assert data_files(lake) == before


# Where DuckDB's catalogue says a function takes SQL (or a table's name) as data: by its
# name, or by a macro's definition calling query()/query_table(). Queried, not listed, so
# that a DuckDB or extension upgrade adding one is fuzzed too.
SQL_TAKERS = r"""
    SELECT DISTINCT function_name, function_type, len(parameters) AS arity
    FROM duckdb_functions()
    WHERE len(parameters) > 0
      AND (regexp_matches(function_name, 'sql|query|execute|plan')
           OR regexp_matches(coalesce(macro_definition, ''), '\bquery(_table)?\('))
    ORDER BY ALL
"""


def sql_takers(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int]]:
    return [(str(n), str(t), int(a)) for n, t, a in con.execute(SQL_TAKERS).fetchall()]


def wrappings(function: str, kind: str, arity: int, statement: str) -> Iterator[str]:
    """``statement`` handed to ``function`` every way it takes one: as text and serialized,
    in each argument (the first also naming the lake's catalog database instead)."""
    for payload in (quoted(statement), f"json_serialize_sql({quoted(statement)})"):
        firsts = [payload, quoted("__ducklake_metadata_lake")] if arity > 1 else [payload]
        for first in firsts:
            call = f"{function}({', '.join([first] + [payload] * (arity - 1))})"
            if kind == "pragma":
                yield f"PRAGMA {call}"
            elif kind in ("scalar", "macro", "aggregate"):
                yield f"SELECT {call} AS x"
            else:
                yield f"SELECT * FROM {call}"


def refused_statements(pg_server: PgServer) -> list[str]:
    """Every statement the tests of this module show refused."""
    statements = [statement for statement, _ in LAKE_ATTACKS.values()]
    statements += [escape(name, pg_server) for name in ESCAPES]
    statements += [serialized(escape(name, pg_server)) for name in ESCAPES]
    statements += [statement for statement, _ in CHECKPOINTS.values()]
    return [*statements, REPORTED]


def test_every_refused_statement_stays_refused_inside_every_sql_taking_function(
    lake: Lake, pg_server: PgServer
) -> None:
    from juryflow.storage.sql_guard import SqlRefused, check_statements

    target = resolve_target(lake.db)
    assert isinstance(target, LakeTarget)
    with confined_connection(target) as con:
        takers = sql_takers(con)
        names = {name for name, _, _ in takers}
        # what the report used, and what the catalogue must keep listing for this to fuzz
        assert {"query", "query_table", "json_execute_serialized_sql"} <= names, names
        assert {"postgres_query", "postgres_execute"} <= names, names
        checked: set[str] = set()
        for statement in refused_statements(pg_server):
            for function, kind, arity in takers:
                for wrapped in wrappings(function, kind, arity, statement):
                    try:
                        con.extract_statements(wrapped)
                    except duckdb.Error:
                        continue  # DuckDB cannot even parse it (a PRAGMA of bad JSON): no run
                    with pytest.raises(SqlRefused) as refused:
                        check_statements(con, wrapped, lake=True)
                    if kind != "pragma":  # a PRAGMA is expanded: its statement is refused
                        assert f"{function}()" in str(refused.value).split(" refused")[0]
                    checked.add(function)
    assert checked == names


def test_the_lake_s_extensions_add_no_function_under_an_allowed_name(lake: Lake) -> None:
    """The allow-list is read from a plain DuckDB; DuckLake and PostgreSQL, loaded on the
    lake's connection, must not have added an overload (with side effects, say) to it."""
    from juryflow.storage.sql_guard import allowed_functions

    listing = "FROM duckdb_functions() SELECT DISTINCT function_type, function_name, parameters"
    plain = duckdb.connect()
    try:
        core = {(t, n, str(p)) for t, n, p in plain.execute(listing).fetchall()}
    finally:
        plain.close()
    target = resolve_target(lake.db)
    assert isinstance(target, LakeTarget)
    with confined_connection(target) as con:
        added = {(t, n, str(p)) for t, n, p in con.execute(listing).fetchall()} - core
    assert {name for _, name, _ in added} >= {"postgres_query", "ducklake_snapshots"}
    expressions, tables = allowed_functions(lake=False)
    assert not {name for _, name, _ in added} & (expressions | tables)


# -- --timeout (issue 29) -------------------------------------------------------------------

# A join of 10^12 rows: it cannot finish within any timeout a test would use.
ENDLESS = "SELECT count(*) FROM range(1000000) a, range(1000000) b WHERE a.range + b.range < 0"


def test_a_query_longer_than_timeout_is_stopped(lake: Lake) -> None:
    line = refused_line(sql_process(lake, ENDLESS, "--timeout", "1"))
    assert line.startswith("error: the query ran longer than 1 s"), line
    assert "--timeout" in line.split("1 s", 1)[1]


# -- the PostgreSQL role the README gives a reader --------------------------------------------


def readme_reader_role() -> str:
    """The ```sql block of the docs' "The PostgreSQL role of a reader" (docs/reference)."""
    text = (REPO / "docs" / "reference" / "sql-views.md").read_text()
    section = text[text.index("**The PostgreSQL role of a reader.**") :]
    return section.split("```sql\n", 1)[1].split("```", 1)[0]


def psql(
    pg_server: PgServer, user: str, database: str, script: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(pg_server.bindir / "psql"), "-h", pg_server.host, "-p", str(pg_server.port),
         "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-X", "-q", "-f", "-"],
        input=script, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_readme_s_reader_role_reads_the_lake_and_nothing_else(
    lake: Lake, pg_server: PgServer
) -> None:
    database = lake.db.split("dbname=", 1)[1].split()[0]
    reader = f"juryflow_reader_{os.getpid()}"
    script = (
        readme_reader_role()
        .replace("juryflow_reader", reader)
        .replace("juryflow_writer", pg_server.user)  # who created the lake's tables
        .replace("juryflow_lake", database)
    )
    created = psql(pg_server, pg_server.user, database, script)
    assert created.returncode == 0, created.stderr
    as_reader = replace(lake, db=lake.db.replace(f"user={pg_server.user}", f"user={reader}"))
    counts = "SELECT (FROM runs SELECT count(*)) AS runs, (FROM judgments SELECT count(*)) AS j"
    assert csv_rows(as_reader, counts) == csv_rows(lake, counts)
    assert len(csv_rows(as_reader, "FROM lake.snapshots()")) > 2
    for attempt, says in (
        ("SELECT pg_read_file('/etc/passwd');", "permission denied for function pg_read_file"),
        ("SELECT passwd FROM pg_shadow;", "permission denied"),
        ("DELETE FROM ducklake_snapshot;", "read-only transaction"),
        ("CREATE TEMP TABLE t (a int);", "read-only transaction"),
    ):
        refused = psql(pg_server, reader, database, attempt)
        assert refused.returncode != 0 and says in refused.stderr, (attempt, refused.stderr)
    other = psql(pg_server, reader, "postgres", "SELECT 1;")
    assert other.returncode != 0 and "permission denied for database" in other.stderr


def test_sql_on_a_lake_has_the_file_store_s_memory_limit(lake: Lake, tmp_path: Path) -> None:
    """Issue 44, point 8: a lake's `sql` ran with DuckDB's 80 % of the machine (18.8 GiB),
    a file's with the store's 256 MB; a 30 M-row DISTINCT took 1.47 GB on the lake."""
    statement = "SELECT current_setting('memory_limit')"
    on_lake = csv_rows(lake, statement)[1:]
    file_store = tmp_path / "file.duckdb"
    Store(file_store).migrate()
    result = CliRunner().invoke(
        app, ["sql", statement, "--db", str(file_store), "--format", "csv"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    on_file = list(csv.reader(io.StringIO(result.stdout)))[1:]
    assert on_lake == on_file and "GiB" not in on_lake[0][0], (on_lake, on_file)
    # ... and it holds: a query that needs more than that is stopped, not served.
    line = refused_line(sql(lake, "SELECT count(DISTINCT i) FROM range(30000000) t(i)"))
    assert "memory" in line.lower(), line
