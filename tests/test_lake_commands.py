"""Every command on a DuckLake store, as on a DuckDB file; and what shards refuse.

The lake's catalog is a real PostgreSQL (tests/pg_server.py); one offline run fills it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.storage.connection import close_lakes
from juryflow.storage.store import Store
from tests.pg_server import PgServer, pg_server
from tests.prefect_server import shared_prefect_api

# the fixtures, imported so that pytest finds them here
__all__ = ["pg_server", "shared_prefect_api"]
pytestmark = pytest.mark.usefixtures("shared_prefect_api")

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def child_env(data: Path) -> dict[str, str]:
    env = dict(os.environ)  # PREFECT_API_URL: the module's one server
    env["JURYFLOW_DATA_PATH"] = str(data)
    env["JURYFLOW_JOURNAL_DIR"] = str(data.parent / "journals")
    return env


def juryflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def lake(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A lake holding one completed offline run (60 items x 3 judges)."""
    dsn = pg_server.create_database(f"commands_{os.getpid()}")
    data = tmp_path_factory.mktemp("lake") / "data"
    db = f"ducklake:postgres:{dsn}"
    juryflow(child_env(data), "run", "--db", db)
    yield db
    close_lakes()


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_runs_agreement_disagreements_calibrate_on_a_lake(lake: str) -> None:
    assert "completed" in cli("runs", "--db", lake, "--format", "csv")
    report = json.loads(cli("agreement", "--db", lake, "--format", "json"))
    assert report["n_items"] == 60 and len(report["judges"]) == 3
    assert "disagreement" in cli("disagreements", "--db", lake)
    assert "apply it" in cli("calibrate", "--db", lake, "--name", "lake-fit")


