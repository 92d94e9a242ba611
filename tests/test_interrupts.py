"""Stopping a run on request (issue 10, point 4): Ctrl-C to the terminal's process group,
SIGTERM, a cancellation in Prefect, and kill -9.

Each test runs `python -m juryflow run` as a real subprocess against the stub server with
slow answers. Before the fix, Ctrl-C killed the ephemeral Prefect server first while
juryflow went on calling models for ~80 s, wrote judgments after the run was marked
failed, printed 439 lines of errors, and kill -9 left the server running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import psutil
import pytest

from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.connection import StoreError
from juryflow.storage.journal import Journal, journal_path
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset
from tests.test_resume import child_env

pytestmark = [pytest.mark.slow]

ITEMS = 240
JUDGES = ("a", "b")
STOP_SECONDS = 2.0
"""No model call may leave juryflow later than this after the request to stop."""


def write_panel(path: Path, stub: StubHandle) -> Path:
    path.write_text(
        "name: interruptible\njudges:\n"
        + "".join(
            f"  - {{id: {judge}, provider: openai, model: gpt-{judge}, prompt: data2txt_spans, "
            f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
            "max_concurrency: 6}\n"
            for judge in JUDGES
        ),
        encoding="utf-8",
    )
    return path


def standalone_env() -> dict[str, str]:
    """As a user's terminal has it: no Prefect server, so juryflow starts its ephemeral one."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["JURYFLOW_TEST_KEY"] = "sk-test-interrupts"
    return env


@contextmanager
def slow_stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(latency_ms=250, seed=5)) as stub:
        yield stub


