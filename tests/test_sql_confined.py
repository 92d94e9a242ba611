"""`juryflow sql` is confined to reading the store: the attacks of issue 10, point 1.

Every attack goes through the real command line (typer's runner in this process; the first
attack and the timeout also as a process of their own) against a real store made by
`juryflow run` on the bundled sample, and must end with exit code 2, one line saying
what is refused, the store byte-for-byte unchanged and no file written anywhere.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.storage.sql_guard import (
    SqlConfinementError,
    SqlRefused,
    check_statements,
    confined_connection,
)
from tests.conftest import REPO, SAMPLE


@dataclass(frozen=True)
class Scene:
    db: Path
    outside: Path  # where an attack would write or attach; must stay empty
    cwd: Path  # the command's working directory; must stay empty


@pytest.fixture(scope="module")
def scene(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    root = tmp_path_factory.mktemp("confined")
    db = root / "store" / "sample.duckdb"
    db.parent.mkdir()
    result = CliRunner().invoke(app, ["run", str(SAMPLE), "--db", str(db)])
    assert result.exit_code == 0, result.output
    (root / "outside").mkdir()
    (root / "cwd").mkdir()
    yield Scene(db=db, outside=root / "outside", cwd=root / "cwd")


def sql_process(
    scene: Scene, statement: str, *extra: str, db: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`juryflow sql` as a user runs it: a process of its own."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    store = str(db or scene.db)
    return subprocess.run(
        [sys.executable, "-m", "juryflow", "sql", statement, "--db", store, *extra],
        cwd=scene.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def sql(
    scene: Scene, statement: str, *extra: str, db: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The same command in this process (typer's runner), from the scene's working directory:
    each query opens its own confined connection, so what one attack changes cannot carry
    over to the next; ~1.5 s less of start-up each."""
    with contextlib.chdir(scene.cwd):
        result = CliRunner().invoke(
            app, ["sql", statement, "--db", str(db or scene.db), *extra], env={"COLUMNS": "200"}
        )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["juryflow", "sql"], result.exit_code, result.stdout, result.stderr
    )