def test_export_and_report_from_a_lake(lake: str, tmp_path: Path) -> None:
    run_id = Store(lake).latest_run_id()
    assert run_id is not None
    cli("export", run_id, "--db", lake, "-o", str(tmp_path / "rows.jsonl"), "--format", "jsonl")
    lines = (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 180
    cli("report", run_id, "--db", lake, "-o", str(tmp_path / "report.html"))
    assert "<html" in (tmp_path / "report.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_regression_and_reaggregate_write_new_runs_into_the_lake(lake: str, tmp_path: Path) -> None:
    # the lake exists: its data path is in its catalog, and no other may be given
    env = child_env(tmp_path / "unused")
    del env["JURYFLOW_DATA_PATH"]
    run_id = Store(lake).latest_run_id(status="completed")
    assert run_id is not None
    juryflow(env, "reaggregate", run_id, "--db", lake, "--consensus", "score=mean")
    juryflow(env, "regression", "--db", lake)
    kinds = Store(lake).query("SELECT kind, status FROM runs ORDER BY started_at")[1]
    assert [kind for kind, _ in kinds][-2:] == ["reaggregate", "evaluate"]
    assert all(status == "completed" for _, status in kinds)


def test_another_data_path_for_an_existing_lake_is_refused(lake: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", "runs", "--db", lake],
        env=child_env(tmp_path / "elsewhere"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "does not match existing data path" in done.stderr
    assert "check --db and --data-path" in done.stderr


def test_a_completed_run_records_its_snapshot(lake: str) -> None:
    rows = Store(lake).query(
        "SELECT r.finished_snapshot, s.commit_message FROM runs r "
        "JOIN ducklake_snapshots('lake') s ON s.snapshot_id = r.finished_snapshot "
        "WHERE r.kind = 'evaluate' ORDER BY r.started_at LIMIT 1"
    )[1]
    assert len(rows) == 1 and str(rows[0][1]).endswith("completed")


# -- what sharded runs refuse (a DuckDB file takes shards too: one host, file locks) -------


def refused(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def test_shard_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    assert "--shard needs --run-id" in refused("run", "--db", db, "--shard", "1/2")
    assert "give --shard I/N with it" in refused("run", "--db", db, "--run-id", "r")
    assert "give I/N with 1 <= I <= N" in refused(
        "run", "--db", db, "--shard", "3/2", "--run-id", "r"
    )
    assert "use up to 100 letters" in refused(
        "run", "--db", db, "--shard", "1/2", "--run-id", "a b"
    )
    assert "drop --resume" in refused(
        "run", "--db", db, "--shard", "1/2", "--run-id", "r", "--resume", "x"
    )
    assert "--data-path is for a DuckLake store" in refused(
        "run", "--db", db, "--data-path", str(tmp_path)
    )
    assert not Path(db).exists()


@pytest.mark.slow
def test_shards_of_one_run_must_agree_and_finish_names_what_is_left(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    env = child_env(tmp_path / "unused")
    juryflow(env, "run", "--db", db, "--shard", "1/2", "--run-id", "r")
    assert Store(db).query("SELECT status FROM runs")[1] == [("running",)]
    message = refused("finish", "r", "--db", db)
    assert "shard 2/2 not finished" in message and "--run-id r" in message
    assert "continues shard by shard" in refused("run", "--db", db, "--resume", "r")
    assert "it was started with 2 shards" in refused(
        "run", "--db", db, "--shard", "1/3", "--run-id", "r"
    )
    assert "--limit differs" in refused(
        "run", "--db", db, "--shard", "2/2", "--run-id", "r", "--limit", "5"
    )
    # Shard 2 claimed by a process on another machine, which cannot be checked: its claim
    # holds while it is renewed, and lapses JURYFLOW_SHARD_LEASE_SECONDS after the last.
    with duckdb.connect(db) as con:
        con.execute(
            "UPDATE run_shards SET owner = 'elsewhere:42', claimed_at = now() - INTERVAL 1 HOUR,"
            " renewed_at = now() - INTERVAL 5 MINUTE WHERE shard = 2"
        )
    message = refused("run", "--db", db, "--shard", "2/2", "--run-id", "r")
    assert "is being judged by elsewhere:42 (claim last renewed at" in message
    assert "once that claim is 600 s old (JURYFLOW_SHARD_LEASE_SECONDS)" in message
    assert "or now with --take-over" in message
    bad = runner.invoke(
        app,
        ["run", "--db", db, "--shard", "2/2", "--run-id", "r"],
        env={"JURYFLOW_SHARD_LEASE_SECONDS": "soon"},
    )
    assert bad.exit_code == 2 and "JURYFLOW_SHARD_LEASE_SECONDS='soon': give the seconds" in (
        " ".join(bad.output.split())
    )
    taken = juryflow(
        {**env, "JURYFLOW_SHARD_LEASE_SECONDS": "120"},
        "run", "--db", db, "--shard", "2/2", "--run-id", "r",
    )  # fmt: skip
    assert "shard 2/2 of run r: taken over from elsewhere:42, which last renewed its claim" in (
        " ".join(taken.stderr.split())
    )
    assert Store(db).query("SELECT status, count(*) FROM runs GROUP BY ALL")[1] == [
        ("completed", 1)
    ]
    assert "completed; 2 shards finished, 60 items, 180 judgments" in cli("finish", "r", "--db", db)
    # a finished shard run again stores nothing twice
    juryflow(env, "run", "--db", db, "--shard", "2/2", "--run-id", "r")
    assert Store(db).query("SELECT count(*) FROM judgments")[1] == [(180,)]


def test_the_viewer_browses_and_annotates_a_lake(lake: str) -> None:
    import httpx

    from juryflow.viewer.server import start_in_thread
    from juryflow.viewer.state import ViewerState

    store = Store(lake)
    run_id = store.query("SELECT min(run_id) FROM runs WHERE kind = 'evaluate'")[1][0][0]
    running = start_in_thread(ViewerState(store, "lake-reviewer"))
    try:
        with httpx.Client(base_url=running.url, timeout=30) as client:
            assert client.get("/").status_code == 200
            assert client.get(f"/runs/{run_id}").status_code == 200
            items = client.get(f"/runs/{run_id}/items")
            assert items.status_code == 200 and "/item?id=" in items.text
    finally:
        running.stop()
    from juryflow.storage.annotations import NewAnnotation, save_annotation

    # an item without consensus spans: an annotation then decides on none
    item_id = str(
        store.query(
            "SELECT min(item_id) FROM items WHERE run_id = ? AND item_id NOT IN "
            "(SELECT item_id FROM consensus_spans WHERE run_id = ?)",
            [run_id, run_id],
        )[1][0][0]
    )

    def annotate(verdict: bool) -> NewAnnotation:
        return NewAnnotation(run_id, item_id, "lake-reviewer", (), (), verdict)

    saved = save_annotation(store, annotate(True))
    again = save_annotation(store, annotate(False))
    assert again.annotation_id == saved.annotation_id + 1


def test_reading_never_creates_a_lake(pg_server: PgServer, tmp_path: Path) -> None:
    catalog = tmp_path / "missing.ducklake"
    message = refused("runs", "--db", f"ducklake:{catalog}")
    assert "no juryflow store at ducklake:" in message and not catalog.exists()
    dsn = pg_server.create_database(f"empty_{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if k != "JURYFLOW_DATA_PATH"}
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", "agreement", "--db", f"ducklake:postgres:{dsn}"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "yet: create it with `juryflow run --db" in done.stderr
    assert "--data-path DIR" in done.stderr