def start_run(
    tmp_path: Path, stub: StubHandle, db: Path, env: dict[str, str], *extra: str
) -> subprocess.Popen[str]:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    panel = write_panel(tmp_path / "panel.yaml", stub)
    command = [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel)]
    return subprocess.Popen(
        [*command, "--db", str(db), "--chunk-size", "50", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a terminal's foreground job: its own process group, which Ctrl-C signals as a whole
        start_new_session=True,
    )


def wait_for_judgments(
    child: subprocess.Popen[str], db: Path, at_least: int, timeout: float = 180
) -> str:
    """The run's id, once its journal and store together hold ``at_least`` judgments."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()
        run_id = _latest_run(db)
        if run_id is not None and len(done_pairs(db, run_id)) >= at_least:
            return run_id
        time.sleep(0.1)
    raise AssertionError("the run judged too little in time")


def _latest_run(db: Path) -> str | None:
    if not db.exists():
        return None
    try:
        return Store(db).latest_run_id()
    except (StoreError, duckdb.Error):  # the run is creating the file
        return None


def done_pairs(db: Path, run_id: str) -> set[tuple[str, str]]:
    journaled = {(j.item_id, j.judge_id) for j in Journal(journal_path(db, run_id)).replay()}
    try:
        stored = Store(db).judged_pairs(run_id)
    except (StoreError, duckdb.Error):  # the run is creating the file
        stored = set()
    return journaled | stored


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Processes still running (a zombie waiting for init to reap it has ended)."""
    running = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
        except psutil.NoSuchProcess:
            pass
    return running


def wait_gone(processes: list[psutil.Process], timeout: float = 5.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(processes)


def signal_and_watch(
    child: subprocess.Popen[str], stub: StubHandle, send: signal.Signals, group: bool
) -> tuple[float, int, int, str, str]:
    """Send the signal; returns (seconds to exit, calls in the STOP_SECONDS after the
    signal, calls after that, stdout, stderr)."""
    before = stub.stats.requests()
    sent = time.monotonic()
    if group:
        os.killpg(child.pid, send)
    else:
        child.send_signal(send)
    time.sleep(STOP_SECONDS)
    at_stop = stub.stats.requests()
    out, err = child.communicate(timeout=60)
    took = time.monotonic() - sent
    return took, at_stop - before, stub.stats.requests() - at_stop, out, err


def assert_interrupted_cleanly(db: Path, run_id: str, out: str, err: str) -> None:
    text = out + err
    assert f"--resume {run_id}" in err, text
    assert "Traceback" not in text and "Crash detected" not in text, text
    # a slow machine prints more progress lines ("judged ..."), time-driven: not counted
    said = [line for line in text.strip().splitlines() if not line.startswith("judged ")]
    assert len(said) <= 6, text
    store = Store(db)
    run = store.get_run(run_id)
    assert run is not None and run.status == "interrupted", run
    assert run.finished_at is not None
    _, rows = store.query(
        "SELECT count(*), count(DISTINCT (item_id, judge_id)), max(created_at) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    total, distinct, last_judged = rows[0]
    assert total == distinct > 0
    # Every call that completed is in the store (flushed at the stop), and none after it.
    journaled = {(j.item_id, j.judge_id) for j in Journal(journal_path(db, run_id)).replay()}
    assert journaled <= store.judged_pairs(run_id)
    assert last_judged <= run.finished_at


@pytest.mark.usefixtures("prefect_harness")
def test_ctrl_c_stops_calls_marks_the_run_interrupted_and_resume_finishes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ctrl-c.duckdb"
    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, standalone_env())
        run_id = wait_for_judgments(child, db, at_least=120)
        helpers = descendants(child.pid)
        assert any(
            "juryflow.flows.runtime.prefect_server" in " ".join(p.cmdline()) for p in helpers
        )

        _, _, late_calls, out, err = signal_and_watch(child, stub, signal.SIGINT, group=True)

        assert child.returncode == 130, out + err
        assert late_calls == 0
        assert_interrupted_cleanly(db, run_id, out, err)
        # the ephemeral server was not in the group Ctrl-C reached; juryflow stopped it
        assert wait_gone(helpers) == []

        done = Store(db).judged_pairs(run_id)
        calls_before_resume = stub.stats.requests()
        # the harness's Prefect server: the resume need not start an ephemeral one again
        resumed = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", "--resume", run_id, "--db", str(db)],
            env=child_env(JURYFLOW_TEST_KEY="sk-test-interrupts"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        # only the calls that had not completed are made again
        assert stub.stats.requests() - calls_before_resume == ITEMS * len(JUDGES) - len(done)

    assert_completed_exactly(db, run_id)


def assert_completed_exactly(db: Path, run_id: str) -> None:
    """The run is completed with every (item, judge) pair once and every item's consensus."""
    store = Store(db)
    run = store.get_run(run_id)
    assert run is not None and run.status == "completed", run
    _, rows = store.query(
        "SELECT count(*), count(DISTINCT (item_id, judge_id)) FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert rows == [(ITEMS * len(JUDGES), ITEMS * len(JUDGES))]
    _, rows = store.query("SELECT count(*) FROM consensus WHERE run_id = ?", [run_id])
    assert rows == [(ITEMS,)]


@pytest.mark.usefixtures("prefect_harness")
def test_sigterm_stops_the_run_as_a_prefect_worker_would(tmp_path: Path) -> None:
    db = tmp_path / "sigterm.duckdb"
    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, child_env(JURYFLOW_TEST_KEY="sk-test-term"))
        run_id = wait_for_judgments(child, db, at_least=120)
        _, _, late_calls, out, err = signal_and_watch(child, stub, signal.SIGTERM, group=False)
    assert child.returncode == 143, out + err
    assert late_calls == 0
    assert_interrupted_cleanly(db, run_id, out, err)


@pytest.mark.usefixtures("prefect_harness")
def test_a_cancellation_in_prefect_stops_the_run(tmp_path: Path) -> None:
    import asyncio
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.states import Cancelling

    db = tmp_path / "cancel.duckdb"

    async def cancel(flow_run_id: str) -> None:
        async with get_client() as client:
            await client.set_flow_run_state(UUID(flow_run_id), Cancelling(), force=True)

    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, child_env(JURYFLOW_TEST_KEY="sk-test-cancel"))
        run_id = wait_for_judgments(child, db, at_least=120)
        run = Store(db).get_run(run_id)
        assert run is not None and run.flow_run_id
        before = stub.stats.requests()
        asyncio.run(cancel(run.flow_run_id))
        time.sleep(STOP_SECONDS + 1.0)  # the flow looks at its state every second
        at_stop = stub.stats.requests()
        out, err = child.communicate(timeout=60)
        assert stub.stats.requests() == at_stop
        assert at_stop >= before

    assert child.returncode == 143, out + err
    assert_interrupted_cleanly(db, run_id, out, err)


def test_kill_9_leaves_no_prefect_server_behind(tmp_path: Path) -> None:
    db = tmp_path / "killed.duckdb"
    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, standalone_env())
        wait_for_judgments(child, db, at_least=20)
        helpers = descendants(child.pid)
        assert any(
            "juryflow.flows.runtime.prefect_server" in " ".join(p.cmdline()) for p in helpers
        )
        child.kill()
        child.communicate(timeout=30)
        # the kernel's parent-death signal (and the server's own watch) end it
        assert wait_gone(helpers, timeout=60.0) == []


def _assert_stopped_before_any_call(
    child: subprocess.Popen[str], stub: StubHandle, db: Path, out: str, err: str
) -> None:
    """Ctrl-C during start-up: exit 130 in one line, no traceback, no call made, and no run
    left `running` (or `completed`: the run never goes on to its end)."""
    text = out + err
    assert child.returncode == 130, text
    assert "Traceback" not in text and "Crash detected" not in text, text
    assert len(text.strip().splitlines()) <= 3, text
    assert stub.stats.requests() == 0, text
    if db.exists():
        statuses = {status for _, status in Store(db).query("SELECT run_id, status FROM runs")[1]}
        assert statuses <= {"interrupted"}, statuses


@pytest.mark.usefixtures("prefect_harness")
def test_ctrl_c_while_the_run_waits_for_the_store_at_its_start_stops_it(tmp_path: Path) -> None:
    """Issue 29: start-up waits for a store a reader holds; a Ctrl-C then ends the wait."""
    from tests.test_lock_fairness import hold

    db = tmp_path / "held.duckdb"
    Store(db).migrate()
    reader = hold(db, 600.0)
    try:
        with slow_stub() as stub:
            child = start_run(tmp_path, stub, db, child_env(JURYFLOW_TEST_KEY="sk-test-held"))
            assert child.stderr is not None
            seen = ""
            while "waiting for the store" not in seen:
                line = child.stderr.readline()
                assert line, child.communicate()
                seen += line
            os.killpg(child.pid, signal.SIGINT)
            out, err = child.communicate(timeout=120)
            _assert_stopped_before_any_call(child, stub, db, out, seen + err)
            assert "before the run started" in err, err
    finally:
        reader.kill()
        reader.wait()


@pytest.mark.usefixtures("prefect_harness")
def test_ctrl_c_as_the_flow_starts_stops_the_run(tmp_path: Path) -> None:
    """Issue 29: a Ctrl-C once the Prefect flow had begun, before the judging's watch, was
    lost (asyncio cancelled the flow's task, Prefect absorbed it) and every call was made.
    The signal goes out the moment the flow has started its worker processes (``--workers
    2`` starts them first thing), wherever the flow then is."""
    db = tmp_path / "start.duckdb"
    with slow_stub() as stub:
        env = child_env(JURYFLOW_TEST_KEY="sk-test-start")
        child = start_run(tmp_path, stub, db, env, "--workers", "2")
        deadline = time.monotonic() + 180
        while not any("multiprocessing" in " ".join(p.cmdline()) for p in alive_children(child)):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the flow never started its workers"
            time.sleep(0.02)
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=120)
        # the flow may already be judging when the signal lands: then calls in flight end
        text = out + err
        assert child.returncode == 130, text
        assert "Traceback" not in text and "Crash detected" not in text, text
        runs = Store(db).query("SELECT run_id, status FROM runs")[1] if db.exists() else []
        assert {status for _, status in runs} <= {"interrupted"}, runs
        calls = stub.stats.requests()
    assert calls < ITEMS * len(JUDGES), "the run went on to its end"