def fingerprint(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def judgments_count(scene: Scene) -> int:
    with duckdb.connect(str(scene.db), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM judgments").fetchone()
    assert row is not None
    return int(row[0])


def attacks(scene: Scene) -> dict[str, str]:
    db, out = scene.db, scene.outside
    catalog = db.stem
    return {
        "attach-use-detach-delete": (
            f"ATTACH '{out / 'other.duckdb'}' AS m (READ_WRITE); USE m; DETACH {catalog}; "
            f"ATTACH '{db}' AS s (READ_WRITE); DELETE FROM s.judgments"
        ),
        "attach alone": f"ATTACH '{out / 'other.duckdb'}' AS m",
        "attach the store read-write": f"ATTACH '{db}' AS s (READ_WRITE)",
        "use": "USE memory",
        "detach": f"DETACH {catalog}",
        "copy to": f"COPY judgments TO '{out / 'judgments.csv'}'",
        "copy onto the store's own wal": (
            f"COPY (SELECT 1) TO '{db}.wal' (FORMAT csv, USE_TMP_FILE false)"
        ),
        "export database": f"EXPORT DATABASE '{out / 'export'}'",
        "install": "INSTALL httpfs",
        "force install": "FORCE INSTALL httpfs",
        "load": "LOAD httpfs",
        "set": "SET enable_external_access = true",
        "reset": "RESET lock_configuration",
        "set memory": "SET memory_limit = '8GB'",
        "pragma profiling": "PRAGMA enable_profiling",
        "pragma profiling output": f"PRAGMA profiling_output = '{out / 'profile.txt'}'",
        "pragma threads": "PRAGMA threads = 1",
        "create table": "CREATE TABLE x (a INTEGER)",
        "create temp table": "CREATE TEMP TABLE x AS SELECT 1",
        "create macro": "CREATE MACRO m(a) AS a",
        "drop view": "DROP VIEW item_disagreement",
        "delete": "DELETE FROM judgments",
        "update": "UPDATE consensus SET hallucinated = true",
        "insert": "INSERT INTO schema_version VALUES (99, now())",
        "call a file function": "CALL glob('/root/*')",
        "checkpoint": "CHECKPOINT",
        "explain analyze delete": "EXPLAIN ANALYZE DELETE FROM judgments",
        "select then delete": "SELECT 1; DELETE FROM judgments",
        "with ... insert": "WITH a AS (SELECT 1 AS x) INSERT INTO schema_version SELECT 7, now()",
    }


REFUSED_KEYWORD = {
    "attach-use-detach-delete": "ATTACH, USE, DETACH, DELETE refused",
    "use": "USE refused",
    "copy onto the store's own wal": "COPY refused",
    "export database": "EXPORT refused",
    "install": "INSTALL refused",
    "force install": "FORCE INSTALL refused",
    "load": "LOAD refused",
    "reset": "RESET refused",
    "pragma threads": "PRAGMA refused",
    "call a file function": "CALL refused",
    "explain analyze delete": "EXPLAIN DELETE refused",
    "select then delete": "DELETE refused",
    "with ... insert": "INSERT refused",
}

FILE_READS = {
    "read_text": "SELECT * FROM read_text('/etc/passwd')",
    "read_csv": "SELECT * FROM read_csv('/etc/passwd', sep = ':')",
    "read_blob": "SELECT * FROM read_blob('/etc/hostname')",
    "glob": "SELECT * FROM glob('/root/*')",
    "sniff_csv": "SELECT * FROM sniff_csv('/etc/passwd')",
}


def assert_refused_cleanly(scene: Scene, result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "name",
    list(attacks(Scene(Path("/s/store.duckdb"), Path("/o"), Path("/c")))),
)
def test_a_statement_that_writes_attaches_or_configures_is_refused(scene: Scene, name: str) -> None:
    before = fingerprint(scene.db.parent)
    count = judgments_count(scene)
    # the first attack also as a process of its own, as a user types it
    command = sql_process if name == "attach-use-detach-delete" else sql
    result = command(scene, attacks(scene)[name])
    line = assert_refused_cleanly(scene, result)
    assert "read-only and confined to the store" in line
    assert "it runs SELECT" in line and "(nothing ran)" in line
    if name in REFUSED_KEYWORD:
        assert REFUSED_KEYWORD[name] in line, line
    assert fingerprint(scene.db.parent) == before
    assert judgments_count(scene) == count == 180
    assert list(scene.outside.iterdir()) == []
    assert list(scene.cwd.iterdir()) == []


@pytest.mark.parametrize("name", list(FILE_READS))
def test_reading_a_file_other_than_the_store_is_refused(scene: Scene, name: str) -> None:
    """Refused by name before anything runs; DuckDB's sandbox refuses them too (below)."""
    result = sql(scene, FILE_READS[name])
    line = assert_refused_cleanly(scene, result)
    assert line.startswith(f"error: {name}() refused: juryflow sql reads the store"), line
    assert "(nothing ran)" in line
    assert "root:" not in result.stderr


def test_a_file_named_as_a_table_is_not_read(scene: Scene) -> None:
    """With external access off DuckDB does not turn a quoted path into a file scan."""
    result = sql(scene, "SELECT * FROM '/etc/passwd'")
    assert result.returncode == 2 and result.stdout == ""
    assert "Table with name /etc/passwd does not exist" in result.stderr
    assert "root:" not in result.stderr and "Traceback" not in result.stderr


def test_import_database_is_refused_before_its_files_are_read(scene: Scene) -> None:
    """DuckDB expands IMPORT DATABASE while *parsing*, reading schema.sql then."""
    exported = scene.cwd.parent / "to-import"
    exported.mkdir()
    (exported / "schema.sql").write_text("CREATE TABLE pwned (x INTEGER);\n")
    (exported / "load.sql").write_text("")
    before = fingerprint(scene.db.parent)
    result = sql(scene, f"IMPORT DATABASE '{exported}'")
    line = assert_refused_cleanly(scene, result)
    assert "file, network and extension access is off" in line
    assert fingerprint(scene.db.parent) == before
    tables = sql(scene, "SELECT table_name FROM duckdb_tables()", "--format", "csv")
    assert "pwned" not in tables.stdout


def test_an_empty_query_is_refused(scene: Scene) -> None:
    line = assert_refused_cleanly(scene, sql(scene, "  -- nothing here\n"))
    assert "no SQL statement given" in line


def test_a_missing_store_is_one_line(scene: Scene, tmp_path: Path) -> None:
    line = assert_refused_cleanly(scene, sql(scene, "SELECT 1", db=tmp_path / "no.db"))
    assert "no juryflow store at" in line
    assert not (tmp_path / "no.db").exists()


# -- what `sql` still does ----------------------------------------------------------


def csv_rows(scene: Scene, statement: str) -> list[list[str]]:
    result = sql(scene, statement, "--format", "csv")
    assert result.returncode == 0, result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))


