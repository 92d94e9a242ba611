"""What a new user expects of the command line (issue 28, finding 9), one test each."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
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


def test_command_help_is_its_docstring_with_paragraphs_reflowed() -> None:
    root = typer.main.get_command(app)
    for path in _command_paths(root)[1:]:
        command: Any = root
        for name in path:
            command = command.commands[name]
        text = command.help or ""
        assert "\n" not in text.replace("\n\n", ""), (path, text)
    listing = runner.invoke(app, ["--help"], env={"COLUMNS": "220"}).output
    assert "(a file, or a DuckLake shared by many processes and machines)" in listing


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
    assert "panel panel.yaml from this folder (no --panel given)" in found.stderr
    assert "panel offline-qa" in found.stdout
    named = _juryflow(tmp_path, *args, "--panel", str(REPO / "examples" / "panel.offline.yaml"))
    assert named.returncode == 0, named.stderr
    assert "panel offline-default" in named.stdout and "from this folder" not in named.stderr
    (tmp_path / "panel.yaml").unlink()
    embedded = _juryflow(tmp_path, *args)
    assert "panel offline-default" in embedded.stdout and "from this folder" not in embedded.stderr


@pytest.mark.slow
def test_a_run_says_in_its_start_line_that_the_panel_is_the_folder_s(tmp_path: Path) -> None:
    shutil.copy(REPO / "examples" / "panel.offline-qa.yaml", tmp_path / "panel.yaml")
    found = _juryflow(tmp_path, "run", str(SAMPLE), "--limit", "2", "--db", "s.duckdb")
    assert found.returncode == 0, found.stderr
    start = next(line for line in found.stderr.splitlines() if line.startswith("run "))
    assert "· panel panel.yaml from this folder (no --panel given) · store" in start


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


@dataclass(frozen=True)
class Served:
    api: str
    first_line: str
    returncode: int
    out: str
    err: str


def _serve_then_stop(tmp_path: Path, stop: signal.Signals) -> Served:
    """`juryflow serve` on a real local Prefect server, stopped by ``stop`` once it has said
    where it serves."""
    from tests.prefect_server import running_prefect_server

    with running_prefect_server(tmp_path) as env:
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
            process.send_signal(stop)
            out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return Served(env["PREFECT_API_URL"], line, process.returncode, out, err)


def test_serve_names_the_api_it_was_given_rather_than_asking_for_one(tmp_path: Path) -> None:
    served = _serve_then_stop(tmp_path, signal.SIGINT)
    assert f"on the Prefect server {served.api}" in served.first_line, served.first_line
    assert "set PREFECT_API_URL" not in served.first_line


def _table_row(output: str, name: str) -> str:
    rows = [line for line in output.splitlines() if line.startswith(f"│ {name} ")]
    assert len(rows) == 1, (name, output)
    return rows[0]


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_ends_with_a_table_per_judge_and_the_commands_to_look_further(
    tmp_path: Path,
) -> None:
    from juryflow.analysis.agreement_report import agreement_report
    from juryflow.storage.store import Store

    db = tmp_path / "s.duckdb"
    result = runner.invoke(app, ["run", str(SAMPLE), "--db", str(db), "--limit", "20"], env=WIDE)
    assert result.exit_code == 0, result.output
    out = result.output
    report = agreement_report(Store(db))
    assert "F1 vs gold" in out
    for judge in report.judge_summaries:
        row = _table_row(out, judge.judge_id)
        accuracy = next(a for a in report.accuracy if a.predictor == judge.judge_id)
        assert accuracy.response is not None and accuracy.response.f1 is not None
        assert judge.flag_rate is not None
        for figure in (
            f"{judge.n_scored}/{judge.n_items}",
            f"{100 * judge.flag_rate:.1f} %",
            f"{accuracy.response.f1:.3f}",
        ):
            assert figure in row, (figure, row)
    consensus = next(a for a in report.accuracy if a.predictor == "consensus")
    assert consensus.response is not None and consensus.response.f1 is not None
    assert f"{consensus.response.f1:.3f}" in _table_row(out, "consensus")
    assert f"juryflow agreement {report.run_id} --db {db}" in out
    assert f"juryflow view --db {db} --open" in out
    assert "juryflow sql" not in out


@pytest.mark.usefixtures("prefect_harness")
def test_without_labels_the_judge_table_has_no_f1(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:8]]
    unlabelled = tmp_path / "unlabelled.jsonl"
    unlabelled.write_text(
        "".join(
            json.dumps({k: v for k, v in row.items() if k not in ("labels", "hallucinated")}) + "\n"
            for row in rows
        )
    )
    db = tmp_path / "s.duckdb"
    result = runner.invoke(app, ["run", str(unlabelled), "--db", str(db)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "flag rate" in result.output and "F1 vs gold" not in result.output
    assert "8/8" in _table_row(result.output, "numbers")


def test_serve_stops_on_sigterm_in_one_line(tmp_path: Path) -> None:
    """Issue 28, finding 9: a service manager stops `juryflow serve` with SIGTERM; it died
    without a word (killed by the signal) before."""
    served = _serve_then_stop(tmp_path, signal.SIGTERM)
    said = served.first_line + served.out + served.err
    assert "serving evaluate-serve" in served.first_line, said
    assert served.returncode == 143, said
    assert "stopped serving evaluate-serve and regression-serve (SIGTERM)" in served.out, said
    assert "Traceback" not in said, said
