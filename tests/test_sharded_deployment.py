"""The `evaluate-sharded` deployment: two Prefect workers split one run on a DuckLake.

Everything is real: a local Prefect server (tests/test_deploy.py's fixture), a process
work pool, two `prefect worker start` processes, `prefect deploy --all` from the checkout
and `prefect deployment run ... --watch`, as the README's "Many machines" section shows
them; the lake's catalog is a real PostgreSQL (tests/pg_server.py); the judges of the
cancelled run are the stand-in HTTP server (juryflow.standin.server), slowed down.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.connection import close_lakes
from tests.pg_server import PgServer, pg_server
from tests.test_deploy import _run, prefect_server
from tests.test_faults import synthetic_dataset
from tests.test_lake_runs import CONSENSUS, TWICE, rows, write_panel

__all__ = ["pg_server", "prefect_server"]  # the fixtures, imported so that pytest finds them

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
JURYFLOW = str(Path(sys.executable).with_name("juryflow"))
DATASET = "examples/ragtruth_data2txt_sample.jsonl"
PANEL = "examples/panel.offline.yaml"


@pytest.fixture
def lake(pg_server: PgServer) -> Iterator[str]:
    yield f"ducklake:postgres:{pg_server.create_database(f'sharded_{os.getpid()}')}"
    close_lakes()


@pytest.fixture
def workers(prefect_server: dict[str, str], lake: str, tmp_path: Path) -> Iterator[list[Path]]:
    """The pool, the deployments and two workers (`--limit 1`: one flow run each at a
    time, so the two shards must go to different workers), each with the lake in its
    environment as on the README's machines; yields their log files."""
    env = {
        **prefect_server,
        "JURYFLOW_DB": lake,
        "JURYFLOW_DATA_PATH": str(tmp_path / "lake-data"),
        "JURYFLOW_JOURNAL_DIR": str(tmp_path / "journals"),
        "JURYFLOW_TEST_KEY": "sk-test-sharded",  # the stand-in judges' key
        # poll every second instead of every 10 s: the test waits less, nothing else changes
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        # the workers' "submitting flow run" lines are read below; a test that imported
        # juryflow.cli has put juryflow's quiet WARNING level into this process's env
        "PREFECT_LOGGING_LEVEL": "INFO",
    }
    pool = _run(env, PREFECT, "work-pool", "create", "juryflow-process", "--type", "process")
    assert pool.returncode == 0, pool.stdout + pool.stderr
    deploy = _run(env, PREFECT, "--no-prompt", "deploy", "--all")
    shown = " ".join((deploy.stdout + deploy.stderr).split())
    assert deploy.returncode == 0, shown
    for name in ("evaluate/evaluate-shard", "evaluate-sharded/evaluate-sharded"):
        assert f"Deployment '{name}' successfully created" in shown
    logs = [tmp_path / f"worker-{n}.log" for n in (1, 2)]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for n, log in enumerate(logs, start=1):
            with log.open("wb") as out:
                started.append(
                    subprocess.Popen(
                        [PREFECT, "worker", "start", "--pool", "juryflow-process",
                         "--limit", "1", "--name", f"machine-{n}"],
                        env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )  # fmt: skip
        yield logs
    finally:
        for worker in started:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in started:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)


def _flow_runs(api: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=30)
    response.raise_for_status()
    runs = response.json()
    assert isinstance(runs, list)
    return runs


def _wait_for_state(api: str, name: str, states: set[str], seconds: float) -> dict[str, Any]:
    """The flow run called ``name`` once its state type is one of ``states``."""
    deadline = time.monotonic() + seconds
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = next((run for run in _flow_runs(api) if run["name"] == name), {})
        if seen.get("state_type") in states:
            return seen
        time.sleep(0.5)
    pytest.fail(f"flow run {name} not {states} within {seconds:g} s: {seen.get('state_type')}")


