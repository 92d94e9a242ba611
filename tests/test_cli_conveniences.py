"""What a new user expects of the command line (issue 28, finding 9), one test each."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import typer
from typer.testing import CliRunner

from juryflow.cli import app
from tests.conftest import REPO, SAMPLE

runner = CliRunner()
JURYFLOW = str(Path(sys.executable).with_name("juryflow"))
WIDE = {"COLUMNS": "200"}


def _command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, command in getattr(group, "commands", {}).items():
        paths += _command_paths(command, (*prefix, name))
    return paths


def test_help_shows_flags_without_a_bool_placeholder() -> None:
    root = typer.main.get_command(app)
    paths = _command_paths(root)
    assert ("run",) in paths and ("server", "start") in paths and ("store", "compact") in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env=WIDE)
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, (path, result.output)
        assert "--help" in result.output
    run_help = runner.invoke(app, ["run", "--help"], env=WIDE).output
    for flag in ("--dry-run", "--no-cache", "--early-stop", "--no-early-stop", "--verbose"):
        assert flag in run_help
    # options that take a value still say what it is
    assert "<int>" in run_help and "USD" in run_help


def _juryflow(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    for name in ("JURYFLOW_DB", "PREFECT_API_URL"):
        if name not in env:
            environment.pop(name, None)
    return subprocess.run(
        [JURYFLOW, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )


def test_a_dotenv_file_in_the_current_folder_is_read_and_the_environment_wins(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text('# keys and settings\nexport JURYFLOW_DB="from-env.duckdb"\n')
    from_file = _juryflow(tmp_path, "runs")
    assert "from-env.duckdb" in from_file.stderr, from_file.stderr
    from_environment = _juryflow(tmp_path, "runs", JURYFLOW_DB="mine.duckdb")
    assert "mine.duckdb" in from_environment.stderr
    assert "from-env.duckdb" not in from_environment.stderr


def test_an_unreadable_dotenv_file_is_one_warning(tmp_path: Path) -> None:
    (tmp_path / ".env").write_bytes(b"ANTHROPIC_API_KEY=\xff\xfe\n")  # not UTF-8
    result = _juryflow(tmp_path, "runs")
    assert "warning:" in result.stderr and ".env was not read" in result.stderr
    assert "Traceback" not in result.stderr


def test_panel_yaml_in_the_current_folder_is_the_panel_without_panel(tmp_path: Path) -> None:
    shutil.copy(REPO / "examples" / "panel.offline-qa.yaml", tmp_path / "panel.yaml")
    args = ("run", str(SAMPLE), "--dry-run", "--limit", "2")
    found = _juryflow(tmp_path, *args)
    assert found.returncode == 0, found.stderr
    assert "panel: panel.yaml in this folder (no --panel given)" in found.stderr
    assert "panel offline-qa" in found.stdout
    named = _juryflow(tmp_path, *args, "--panel", str(REPO / "examples" / "panel.offline.yaml"))
    assert named.returncode == 0, named.stderr
    assert "panel offline-default" in named.stdout and "in this folder" not in named.stderr
    (tmp_path / "panel.yaml").unlink()
    embedded = _juryflow(tmp_path, *args)
    assert "panel offline-default" in embedded.stdout and "in this folder" not in embedded.stderr


def test_view_open_opens_the_browser_at_the_url_it_serves(tmp_path: Path) -> None:
    from juryflow.storage.store import Store

    db = tmp_path / "evals.duckdb"
    Store(db).migrate()
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    browser.chmod(0o755)
    env = {**os.environ, "BROWSER": str(browser)}
    process = subprocess.Popen(
        [JURYFLOW, "view", "--db", str(db), "--port", "0", "--open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = next(word for word in line.split() if word.startswith("http://"))
        for _ in range(600):  # the browser command runs from a thread; no timing is asserted
            if opened.exists() and opened.read_text():
                break
            time.sleep(0.1)
        assert opened.read_text() == url
        assert httpx.get(url, timeout=30).status_code == 200
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0 and "warning" not in stderr, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_names_the_api_it_was_given_rather_than_asking_for_one(tmp_path: Path) -> None:
    from tests.prefect_server import running_prefect_server

    with running_prefect_server(tmp_path) as env:
        api = env["PREFECT_API_URL"]
        process = subprocess.Popen(
            [JURYFLOW, "serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert f"on the Prefect server {api}" in line, line
    assert "set PREFECT_API_URL" not in line
