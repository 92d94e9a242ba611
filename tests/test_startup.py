"""The README's "keep a Prefect server running": the commands it shows, run as shown.

``prefect server start --background``, ``export PREFECT_API_URL=...``, a ``juryflow run
--limit 5`` that uses that server (its flow run is there, and no ephemeral server is
started), then ``prefect server stop``. The time to the first model call is measured by
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


def _healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_background_server_serves_every_run_and_stops(tmp_path: Path) -> None:
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    env.pop("PREFECT_API_URL", None)
    started = subprocess.run(
        [PREFECT, "server", "start", "--background"], env=env, capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 120
        while not _healthy(api):
            assert time.monotonic() < deadline, "the background server never became healthy"
            time.sleep(0.5)
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
            [PREFECT, "server", "stop"], env=env, capture_output=True, text=True
        )
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 30
    while _healthy(api):
        assert time.monotonic() < deadline, "prefect server stop left the server running"
        time.sleep(0.5)
