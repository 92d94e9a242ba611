"""Seconds to a result (issue 43, point 1): the commands that run a flow reuse one
background Prefect server per user instead of starting a private one each time.

Real processes throughout: `juryflow run` in subprocesses with their own PREFECT_HOME and no
PREFECT_API_URL, the real detached Prefect server, the real idle watch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from juryflow.flows.runtime import background_server as bg
from juryflow.flows.runtime.detached_server import is_prefect_process, recorded

JURYFLOW = str(Path(sys.executable).with_name("juryflow"))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    return tmp_path / "home"


def test_a_server_of_the_users_own_choosing_wins(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(bg.MODE_VARIABLE, "background")
    assert bg.wanted()
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert not bg.wanted()
    monkeypatch.delenv("PREFECT_API_URL")
    home.mkdir(parents=True)
    (home / "profiles.toml").write_text(
        'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n',
        encoding="utf-8",
    )
    assert bg.profile_api_url() == "http://127.0.0.1:9/api" and not bg.wanted()


def test_a_script_keeps_a_private_server_unless_it_asks(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`auto` (the default) is for a person at a terminal: pytest's stdin is no terminal."""
    monkeypatch.delenv(bg.MODE_VARIABLE, raising=False)
    assert not bg.wanted()
    monkeypatch.setenv(bg.MODE_VARIABLE, "ephemeral")
    assert not bg.wanted()
    monkeypatch.setenv(bg.MODE_VARIABLE, "background")
    assert bg.wanted()


def _run(tmp_path: Path, db: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(
        [JURYFLOW, "run", "--limit", "2", "--db", str(tmp_path / db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow  # a real Prefect server started, reused, then stopped when idle: ~40 s
def test_runs_reuse_one_background_server_which_stops_when_idle(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(bg.MODE_VARIABLE, "background")
    monkeypatch.setenv(bg.IDLE_VARIABLE, "0.05")  # 3 s after the last command ends
    try:
        first = _run(tmp_path, "one.duckdb")
        assert first.returncode == 0, first.stderr
        server = recorded()
        assert server is not None and is_prefect_process(server.pid)
        # Held back from stopping while the second command runs: it touches the clock.
        second = _run(tmp_path, "two.duckdb")
        assert second.returncode == 0, second.stderr
        again = recorded()
        assert again is not None and again.pid == server.pid, "the second run reused it"
        deadline = time.monotonic() + 120
        while is_prefect_process(server.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not is_prefect_process(server.pid), "idle: the watch stopped it"
        assert recorded() is None
    finally:
        subprocess.run([JURYFLOW, "server", "stop"], env=dict(os.environ), check=False,
                       capture_output=True)  # fmt: skip
