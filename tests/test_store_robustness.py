"""Issue 10, "store robustness": a file that is not a juryflow store this version can use,
a path juryflow cannot write, and a journal naming a judge the run does not have.

Each case used to end in a traceback (or, for a foreign DuckDB file, in juryflow's tables
silently added to it, or, for the journal, in a resume that failed after paying for the
calls of a whole chunk, every time). Real files throughout: an SQLite database made with
the sqlite3 module, DuckDB files made with duckdb, stores made by juryflow and then bumped,
cut or damaged. Tests may run as root, where chmod stops nothing: unwritable paths are
under /proc or under a regular file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.storage.connection import StoreError
from juryflow.storage.journal import journal_path
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

runner = CliRunner()

NOT_DUCKDB = "is not a DuckDB file; pass --db a juryflow store or a new path"


def _fails_in_one_line(args: list[str], *needles: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    flat = " ".join(result.output.split())
    for needle in needles:
        assert " ".join(needle.split()) in flat, result.output
    return flat


def _tables(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    return [str(r[0]) for r in rows]


# Commands that use the store as a juryflow store; `run`, `regression` and `reaggregate`
# check it before Prefect starts. `juryflow sql` is left out: read-only and confined, it is
# how one looks into a file juryflow refuses (it still refuses what is not DuckDB at all).
def _commands(db: Path, tmp_path: Path) -> list[list[str]]:
    return [
        ["run", "--db", str(db)],
        ["agreement", "--db", str(db)],
        ["disagreements", "--db", str(db)],
        ["report", "--db", str(db), "-o", str(tmp_path / "r.html")],
        ["reaggregate", "some-run", "--db", str(db)],
        ["regression", "--db", str(db)],
    ]


# -- files that are not DuckDB ------------------------------------------------------------


def _sqlite_file(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.execute("INSERT INTO runs VALUES ('x')")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    "make",
    [
        _sqlite_file,
        lambda p: p.write_text("id,response\n1,hello\n", encoding="utf-8") and p,
        lambda p: p.write_bytes(b"") is not None and p,
        lambda p: p.write_bytes(os.urandom(5000)) and p,
    ],
    ids=["sqlite", "csv", "empty", "random-bytes"],
)
def test_a_file_that_is_not_duckdb_gets_one_line(tmp_path: Path, make: object) -> None:
    assert callable(make)
    db = make(tmp_path / "store.duckdb")
    before = db.read_bytes()
    for args in [*_commands(db, tmp_path), ["sql", "SELECT 1", "--db", str(db)]]:
        out = _fails_in_one_line(args, f"{db} {NOT_DUCKDB}")
        # No download attempt: DuckDB answers an SQLite file by fetching its extension.
        assert "extension" not in out.lower()
    assert db.read_bytes() == before


# -- DuckDB files that are not juryflow stores ---------------------------------------------


def _foreign(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sales (region VARCHAR, amount DOUBLE)")
    con.execute("INSERT INTO sales VALUES ('north', 1.5)")
    con.close()
    return path


def test_a_foreign_duckdb_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = _foreign(tmp_path / "analytics.duckdb")
    for args in _commands(db, tmp_path):
        _fails_in_one_line(args, str(db), "not a juryflow store", "main.sales")
    assert _tables(db) == ["sales"], "juryflow's tables were added to someone else's file"
    with pytest.raises(StoreError, match="not a juryflow store"):
        Store(db).migrate()
    assert _tables(db) == ["sales"]


def test_a_foreign_file_with_a_conflicting_table_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE runs (id INTEGER)")
    con.close()
    _fails_in_one_line(["agreement", "--db", str(db)], "not a juryflow store")
    assert _tables(db) == ["runs"]


def test_an_empty_duckdb_file_becomes_a_store(tmp_path: Path) -> None:
    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    _fails_in_one_line(["agreement", "--db", str(db)], "no run in")  # the store, now made
    assert "runs" in _tables(db) and "schema_version" in _tables(db)
    assert Store(db).migrate() == LATEST_VERSION


@pytest.mark.parametrize("format_", ["table", "csv", "json"])
def test_runs_lists_none_on_an_empty_duckdb_file(tmp_path: Path, format_: str) -> None:
    # A file DuckDB made but no run gave tables (made by hand, or a run stopped at once)
    # has no runs yet; it was a raw "CatalogException ... runs does not exist" line.
    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    result = CliRunner().invoke(app, ["runs", "--db", str(db), "--format", format_])
    assert result.exit_code == 0, result.output
    assert "Exception" not in result.output and "Traceback" not in result.output
    if format_ == "table":
        assert "no runs yet" in result.output
    if format_ == "json":
        assert json.loads(result.output) == []


# -- juryflow stores this version cannot use ------------------------------------------------


def _store(path: Path) -> Path:
    Store(path).migrate()
    return path


def test_a_store_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = _store(tmp_path / "newer.duckdb")
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version (version) VALUES (?)", [LATEST_VERSION + 3])
    con.close()
    for args in _commands(db, tmp_path):
        _fails_in_one_line(args, str(db), f"schema version {LATEST_VERSION + 3}", "upgrade")
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (
        LATEST_VERSION + 3,
    )
    con.close()


def test_a_store_with_a_dropped_table_is_refused(tmp_path: Path) -> None:
    db = _store(tmp_path / "cut.duckdb")
    con = duckdb.connect(str(db))
    for (view,) in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal"
    ).fetchall():
        con.execute(f'DROP VIEW IF EXISTS "{view}"')
    con.execute("DROP TABLE consensus_spans")
    con.close()
    for args in _commands(db, tmp_path):
        _fails_in_one_line(args, str(db), "consensus_spans is missing")
    assert "consensus_spans" not in _tables(db)  # refused, not silently re-created
    looked = runner.invoke(app, ["sql", "SELECT count(*) FROM runs", "--db", str(db)])
    assert looked.exit_code == 0, looked.output  # the damage can still be inspected


def test_an_older_store_is_migrated_and_its_runs_read(tmp_path: Path) -> None:
    """A version-3 store (before dataset fingerprints) opens, reads and migrates."""
    db = tmp_path / "v3.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
    for version, ddl in MIGRATIONS:
        if version <= 3:
            con.execute(ddl)
            con.execute("INSERT INTO schema_version VALUES (?, now())", [version])
    con.execute(
        "INSERT INTO runs (run_id, kind, suite, status, started_at, dataset, panel_name, panel, "
        "prompts, quorum, n_judges) VALUES ('old', 'evaluate', 's', 'completed', now(), "
        "'/d.jsonl', 'p', '{\"judges\": []}', '[]', 1, 1)"
    )
    con.close()
    old = Store(db).get_run("old")  # read-only, not migrated yet
    assert old is not None and old.dataset_fingerprint is None
    assert Store(db).migrate() == LATEST_VERSION
    migrated = Store(db).get_run("old")
    assert migrated is not None and migrated.dataset_fingerprint is None


# -- paths juryflow cannot write -------------------------------------------------------------


def test_an_unwritable_db_path_gets_one_line(tmp_path: Path) -> None:
    regular = tmp_path / "plain.txt"
    regular.write_text("x", encoding="utf-8")
    directory = tmp_path / "a-directory"
    directory.mkdir()
    for db, needle in (
        ("/proc/juryflow-test.duckdb", "cannot write the store"),
        (str(regular / "store.duckdb"), "is not a directory"),
        (str(regular / "deeper" / "store.duckdb"), "is not a directory"),
        (str(directory), "is a directory"),
    ):
        _fails_in_one_line(["run", "--db", db], db, needle)
    assert regular.read_text(encoding="utf-8") == "x"
    assert list(directory.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _fails_in_one_line(["run", "--db", str(locked / "s.duckdb")], "cannot write the store")
        _fails_in_one_line(
            ["report", "--db", str(_store(tmp_path / "s.duckdb")), "-o", str(locked / "r.html")],
            "cannot write",
        )
    finally:
        locked.chmod(0o700)


def test_an_unwritable_report_path_gets_one_line(tmp_path: Path) -> None:
    db = _store(tmp_path / "s.duckdb")
    regular = tmp_path / "plain.txt"
    regular.write_text("x", encoding="utf-8")
    for target in (
        "/proc/juryflow-report.html",
        "/proc/missing-dir/report.html",
        str(regular / "report.html"),
        str(tmp_path),
    ):
        _fails_in_one_line(["report", "--db", str(db), "-o", target], "cannot write", target)


def test_report_makes_a_missing_directory(tmp_path: Path) -> None:
    """A missing directory that can be made is made; the run is looked up after that."""
    db = _store(tmp_path / "s.duckdb")
    target = tmp_path / "new" / "dir" / "report.html"
    _fails_in_one_line(["report", "--db", str(db), "-o", str(target)], "no run in")
    assert target.parent.is_dir()


# -- a journal naming a judge the run does not have -----------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_a_journal_entry_by_an_unknown_judge_is_set_aside(tmp_path: Path) -> None:
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(
        "\n".join(SAMPLE.read_text(encoding="utf-8").splitlines()[:6]) + "\n", encoding="utf-8"
    )
    db = tmp_path / "s.duckdb"
    result = runner.invoke(app, ["run", str(dataset), "--db", str(db), "--chunk-size", "2"])
    assert result.exit_code == 0, result.output
    store = Store(db)
    run_id = store.latest_run_id()
    assert run_id is not None
    # What a run killed in its last chunk leaves: two items not yet stored, and the journal
    # of the calls it made, tampered with (or left by another panel) to name a ghost judge.
    last = [i.item_id for i in store.load_items(run_id)][-2:]
    con = duckdb.connect(str(db))
    for table in ("consensus_spans", "consensus", "judgment_spans", "judgments", "items"):
        con.execute(
            f"DELETE FROM {table} WHERE run_id = ? AND list_contains(?, item_id)", [run_id, last]
        )
    con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", [run_id])
    con.close()
    journal = journal_path(db, run_id)
    journal.parent.mkdir(parents=True, exist_ok=True)
    known = {
        "item_id": last[0], "judge_id": "numbers", "output_kind": "spans", "score": 0.0,
        "spans": [], "usage": {},
    }  # fmt: skip
    ghost = {**known, "judge_id": "ghost", "score": 1.0}
    journal.write_text(
        "\n".join(json.dumps(line) for line in (known, ghost, {**ghost, "item_id": last[1]}))
        + "\n",
        encoding="utf-8",
    )

    result = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db)])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "warning:" in flat and "'ghost' (2)" in flat and "cannot be used" in flat
    _, rows = store.query(
        "SELECT count(*) FILTER (WHERE judge_id = 'ghost'), count(DISTINCT item_id) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert rows == [(0, 6)]
    assert len(store.consensus_item_ids(run_id)) == 6
    run = store.get_run(run_id)
    assert run is not None and run.status == "completed"
    aside = journal.with_name(f"{run_id}.unknown-judges.jsonl")
    assert [json.loads(line)["judge_id"] for line in aside.read_text().splitlines()] == [
        "ghost",
        "ghost",
    ]


def test_a_store_deleted_and_made_again_between_check_and_connect_is_gone(
    tmp_path: Path,
) -> None:
    # The race a loaded machine hit: the file checked to exist, deleted, then DuckDB's
    # connect made a new, empty file there; writes failed on tables it does not have
    # ("Table with name items does not exist!") with a traceback, instead of one line.
    db = tmp_path / "store.duckdb"
    store = Store(db)
    store.migrate()
    with store.read():  # a run opens its store again and again after making it
        pass
    db.unlink()
    duckdb.connect(str(db)).close()  # what the connect after the check would have made
    with (
        pytest.raises(StoreError, match="is gone: it was deleted or moved while in use"),
        store.read(),
    ):
        pass


def test_a_ctrl_c_a_library_wrapped_in_its_own_error_ends_as_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prefect serialises the flow run's parameters with pydantic, which turns a
    # KeyboardInterrupt raised inside into "Error calling function `_ser_model`:
    # KeyboardInterrupt" (a ValueError): it was reported as a failure, exit 2.
    import threading

    import juryflow.runner
    from juryflow.flows.runtime import interrupts

    def wrapped(*_: object, **__: object) -> None:
        raise ValueError("Error calling function `_ser_model`: KeyboardInterrupt: ")

    seen = threading.Event()
    seen.set()
    monkeypatch.setattr(interrupts, "_SIGINT_SEEN", seen)
    monkeypatch.setattr(juryflow.runner, "run_evaluation", wrapped)
    result = CliRunner().invoke(
        app, ["run", str(SAMPLE), "--db", str(tmp_path / "s.duckdb"), "--limit", "2"]
    )
    assert result.exit_code == 130, result.output
    assert "interrupted (SIGINT)" in result.output and "_ser_model" not in result.output
    monkeypatch.setattr(interrupts, "_SIGINT_SEEN", threading.Event())
    result = CliRunner().invoke(
        app, ["run", str(SAMPLE), "--db", str(tmp_path / "s.duckdb"), "--limit", "2"]
    )
    assert result.exit_code == 2 and "_ser_model" in result.output  # no Ctrl-C: an error