def test_selects_views_and_with_queries_work(scene: Scene) -> None:
    assert csv_rows(scene, "SELECT count(*) AS n FROM judgments") == [["n"], ["180"]]
    rows = csv_rows(scene, "SELECT judge_id FROM judge_accuracy ORDER BY judge_id")
    assert rows == [["judge_id"], ["consensus"], ["content"], ["names"], ["numbers"]]
    rows = csv_rows(
        scene,
        "WITH d AS (SELECT * FROM item_disagreement) SELECT count(*) AS n FROM d",
    )
    assert rows == [["n"], ["60"]]
    assert csv_rows(scene, "FROM runs SELECT count(*) AS n") == [["n"], ["1"]]
    # several reading statements: the last one's rows, as DuckDB does
    assert csv_rows(scene, "SELECT 1 AS a; SELECT 2 AS b") == [["b"], ["2"]]


def test_describe_show_summarize_explain_and_reading_pragmas_work(scene: Scene) -> None:
    columns = [r[0] for r in csv_rows(scene, "DESCRIBE judgments")[1:]]
    assert {"run_id", "item_id", "judge_id", "score"} <= set(columns)
    tables = [r[0] for r in csv_rows(scene, "SHOW TABLES")[1:]]
    assert {"judgments", "consensus", "item_disagreement", "judge_bias"} <= set(tables)
    info = [r[1] for r in csv_rows(scene, "PRAGMA table_info('consensus')")[1:]]
    assert "score_median" in info
    assert csv_rows(scene, "PRAGMA database_size")[0][0] == "database_name"
    assert len(csv_rows(scene, "SUMMARIZE consensus")) > 1
    for statement in (
        "EXPLAIN SELECT * FROM item_disagreement",
        "EXPLAIN ANALYZE SELECT count(*) FROM judgments",
    ):
        result = sql(scene, statement, "--format", "json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)[0]["explain_key"].endswith("_plan")


# -- the two layers, each on its own ------------------------------------------------


def test_the_connection_itself_refuses_what_the_statement_check_would(scene: Scene) -> None:
    """Defence in depth: with the statement check bypassed, DuckDB's own sandbox holds."""
    outside = scene.outside
    with confined_connection(scene.db) as con:
        for statement in (
            f"ATTACH '{outside / 'other.duckdb'}' AS m (READ_WRITE)",
            f"COPY (SELECT 1) TO '{outside / 'x.csv'}'",
            f"EXPORT DATABASE '{outside / 'export'}'",
            "SELECT * FROM read_text('/etc/passwd')",
            "SELECT * FROM glob('/root/*')",
            "INSTALL httpfs",
            "LOAD httpfs",
            "SET enable_external_access = true",
            "SET allowed_directories = ['/']",
            "SET lock_configuration = false",
            "SET temp_directory = '/tmp'",
            "DELETE FROM judgments",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(statement)
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ('allowed_directories',"
                " 'allowed_paths', 'enable_external_access', 'lock_configuration',"
                " 'autoinstall_known_extensions', 'autoload_known_extensions')"
            ).fetchall()
        )
    assert settings["enable_external_access"] == "false"
    assert settings["lock_configuration"] == "true"
    assert settings["autoinstall_known_extensions"] == "false"
    assert settings["autoload_known_extensions"] == "false"
    assert settings["allowed_directories"] == "[]"
    # DuckDB itself lists the store's own files (database and WAL) and nothing else
    allowed = settings["allowed_paths"].strip("[]").split(", ")
    assert all(Path(p).name.startswith(scene.db.name) for p in allowed), allowed
    assert list(outside.iterdir()) == []


def test_the_statement_check_uses_duckdbs_parser(scene: Scene) -> None:
    with confined_connection(scene.db) as con:
        # a semicolon inside a string or a comment is not a second statement
        assert len(check_statements(con, "SELECT ';DELETE FROM judgments' AS s")) == 1
        assert len(check_statements(con, "SELECT 1 -- ; DROP TABLE judgments")) == 1
        assert len(check_statements(con, "/* ; */ EXPLAIN SELECT 1")) == 1
        with pytest.raises(SqlRefused, match="EXPLAIN COPY refused"):
            check_statements(con, "/* hidden */ EXPLAIN (FORMAT json) COPY judgments TO 'x'")
        with pytest.raises(SqlRefused, match="CREATE refused"):
            check_statements(con, "PIVOT judgments ON judge_id")  # creates a type first


# -- the allow-list of functions (issue 29) -------------------------------------------------

# What a reader writes: operators, casts, dates, lists and lambdas, structs, JSON, regular
# expressions, aggregates, window functions, DuckDB's macros (list_sum, split_part, ...),
# row generators and the catalogue.
READER_QUERY = """
WITH s AS (
    SELECT judge_id, score, item_id,
           row_number() OVER (PARTITION BY judge_id ORDER BY score DESC NULLS LAST) AS rn,
           lag(score) OVER (ORDER BY item_id) AS prev
    FROM judgments
)
SELECT judge_id,
       count(*) AS n, avg(score)::DECIMAL(6, 3) AS mean, median(score) AS med,
       quantile_cont(score, [0.25, 0.75]) AS q, string_agg(DISTINCT item_id[:3], ',') AS ids,
       list_sum(list_transform([1, 2, 3], x -> x * 2)) AS l, split_part('a,b', ',', 2) AS p,
       {'k': judge_id}.k AS st, regexp_matches(judge_id, '^[a-z]+$') AS re,
       json_extract('{"a": 1}', '$.a')::INT AS js, strftime(DATE '2026-01-02', '%Y') AS y,
       coalesce(max(prev), 0) AS mp, histogram(rn < 3) AS h,
       (SELECT count(*) FROM range(3)) AS r,
       (SELECT count(*) FROM duckdb_tables() WHERE table_name = 'judgments') AS t,
       (SELECT count(*) FROM generate_series(1, 2), unnest([1]) AS u(v)) AS g
FROM s GROUP BY ALL ORDER BY ALL
"""


def test_what_a_reader_writes_runs(scene: Scene) -> None:
    rows = csv_rows(scene, READER_QUERY)
    assert rows[0][:3] == ["judge_id", "n", "mean"]
    assert [r[0] for r in rows[1:]] == ["content", "names", "numbers"]
    assert all(r[1] == "60" and r[6] == "12" and r[7] == "b" for r in rows[1:])


def test_the_allowed_functions_come_from_duckdbs_catalogue() -> None:
    from juryflow.storage.sql_guard import allowed_functions

    expressions, tables = allowed_functions(lake=False)
    # scalars, aggregates, window functions and macros built only of them
    assert {"sum", "row_number", "strftime", "list_sum", "split_part", "histogram"} <= expressions
    # side effects, SQL carried as data, and a macro built on a side effect
    refused = {"sleep_ms", "write_log", "nextval", "json_serialize_plan", "json_serialize_sql"}
    assert not (refused | {"pg_sleep", "query", "read_text"}) & expressions
    assert {"range", "generate_series", "unnest", "duckdb_tables", "pragma_table_info"} <= tables
    refused = {"read_text", "read_csv", "glob", "query", "query_table", "checkpoint"}
    refused |= {"json_execute_serialized_sql", "duckdb_secrets", "read_parquet", "histogram"}
    assert not refused & tables
    _, lake_tables = allowed_functions(lake=True)
    assert {"read_parquet", "ducklake_snapshots", "snapshots"} <= lake_tables
    assert not {"ducklake_expire_snapshots", "set_commit_message", "checkpoint"} & lake_tables


def test_every_view_duckdb_itself_defines_calls_only_allowed_functions(scene: Scene) -> None:
    """A query may name DuckDB's own views (duckdb_tables, information_schema.columns, ...),
    whose definitions the statement check does not see."""
    from juryflow.storage.sql_guard import allowed_functions, calls_in

    expressions, tables = allowed_functions(lake=False)
    with confined_connection(scene.db) as con:
        views = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE internal").fetchall()
        assert len(views) > 20
        for name, definition in views:
            body = str(definition).split(" AS ", 1)[1]
            called = calls_in(con, body)
            assert called is not None, name
            assert {n for kind, n in called if kind == "table"} <= tables, name
            assert {n for kind, n in called if kind == "expression"} <= expressions, name


SQL_TAKERS = r"""
    SELECT DISTINCT function_name, function_type, len(parameters) AS arity
    FROM duckdb_functions()
    WHERE len(parameters) > 0
      AND (regexp_matches(function_name, 'sql|query|execute|plan')
           OR regexp_matches(coalesce(macro_definition, ''), '\bquery(_table)?\('))
    ORDER BY ALL
"""


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def test_every_refused_statement_stays_refused_inside_every_sql_taking_function(
    scene: Scene,
) -> None:
    """Each attack of this module, handed as data to each function DuckDB lists as taking
    SQL or a table's name (queried, so that an upgrade adding one is covered)."""
    statements = list(attacks(scene).values()) + list(FILE_READS.values())
    with confined_connection(scene.db) as con:
        takers = [(str(n), str(t), int(a)) for n, t, a in con.execute(SQL_TAKERS).fetchall()]
        names = {name for name, _, _ in takers}
        assert {"query", "query_table", "json_execute_serialized_sql"} <= names, names
        checked: set[str] = set()
        for statement in statements:
            for function, kind, arity in takers:
                for payload in (quoted(statement), f"json_serialize_sql({quoted(statement)})"):
                    call = f"{function}({', '.join([payload] * arity)})"
                    wrapped = {
                        "pragma": f"PRAGMA {call}",
                        "scalar": f"SELECT {call} AS x",
                        "macro": f"SELECT {call} AS x",
                    }.get(kind, f"SELECT * FROM {call}")
                    try:
                        con.extract_statements(wrapped)
                    except duckdb.Error:
                        continue  # DuckDB cannot even parse it (a PRAGMA of bad JSON): no run
                    with pytest.raises(SqlRefused) as refused:
                        check_statements(con, wrapped)
                    if kind != "pragma":  # a PRAGMA is expanded: its statement is refused
                        assert f"{function}()" in str(refused.value).split(" refused")[0]
                    checked.add(function)
    assert checked == names


# -- a link beside the store (issue 29) -----------------------------------------------------

WAL_FILES = (".wal", ".wal.checkpoint", ".wal.recovery")


@pytest.fixture
def linked(scene: Scene, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A copy of the store with ``<store>.wal.recovery`` a link to a secret outside it."""
    store = tmp_path / "store" / "linked.duckdb"
    store.parent.mkdir()
    store.write_bytes(scene.db.read_bytes())
    secret = tmp_path / "secret.txt"
    secret.write_text("top-secret,42\n")
    link = store.with_name(store.name + ".wal.recovery")
    link.symlink_to(secret)
    yield store, link


@pytest.mark.parametrize(
    "reader",
    [
        "SELECT * FROM read_text('{link}')",
        "SELECT * FROM read_csv('{link}', header = false)",
        "SELECT * FROM read_blob('{link}')",
        "SELECT * FROM read_json_objects('{link}')",
    ],
)
def test_a_link_planted_beside_the_store_is_not_read(
    scene: Scene, linked: tuple[Path, Path], reader: str
) -> None:
    """DuckDB lists the store's WAL names in allowed_paths; one may be a planted link."""
    store, link = linked
    result = sql(scene, reader.format(link=link), db=store)
    line = assert_refused_cleanly(scene, result)
    assert "top-secret" not in result.stdout + result.stderr
    assert str(link) in line and "remove it" in line, line


def test_the_connection_refuses_a_store_with_a_linked_wal_file(linked: tuple[Path, Path]) -> None:
    """Defence in depth: confined_connection itself, without the statement check."""
    store, link = linked
    with (
        pytest.raises(SqlConfinementError, match="symbolic link") as refused,
        confined_connection(store) as con,
    ):
        con.execute(f"SELECT * FROM read_text('{link}')").fetchall()
    assert str(link) in str(refused.value)
    link.unlink()
    for name in WAL_FILES:  # the same for each of the store's own names DuckDB lists
        other = store.with_name(store.name + name)
        other.symlink_to(store.parent.parent / "secret.txt")
        with (
            pytest.raises(SqlConfinementError, match="symbolic link"),
            confined_connection(store),
        ):
            pass
        other.unlink()
    with confined_connection(store) as con:  # and without one the store opens
        assert con.execute("SELECT count(*) FROM judgments").fetchone() == (180,)


def test_a_link_planted_after_opening_is_refused_by_the_statement_check(
    scene: Scene, tmp_path: Path
) -> None:
    """The link may appear once the connection is open: no query may read files at all."""
    store = tmp_path / "late.duckdb"
    store.write_bytes(scene.db.read_bytes())
    (tmp_path / "secret.txt").write_text("top-secret\n")
    with confined_connection(store) as con:
        link = store.with_name(store.name + ".wal.recovery")
        link.symlink_to(tmp_path / "secret.txt")
        for function in ("read_text", "read_csv", "read_blob", "glob"):
            with pytest.raises(SqlRefused, match=f"{function}\\(\\) refused"):
                check_statements(con, f"SELECT * FROM {function}('{link}')")


# -- --timeout (issue 29) -------------------------------------------------------------------

# A join of 10^12 rows: it cannot finish within any timeout a test would use.
ENDLESS = "SELECT count(*) FROM range(1000000) a, range(1000000) b WHERE a.range + b.range < 0"


def test_a_query_longer_than_timeout_is_stopped(scene: Scene) -> None:
    result = sql_process(scene, ENDLESS, "--timeout", "1")
    line = assert_refused_cleanly(scene, result)
    assert line.startswith("error: the query ran longer than 1 s"), line
    assert "--timeout" in line.split("1 s", 1)[1]


def test_a_query_within_its_timeout_runs(scene: Scene) -> None:
    result = sql(scene, "SELECT count(*) AS n FROM judgments", "--timeout", "60", "-f", "csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["n", "180"]