@pytest.mark.slow
def test_two_workers_split_one_run_through_the_evaluate_sharded_deployment(
    workers: list[Path], prefect_server: dict[str, str], lake: str, tmp_path: Path
) -> None:
    env = {**prefect_server, "JURYFLOW_JOURNAL_DIR": str(tmp_path / "journals")}
    data_path = str(tmp_path / "lake-data")
    try:
        done = subprocess.run(
            [PREFECT, "deployment", "run", "evaluate-sharded/evaluate-sharded",
             "--param", "shards=2", "--param", "run_id=sample-sharded", "--watch"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        worker_logs = [log.read_text(errors="replace") for log in workers]
        assert done.returncode == 0, (
            done.stdout[-3000:] + done.stderr[-3000:] + "\n".join(w[-4000:] for w in worker_logs)
        )
        assert "Flow run finished successfully in 'Completed'" in " ".join(done.stdout.split())

        assert rows(lake, "SELECT status FROM runs WHERE run_id = 'sample-sharded'") == [
            ("completed",)
        ]
        assert rows(lake, "SELECT count(*) FROM judgments WHERE run_id = 'sample-sharded'") == [
            (180,)
        ]
        assert rows(lake, TWICE, "sample-sharded") == [(0,)]
        owners: dict[int, str] = {
            int(str(shard)): str(owner)
            for shard, owner in rows(
                lake, "SELECT shard, owner FROM run_shards WHERE run_id = 'sample-sharded'"
            )
        }
        assert sorted(owners) == [1, 2]
        sharded = rows(lake, CONSENSUS, "sample-sharded")
    finally:
        close_lakes()

    # Which flow run claimed which shard, and which worker started it: shard 1 is judged by
    # the coordinator (the evaluate-sharded flow run), shard 2 by an evaluate-shard run.
    flow_runs = {run["name"]: run for run in _flow_runs(prefect_server["PREFECT_API_URL"])}
    coordinator = next(run for run in flow_runs.values() if run["parameters"].get("shards") == 2)
    shard_two = flow_runs["sample-sharded-shard-2-of-2"]
    assert coordinator["state_type"] == shard_two["state_type"] == "COMPLETED"
    host = socket.gethostname()
    assert owners[1] == f"{host}:{coordinator['infrastructure_pid']}"
    assert owners[2] == f"{host}:{shard_two['infrastructure_pid']}"
    assert owners[1] != owners[2]
    # Each worker holds one flow run at a time (--limit 1), so two that ran at the same time
    # ran on the two workers. (Worker logs do not say: both may log "submitting" the same
    # run, which only one of them gets.)
    assert coordinator["start_time"] < shard_two["end_time"]
    assert shard_two["start_time"] < coordinator["end_time"]
    assert all(
        any(f"submitting flow run '{run['id']}'" in log for log in worker_logs)
        for run in (coordinator, shard_two)
    )

    # shards that fail: the coordinator fails too, naming each shard and its flow run
    failing = subprocess.run(
        [PREFECT, "deployment", "run", "evaluate-sharded/evaluate-sharded",
         "--param", "dataset=examples/no-such-file.jsonl", "--param", "run_id=broken",
         "--watch"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "Flow run finished in state 'Failed'" in " ".join(failing.stdout.split())
    failed = {run["name"]: run for run in _flow_runs(prefect_server["PREFECT_API_URL"])}
    shard_ids = [failed[f"broken-shard-{i}-of-2"]["id"] for i in (1, 2)]
    logs = "".join(log.read_text(errors="replace") for log in workers)
    message = next(line for line in logs.splitlines() if "run broken: shard 1/2" in line)
    assert f"shard 1/2: flow run {shard_ids[0]} Failed" in message
    assert f"shard 2/2: flow run {shard_ids[1]} Failed" in message
    assert "with run_id='broken'" in message

    # A coordinator cancelled mid-run cancels its shard on the pool; started again with the
    # same run_id, it resumes the run (on the pool, while this process judges the
    # reference below: CI time).
    config = StubConfig(latency_ms=500, seed=5)
    with contextlib.ExitStack() as cleanup:
        stub = cleanup.enter_context(running_stub_server(config))
        again = _cancel_mid_run(workers, prefect_server, lake, stub, tmp_path)
        config.latency_ms = 0  # the judges answer at once from now on
        resumed = subprocess.Popen(
            again, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        cleanup.callback(_ended, resumed)

        # the consensus of the same dataset and panel judged unsharded into a DuckDB file
        reference_db = tmp_path / "reference.duckdb"
        reference = subprocess.run(
            [JURYFLOW, "run", DATASET, "--panel", PANEL, "--db", str(reference_db)],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        assert reference.returncode == 0, reference.stderr[-3000:]
        expected = rows(reference_db, "SELECT run_id FROM runs")
        assert sharded == rows(reference_db, CONSENSUS, expected[0][0])

        # `juryflow finish` on the finished run: says so, changes nothing
        finish = subprocess.run(
            [JURYFLOW, "finish", "sample-sharded", "--db", lake],
            env={**env, "JURYFLOW_DATA_PATH": data_path}, cwd=REPO,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert finish.returncode == 0, finish.stderr
        assert "completed; 2 shards finished, 60 items, 180 judgments" in finish.stdout

        out = resumed.communicate(timeout=300)[0]
        logs = "".join(log.read_text(errors="replace") for log in workers)
        assert resumed.returncode == 0, out[-3000:] + logs[-4000:]
    try:
        assert rows(lake, "SELECT status FROM runs WHERE run_id = 'cancelled'") == [("completed",)]
        assert rows(lake, "SELECT count(*) FROM judgments WHERE run_id = 'cancelled'") == [(360,)]
        assert rows(lake, TWICE, "cancelled") == [(0,)]
    finally:
        close_lakes()


def _ended(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        child.kill()
        child.wait(timeout=30)


def _cancel_mid_run(
    workers: list[Path],
    prefect_server: dict[str, str],
    lake: str,
    stub: StubHandle,
    tmp_path: Path,
) -> list[str]:
    """Start evaluate-sharded on slow judges, `prefect flow-run cancel` it once its shard 2
    runs on the pool, check that this shard's flow run and the coordinator's end
    Cancelled, and return the command that starts the run again (and waits for it)."""
    env = {**prefect_server, "JURYFLOW_JOURNAL_DIR": str(tmp_path / "journals")}
    api = prefect_server["PREFECT_API_URL"]
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 120)
    # one call at a time per judge, 500 ms each: a shard's 180 calls would take 30 s
    panel = write_panel(tmp_path / "stub.yaml", stub, concurrency=1)
    params = json.dumps(
        {"dataset": str(dataset), "panel": str(panel), "shards": 2,
         "run_id": "cancelled", "options": {"chunk_size": 10}}
    )  # fmt: skip
    start = [PREFECT, "deployment", "run", "evaluate-sharded/evaluate-sharded", "--params", params]
    started = _run(env, *start)
    assert started.returncode == 0, started.stdout + started.stderr
    found = re.search(r"UUID: ([0-9a-f-]{36})", started.stdout)
    assert found, started.stdout
    coordinator = found.group(1)
    shard_two = _wait_for_state(api, "cancelled-shard-2-of-2", {"RUNNING"}, 90)
    cancel = _run(env, PREFECT, "flow-run", "cancel", coordinator)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    final = {"CANCELLED", "COMPLETED", "FAILED", "CRASHED"}
    stopped = _wait_for_state(api, "cancelled-shard-2-of-2", final, 60)
    logs = "".join(log.read_text(errors="replace") for log in workers)
    assert stopped["state_type"] == "CANCELLED", logs[-4000:]
    assert f"juryflow-coordinator:{coordinator}" in stopped["tags"]
    assert f"cancelling shard 2/2: flow run {shard_two['id']}" in logs
    ended = _wait_for_state(api, str(_flow_run(api, coordinator)["name"]), final, 60)
    assert ended["state_type"] == "CANCELLED", logs[-4000:]
    # Each shard stopped: it released its claim, or (a second SIGTERM from Prefect makes a
    # shard stop at once, without writing) left it to a process that is gone, which a shard
    # started again on this host takes over. Either way anyone may resume it.
    try:
        assert rows(lake, "SELECT status FROM runs WHERE run_id = 'cancelled'") == [
            ("interrupted",)
        ], logs[-4000:]
        owners = rows(
            lake, "SELECT owner FROM run_shards WHERE run_id = 'cancelled' AND owner <> ''"
        )
    finally:
        close_lakes()
    for (owner,) in owners:
        host, _, pid = str(owner).rpartition(":")
        assert host == socket.gethostname(), owner
        assert not _alive(int(pid)), f"shard owner {owner} still runs after the cancel"
    return [*start, "--watch"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _flow_run(api: str, flow_run_id: str) -> dict[str, Any]:
    response = httpx.get(f"{api}/flow_runs/{flow_run_id}", timeout=30)
    response.raise_for_status()
    run = response.json()
    assert isinstance(run, dict)
    return run


async def test_evaluate_sharded_refuses_a_duckdb_file_and_bad_shard_counts(
    prefect_harness: None, tmp_path: Path
) -> None:
    """One-line failures before anything is started (no deployment is needed for them)."""
    from juryflow.flows.sharded import evaluate_sharded

    file_db = str(tmp_path / "store.duckdb")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"db": file_db}, "needs a DuckLake store"),
        ({"db": "ducklake:postgres:dbname=x host=127.0.0.1", "shards": 0}, "give 1 to"),
        ({"db": "ducklake:postgres:dbname=x", "options": {"shard": "1/2"}}, "cannot be passed"),
        ({"db": "ducklake:postgres:dbname=x", "options": {"colour": 1}}, "cannot be passed"),
        ({"db": "ducklake:postgres:dbname=x", "run_id": "no spaces"}, "--run-id"),
    ]
    for parameters, message in cases:
        state = await cast("Any", evaluate_sharded)(**parameters, return_state=True)
        assert state.is_failed()
        with pytest.raises(ValueError, match=message) as raised:
            await state.aresult()
        assert "\n" not in str(raised.value)
    assert not Path(file_db).exists()