def alive_children(child: subprocess.Popen[str]) -> list[psutil.Process]:
    try:
        return alive(descendants(child.pid))
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("delay", [0.3, 1.0, 2.0, 4.0])
def test_ctrl_c_at_any_moment_of_start_up_ends_in_one_line(tmp_path: Path, delay: float) -> None:
    """Issue 29: wherever start-up is when the Ctrl-C comes (imports, the ephemeral server,
    the flow starting), juryflow ends with 130 and one line, never a traceback or a hang,
    and no run is left `running`. The delays only spread the signal over start-up; each
    phase must end the same way, so the test holds however fast the machine is."""
    db = tmp_path / "early.duckdb"
    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, standalone_env())
        time.sleep(delay)
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=120)
    text = out + err
    assert child.returncode == 130, text
    assert "Traceback" not in text and "Crash detected" not in text, text
    assert len(err.strip().splitlines()) == 1 and "interrupted (SIGINT)" in err, text
    assert {status for _, status in _runs(db)} <= {"interrupted"}, text


def _runs(db: Path) -> list[tuple[object, ...]]:
    """The store's runs; none where the Ctrl-C came before the store had its tables (the
    file DuckDB made is left empty: the next run makes it a store)."""
    if not db.exists():
        return []
    names = Store(db).query("SELECT table_name FROM duckdb_tables() WHERE table_name = 'runs'")
    return Store(db).query("SELECT run_id, status FROM runs")[1] if names[1] else []


def test_an_interrupted_command_ends_with_130_after_its_exit_handlers() -> None:
    """A Ctrl-C caught by the command line ends the process with 130 through
    ``exit_interrupted``, after the exit handlers (a Prefect server's shutdown among them)."""
    code = (
        "import atexit\n"
        "import juryflow.cli.commands as commands\n"
        "atexit.register(print, 'exit handler ran')\n"
        "def interrupted():\n"
        "    raise KeyboardInterrupt\n"
        "commands.app = interrupted\n"
        "commands.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "juryflow: interrupted (SIGINT)", done.stderr
    assert done.stdout.strip() == "exit handler ran", done.stdout
