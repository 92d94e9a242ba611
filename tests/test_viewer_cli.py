"""`juryflow view` as a user runs it: a real subprocess serving a real store, one line with
the URL, Ctrl-C exits 0 quietly, and every problem is one line with exit code 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from juryflow.storage.store import Store

STARTUP_SECONDS = 60


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("viewer-cli") / "evals.duckdb"
    Store(path).migrate()
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JURYFLOW_REVIEWER", "JURYFLOW_DB")}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", **extra)
    return env


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "juryflow", "view", *args]


@contextmanager
def _serving(
    args: list[str], cwd: Path | None = None, **env: str
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``juryflow view ARGS`` running; yields it and the first line it printed."""
    process = subprocess.Popen(
        _command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(**env),
        cwd=cwd,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.communicate(timeout=STARTUP_SECONDS)
        yield process, line
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _url(line: str) -> str:
    words = [w for w in line.split() if w.startswith("http://")]
    assert len(words) == 1, line
    return words[0]


def _interrupt(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    return process.returncode, stderr


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*args), capture_output=True, text=True, env=_env(**env), timeout=120
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_view_serves_prints_one_line_and_stops_quietly_on_ctrl_c(db: Path) -> None:
    with _serving(["--db", str(db), "--port", "0", "--reviewer", "alice"]) as (process, line):
        url = _url(line)
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/")
        assert "reviewer alice" in line and str(db) in line
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and "<h1>Runs</h1>" in page.text
        code, stderr = _interrupt(process)
    assert code == 0
    assert stderr == ""


def test_reviewer_comes_from_the_environment_then_the_user(db: Path) -> None:
    with _serving(["--db", str(db), "--port", "0"], JURYFLOW_REVIEWER="bob") as (process, line):
        assert "reviewer bob" in line
        assert _interrupt(process)[0] == 0
    with _serving(["--port", "0"], JURYFLOW_DB=str(db)) as (process, line):
        assert f"store {db}" in line  # --db defaults to $JURYFLOW_DB like every command
        assert "reviewer " in line and "reviewer bob" not in line
        assert _interrupt(process)[0] == 0


def test_a_port_in_use_is_one_line_naming_the_fix(db: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _one_error_line(_run("--db", str(db), "--port", str(port)))
    assert f"port {port} on 127.0.0.1 is in use" in line and "--port 0" in line


def test_a_missing_store_or_a_file_that_is_not_one_is_one_line(db: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nothing.duckdb"
    assert "run `juryflow run` first or pass --db PATH" in _one_error_line(
        _run("--db", str(missing), "--port", "0")
    )
    assert not missing.exists()  # looking never creates a store
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n", encoding="utf-8")
    assert "is not a DuckDB file" in _one_error_line(_run("--db", str(text), "--port", "0"))


def test_a_host_that_is_not_this_machine_is_one_line(db: Path) -> None:
    line = _one_error_line(_run("--db", str(db), "--port", "0", "--host", "no-such-host.invalid"))
    assert "--host 127.0.0.1" in line


def test_a_non_loopback_host_warns_that_anyone_can_read_and_annotate(db: Path) -> None:
    with _serving(["--db", str(db), "--port", "0", "--host", "0.0.0.0"]) as (process, line):
        url = _url(line)
        assert httpx.get(url, timeout=30).status_code == 200
        code, stderr = _interrupt(process)
    assert code == 0
    warning = [w for w in stderr.splitlines() if w.startswith("warning:")]
    assert len(warning) == 1 and "anyone" in warning[0] and "read and annotate" in warning[0]


def test_on_loopback_only_loopback_host_names_are_answered(db: Path) -> None:
    with _serving(["--db", str(db), "--port", "0"]) as (process, line):
        url = _url(line)
        port = url.rsplit(":", 1)[1].strip("/")
        assert httpx.get(url, headers={"Host": f"localhost:{port}"}, timeout=30).status_code == 200
        rebound = httpx.get(url, headers={"Host": f"evil.example:{port}"}, timeout=30)
        assert rebound.status_code == 421
        assert _interrupt(process)[0] == 0


def test_the_readme_commands(tmp_path: Path, db: Path) -> None:
    """The commands of the README's "Browse and adjudicate" section, as written there."""
    (tmp_path / "evals.duckdb").write_bytes(db.read_bytes())
    # juryflow view --db evals.duckdb --port 0
    with _serving(["--db", "evals.duckdb", "--port", "0"], cwd=tmp_path) as (process, line):
        assert httpx.get(_url(line), timeout=30).status_code == 200
        assert _interrupt(process)[0] == 0
    # juryflow view --db evals.duckdb --reviewer alice  (the default port 8080)
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8080))
        except OSError:
            pytest.skip("port 8080 is in use on this machine")
    with _serving(["--db", "evals.duckdb", "--reviewer", "alice"], cwd=tmp_path) as (
        process,
        line,
    ):
        assert _url(line) == "http://127.0.0.1:8080/" and "reviewer alice" in line
        assert _interrupt(process)[0] == 0
