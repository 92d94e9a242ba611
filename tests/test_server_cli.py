"""`juryflow server start|stop|status` where no server comes up: each says so in one line.

The server that does come up, and still answers past its first minute, is in
``tests/test_startup.py`` (slow).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

JURYFLOW = str(Path(sys.executable).with_name("juryflow"))


def _juryflow(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run(
        [JURYFLOW, "server", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_status_and_stop_without_a_server_say_none_runs(tmp_path: Path) -> None:
    status = _juryflow(tmp_path, "status")
    assert status.returncode == 1
    assert "no server started by `juryflow server start` is running" in status.stdout
    stopped = _juryflow(tmp_path, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "no server" in stopped.stdout


def test_a_recorded_server_whose_process_is_gone_is_not_running(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    record = {"pid": dead.pid, "host": "127.0.0.1", "port": 4200, "log": "x.log"}
    (tmp_path / "juryflow-server.json").write_text(json.dumps(record))
    status = _juryflow(tmp_path, "status")
    assert status.returncode == 1 and "no server" in status.stdout
    stopped = _juryflow(tmp_path, "stop")
    assert stopped.returncode == 0 and "no server" in stopped.stdout
    assert not (tmp_path / "juryflow-server.json").exists()


def test_a_taken_port_is_refused_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = _juryflow(tmp_path, "start", "--port", str(port))
    assert started.returncode == 2
    assert f"127.0.0.1:{port} is taken" in started.stderr
    assert "--port" in started.stderr
    assert "Traceback" not in started.stderr
    assert not (tmp_path / "juryflow-server.json").exists()
