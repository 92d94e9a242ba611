"""`juryflow init [DIR]`: a starter project whose printed next command runs as written,
whose LLM panel asks the project's own prompt file, and which never overwrites a file."""

from __future__ import annotations

import hashlib
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from juryflow.cli.init_project import STUB_PORT
from juryflow.judges.panel import load_panel
from juryflow.storage.store import Store
from tests.conftest import REPO
from tests.test_custom_prompts import juryflow

STARTER_FILES = {"data.jsonl", "panel.yaml", "panel_llm.yaml", "my_prompt.txt"}


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return juryflow("init", *args, cwd=cwd)


def printed_next_command(stdout: str) -> list[str]:
    (line,) = [line for line in stdout.splitlines() if line.startswith("next: ")]
    return shlex.split(line.removeprefix("next: "))


def run_next_command(argv: list[str], cwd: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """The printed command (``cd DIR && juryflow run ...``), with a store of the test's. Its
    program is ``juryflow`` when the shell finds this installation's script, else that
    script's path (issue 43: a virtualenv nobody activated), which is run as printed."""
    if argv[0] == "cd":
        cwd, argv = cwd / argv[1], argv[3:]
    assert argv[1] == "run", argv
    if argv[0] == "juryflow":
        return juryflow(*argv[1:], "--db", str(db), cwd=cwd)
    assert Path(argv[0]).is_absolute() and Path(argv[0]).name == "juryflow", argv
    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    return subprocess.run(
        [*argv, "--db", str(db)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_init_then_the_printed_command_judges_the_starter_dataset(tmp_path: Path) -> None:
    # README: juryflow init myproject; cd myproject && juryflow run data.jsonl --panel panel.yaml
    done = init("myproject", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "myproject"
    assert {p.name for p in folder.iterdir()} == STARTER_FILES
    for name in STARTER_FILES:
        assert f"myproject/{name}" in done.stdout
    argv = printed_next_command(done.stdout)
    assert argv[:3] == ["cd", "myproject", "&&"]
    assert argv[4:] == ["run", "data.jsonl", "--panel", "panel.yaml"]

    db = tmp_path / "store.duckdb"
    ran = run_next_command(argv, tmp_path, db)
    assert ran.returncode == 0, ran.stderr
    store = Store(db)
    run_id = store.latest_run_id()
    _, rows = store.query(
        "SELECT count(*), count(score), count(DISTINCT item_id) FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert rows == [(18, 18, 6)]  # 6 items x 3 detectors, all answered
    # The gold labels the starter dataset carries are read as valid, so agreement with the
    # humans can be measured right away; the detectors find the planted errors.
    _, rows = store.query(
        "SELECT count(*) FILTER (WHERE gold_hallucinated), "
        "count(*) FILTER (WHERE c.hallucinated AND i.gold_hallucinated) "
        "FROM items i JOIN consensus c USING (run_id, item_id) WHERE run_id = ?",
        [run_id],
    )
    assert rows[0][0] == 3 and rows[0][1] >= 2


def test_init_in_the_current_directory_prints_the_command_without_cd(tmp_path: Path) -> None:
    done = init(cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    argv = printed_next_command(done.stdout)
    assert argv[1:] == ["run", "data.jsonl", "--panel", "panel.yaml"]
    ran = run_next_command(argv, tmp_path, tmp_path / "here.duckdb")
    assert ran.returncode == 0, ran.stderr


def test_init_refuses_to_overwrite_and_force_does(tmp_path: Path) -> None:
    assert init("p", cwd=tmp_path).returncode == 0
    mine = tmp_path / "p" / "my_prompt.txt"
    mine.write_text("my own edits\n", encoding="utf-8")

    again = init("p", cwd=tmp_path)
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "already exist" in lines[0], again.stderr
    assert "--force" in lines[0] and "another directory" in lines[0]
    assert mine.read_text(encoding="utf-8") == "my own edits\n"

    # One taken name is enough to refuse, and nothing else is written either.
    other = tmp_path / "q"
    other.mkdir()
    (other / "panel.yaml").write_text("mine\n", encoding="utf-8")
    assert init("q", cwd=tmp_path).returncode == 2
    assert [p.name for p in other.iterdir()] == ["panel.yaml"]

    forced = init("p", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "{{ response }}" in mine.read_text(encoding="utf-8")


def test_init_into_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("", encoding="utf-8")
    done = init("taken", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: taken is a file; give a directory: juryflow init DIR"
    ]


def test_the_starter_panels_load_and_the_llm_one_uses_the_prompt_file(tmp_path: Path) -> None:
    assert init("p", cwd=tmp_path).returncode == 0
    offline = load_panel(tmp_path / "p" / "panel.yaml")
    assert all(j.provider == "offline" for j in offline.judges)
    llm = load_panel(tmp_path / "p" / "panel_llm.yaml").judge("claude")
    assert llm.prompt == str((tmp_path / "p" / "my_prompt.txt").resolve())
    assert llm.template().variables == ("reference", "response")
    assert llm.template().output_kind == "score"
    # The commented judge of panel.yaml is the same judge: uncommented, it loads.
    text = (tmp_path / "p" / "panel.yaml").read_text(encoding="utf-8")
    commented = [line for line in text.splitlines() if line.startswith("  # -")]
    assert commented, text
    start = text.index(commented[0])
    block = text[start : text.index("\n", text.index("output: score", start))]
    uncommented = text.replace(block, block.replace("  # ", "  ").replace("#    ", "   "))
    (tmp_path / "p" / "panel_on.yaml").write_text(uncommented, encoding="utf-8")
    assert load_panel(tmp_path / "p" / "panel_on.yaml").judge("claude").output == "score"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def stub_server_process() -> Iterator[int]:
    """``juryflow stub-server --port PORT`` as the README starts it, on a free port: the
    fixed 8765 of the starter panel may be taken on a shared machine."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "juryflow", "stub-server", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1"),
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_llm_starter_panel_runs_its_prompt_file_against_the_stand_in(
    tmp_path: Path, stub_server_process: int
) -> None:
    # README: juryflow stub-server --port 8765 &
    #         juryflow run data.jsonl --panel panel_llm.yaml
    assert init("p", cwd=tmp_path).returncode == 0
    folder = tmp_path / "p"
    panel = folder / "panel_llm.yaml"
    text = panel.read_text(encoding="utf-8")
    assert f"juryflow stub-server --port {STUB_PORT} &" in text
    panel.write_text(text.replace(f":{STUB_PORT}", f":{stub_server_process}"), encoding="utf-8")

    db = tmp_path / "llm.duckdb"
    ran = juryflow("run", "data.jsonl", "--panel", "panel_llm.yaml", "--db", str(db), cwd=folder)
    assert ran.returncode == 0, ran.stderr
    prompt_sha = hashlib.sha256((folder / "my_prompt.txt").read_bytes()).hexdigest()
    _, rows = Store(db).query(
        "SELECT count(*), count(score), any_value(prompt_name), any_value(prompt_hash) "
        "FROM judgments WHERE judge_id = 'claude'"
    )
    assert rows == [(6, 6, f"file:my_prompt@{prompt_sha[:12]}", prompt_sha)]


def test_the_printed_command_names_the_script_the_shell_would_not_find(tmp_path: Path) -> None:
    """Issue 43: `juryflow agreement RUN` printed after a run failed with `command not found`
    when the virtualenv was not activated; the command shown is then the script's path."""
    script = Path(sys.executable).parent / "juryflow"
    bare = dict(os.environ, PATH="/usr/bin:/bin")  # no virtualenv on it
    found = dict(os.environ, PATH=f"{script.parent}{os.pathsep}/usr/bin:/bin")
    probe = "from juryflow.flows.runtime.interrupts import juryflow_command as c; print(c())"
    for env, expected in ((bare, ".venv/bin/juryflow"), (found, "juryflow")):
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, env=env
        )
        assert out.stdout.strip() == expected, out.stderr
