"""A local `prefect server start` for tests whose juryflow processes share one API.

Without ``PREFECT_API_URL`` every `juryflow` process starts its own ephemeral server
(9-20 s of CPU on 2 cores); tests that start many processes point them all at this one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_prefect_server(directory: Path) -> Iterator[dict[str, str]]:
    """A server on a free port with its home in ``directory``; yields the environment
    (``os.environ`` plus ``PREFECT_API_URL`` and the server's settings) for children."""
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(directory / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PWD": str(REPO),
    }
    prefect = str(Path(sys.executable).with_name("prefect"))
    log_path = directory / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    health = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
                    if health.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("prefect server did not start:\n" + log_path.read_text()[-3000:])
                time.sleep(0.5)
            yield env
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=10)


@pytest.fixture(scope="module")
def shared_prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for a module's juryflow processes: ``PREFECT_API_URL`` is set in this
    process's environment (children inherit it) for the module, and restored after; the
    session's server (tests/conftest.py) when there is one."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    with running_prefect_server(tmp_path_factory.mktemp("prefect-server")) as env:
        before = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = env["PREFECT_API_URL"]
        try:
            yield env["PREFECT_API_URL"]
        finally:
            if before is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = before
