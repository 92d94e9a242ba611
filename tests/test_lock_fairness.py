"""A reader never makes a run fail (issue 10, point 7).

Before the fix, a `juryflow sql` read that held the store for over 60 s made the run's next
chunk write fail with StoreLockedError (a 45-line traceback), left `runs.status = running`,
and let another chunk land after the flow had ended Failed. The deadline is shortened here
with JURYFLOW_LOCK_WAIT_SECONDS so that a 10 s hold outlasts it.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest

from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.connection import (
    Patience,
    StoreLockedError,
    connect,
    lock_wait_seconds,
    patient_waits,
)
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset
from tests.test_resume import child_env

READER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from juryflow.storage.connection import connect

    # what a long `juryflow sql` read does: a read-only connection held for its duration
    with connect(Path(sys.argv[1]), read_only=True) as con:
        con.execute("SELECT count(*) FROM judgments").fetchall()
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
    print("released", flush=True)
    """
)


def hold(db: Path, seconds: float) -> subprocess.Popen[str]:
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None and reader.stdout.readline().strip() == "holding"
    return reader


def test_patient_waits_outlast_the_deadline_and_name_the_holder(db_path: Path) -> None:
    Store(db_path).migrate()
    notices: list[str] = []
    reader = hold(db_path, 3.0)
    try:
        started = time.monotonic()
        with (
            patient_waits(Patience(notice_every=1.0, notify=notices.append)),
            connect(db_path, lock_wait=0.5) as con,
        ):
            con.execute("CREATE TABLE IF NOT EXISTS probe (x INTEGER)")
        waited = time.monotonic() - started
    finally:
        reader.kill()
        reader.wait()
    assert waited > 1.0  # past the 0.5 s deadline, no StoreLockedError
    assert notices, "no line said why the run waits"
    assert f"PID {reader.pid}" in notices[0] and "waiting for the store" in notices[0]
    assert "\n" not in notices[0]


def test_a_stopped_run_stops_waiting(db_path: Path) -> None:
    Store(db_path).migrate()
    patience = Patience(notify=lambda message: None)
    reader = hold(db_path, 30.0)
    try:
        threading.Timer(0.5, patience.stop.set).start()
        # raised, not connected: the wait ended by the stop, not by the reader's 30 s hold
        with (
            pytest.raises(StoreLockedError, match="stopped waiting"),
            patient_waits(patience),
            connect(db_path),
        ):
            pass
    finally:
        reader.kill()
        reader.wait()


def test_the_deadline_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURYFLOW_LOCK_WAIT_SECONDS", "2.5")
    assert lock_wait_seconds() == 2.5
    monkeypatch.setenv("JURYFLOW_LOCK_WAIT_SECONDS", "soon")
    with pytest.raises(RuntimeError, match="JURYFLOW_LOCK_WAIT_SECONDS"):
        lock_wait_seconds()


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_long_reader_makes_the_run_wait_not_fail(tmp_path: Path) -> None:
    db = tmp_path / "shared.duckdb"
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 300)
    with running_stub_server(StubConfig(latency_ms=150, seed=11)) as stub:
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            "name: fair\njudges:\n"
            + "".join(
                f"  - {{id: {j}, provider: openai, model: gpt-{j}, prompt: data2txt_spans, "
                f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
                "max_concurrency: 4}\n"
                for j in ("a", "b")
            ),
            encoding="utf-8",
        )
        command = [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel)]
        run = subprocess.Popen(
            [*command, "--db", str(db), "--chunk-size", "50"],
            env=child_env(JURYFLOW_TEST_KEY="sk-test-fair", JURYFLOW_LOCK_WAIT_SECONDS="2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Take the file once the run has written its first chunk, and keep it 10 s: five
        # times the run's deadline, while the run has chunks to write.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and run.poll() is None:
            if db.exists():
                try:
                    _, rows = Store(db).query("SELECT count(*) FROM judgments")
                except (RuntimeError, duckdb.Error):  # the run is creating the file
                    rows = [(0,)]
                if rows[0][0] > 0:
                    break
            time.sleep(0.1)
        assert run.poll() is None, run.communicate()
        reader = hold(db, 10.0)
        out, err = run.communicate(timeout=300)
        reader.wait(timeout=30)

    assert run.returncode == 0, out + err
    assert "Traceback" not in err and "StoreLockedError" not in out + err
    assert "waiting for the store" in err and f"PID {reader.pid}" in err, err
    store = Store(db)
    run_id = store.latest_run_id()
    assert run_id is not None
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    _, rows = store.query(
        "SELECT count(*), count(DISTINCT (item_id, judge_id)) FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert rows == [(600, 600)]
    _, rows = store.query("SELECT count(*) FROM consensus WHERE run_id = ?", [run_id])
    assert rows == [(300,)]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_reader_holding_the_store_as_a_run_starts_makes_it_wait_and_say_so(
    tmp_path: Path,
) -> None:
    """Issue 29: a reader there before the run made it fail after 60 s of silence. The run
    now waits from its first look at the store, saying so early (a deadline of 1 s here
    shows that none applies), and goes on when the reader leaves."""
    db = tmp_path / "held.duckdb"
    Store(db).migrate()
    reader = hold(db, 600.0)
    run = subprocess.Popen(
        [sys.executable, "-m", "juryflow", "run", "--limit", "3", "--db", str(db)],
        env=child_env(JURYFLOW_LOCK_WAIT_SECONDS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert run.stderr is not None
    stderr = run.stderr
    threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True).start()
    seen: list[str] = []
    try:
        while not any("waiting for the store" in line for line in seen):
            seen.append(lines.get(timeout=180))  # Empty: the run never said it waits
        assert run.poll() is None, seen
    finally:
        reader.kill()
        reader.wait()
    out = run.communicate(timeout=300)[0]
    while not lines.empty():
        seen.append(lines.get())
    err = "".join(seen)
    assert run.returncode == 0, out + err
    assert f"PID {reader.pid}" in err and "StoreLockedError" not in err, err
    assert "stayed locked" not in err and "Traceback" not in err, err
    store = Store(db)
    run_id = store.latest_run_id()
    assert run_id is not None
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
