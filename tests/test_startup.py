"""The README's "keep a Prefect server running": the commands it shows, run as shown.

``juryflow server start``, ``export PREFECT_API_URL=...``, the server still answering past
its first minute (``prefect server start --background`` died about 20 s in, on its first
log line after the command that started it had gone: issue 28, finding 1), a ``juryflow run
--limit 5`` that uses that server (its flow run is there, and no ephemeral server is
started), then ``juryflow server stop``. The time to the first model call is measured by
``bench/bench_startup.py``, not here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

pytestmark = pytest.mark.slow

PREFECT = str(Path(sys.executable).with_name("prefect"))
JURYFLOW = str(Path(sys.executable).with_name("juryflow"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(api: str, timeout: float = 2) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


KEPT_SECONDS = 65  # past the first minute, when Prefect's --background server was gone


def test_a_kept_server_answers_past_its_first_minute_serves_a_run_and_stops(
    tmp_path: Path,
) -> None:
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_UI_ENABLED": "false",
    }
    # As on a new user's machine: telemetry not turned off by hand (offline, its error
    # was the log line that killed the --background server), no API named.
    for name in ("PREFECT_API_URL", "PREFECT_SERVER_ANALYTICS_ENABLED", "DO_NOT_TRACK"):
        env.pop(name, None)
    started = subprocess.run(
        [JURYFLOW, "server", "start", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    assert f"export PREFECT_API_URL={api}" in started.stdout
    try:
        # The command has ended and its output pipes are closed: the server must not care.
        since = time.monotonic()
        polls = 0
        while time.monotonic() - since < KEPT_SECONDS:
            assert _healthy(api, timeout=30), (
                f"the server stopped answering {time.monotonic() - since:.0f} s after "
                f"`juryflow server start` returned:\n" + _server_log(tmp_path)
            )
            polls += 1
            time.sleep(2)
        assert polls > 5
        status = subprocess.run(
            [JURYFLOW, "server", "status"], env=env, capture_output=True, text=True
        )
        assert status.returncode == 0 and "answering" in status.stdout, status.stdout
        # export PREFECT_API_URL=http://127.0.0.1:4200/api (here on a free port)
        run_env = {**env, "PREFECT_API_URL": api}
        process = subprocess.Popen(
            [JURYFLOW, "run", "--limit", "5", "--db", str(tmp_path / "s.duckdb")],
            env=run_env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        children: set[str] = set()
        while process.poll() is None:
            try:
                for child in psutil.Process(process.pid).children(recursive=True):
                    children.add(" ".join(child.cmdline()))
            except psutil.Error:
                pass
            time.sleep(0.05)
        out, err = process.communicate()
        assert process.returncode == 0, err
        # the run used the running server: no ephemeral one of its own, and its flow run
        # (linked on the first line) is on that server
        assert not any("prefect_server" in c or "uvicorn" in c for c in children), children
        assert f"http://127.0.0.1:{port}/runs/flow-run/" in err
        runs = httpx.post(f"{api}/flow_runs/filter", json={"limit": 5}, timeout=10).json()
        assert len(runs) == 1 and runs[0]["state"]["type"] == "COMPLETED"
        assert runs[0]["id"] in err
        assert "items" in out
    finally:
        stopped = subprocess.run(
            [JURYFLOW, "server", "stop"], env=env, capture_output=True, text=True
        )
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stdout
    deadline = time.monotonic() + 30
    while _healthy(api):
        assert time.monotonic() < deadline, "juryflow server stop left the server running"
        time.sleep(0.5)


def _server_log(tmp_path: Path) -> str:
    log = tmp_path / "prefect-home" / "juryflow-server.log"
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
