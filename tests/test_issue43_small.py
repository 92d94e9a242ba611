"""Issue 43: four user errors that each get one line naming the fix.

`report -o` over an existing file, `server stop --port`, a panel with no judges and a CSV
saved as .jsonl. The real CLI on real files (and, for the server, a real process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.records import Item
from juryflow.storage.datasets import DatasetError, RowError, dataset_columns, read_items
from tests.conftest import SAMPLE

runner = CliRunner()

JURYFLOW = str(Path(sys.executable).with_name("juryflow"))


def _error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


# -- 1. report -o FILE does not overwrite FILE unless --force -----------------------------


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> Path:
    db = tmp_path_factory.mktemp("issue43") / "runs.duckdb"
    result = runner.invoke(app, ["run", str(SAMPLE), "--db", str(db), "--limit", "3"])
    assert result.exit_code == 0, result.output
    return db


def test_report_refuses_an_existing_file_until_force(one_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "notes.html"
    page.write_text("my notes", encoding="utf-8")
    refused = runner.invoke(app, ["report", "--db", str(one_run), "-o", str(page)])
    assert refused.exit_code == 2
    line = _error_line(refused.output)
    assert f"{page} exists; pass --force to overwrite it" in line
    assert page.read_text(encoding="utf-8") == "my notes"

    forced = runner.invoke(app, ["report", "--db", str(one_run), "-o", str(page), "--force"])
    assert forced.exit_code == 0, forced.output
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_report_writes_a_new_file_without_force(one_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "new.html"
    result = runner.invoke(app, ["report", "--db", str(one_run), "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# -- 2. server stop --port ----------------------------------------------------------------


def _server(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run(
        [JURYFLOW, "server", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def recorded_server(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process `juryflow server start` would have left: its own session, 'prefect' in its
    command line (which `stop` checks, against a reused pid), recorded on port 4321."""
    code = "import time; time.sleep(120)"
    process = subprocess.Popen([sys.executable, "-c", code, "prefect"], start_new_session=True)
    record = {"pid": process.pid, "host": "127.0.0.1", "port": 4321, "log": "x.log"}
    (tmp_path / "juryflow-server.json").write_text(json.dumps(record), encoding="utf-8")
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def test_server_stop_port_leaves_a_server_on_another_port(
    tmp_path: Path, recorded_server: subprocess.Popen[bytes]
) -> None:
    result = _server(tmp_path, "stop", "--port", "4322")
    assert result.returncode == 0, result.stderr
    line = _error_line(result.stdout)
    assert "no server started by `juryflow server start` runs on port 4322" in line
    assert "`juryflow server stop --port 4321`" in line
    assert recorded_server.poll() is None
    assert (tmp_path / "juryflow-server.json").exists()


def test_server_stop_port_stops_the_server_on_that_port(
    tmp_path: Path, recorded_server: subprocess.Popen[bytes]
) -> None:
    result = _server(tmp_path, "stop", "--host", "127.0.0.1", "--port", "4321")
    assert result.returncode == 0, result.stderr
    assert "Prefect server http://127.0.0.1:4321" in result.stdout and "stopped" in result.stdout
    deadline = time.monotonic() + 10
    while recorded_server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert recorded_server.poll() is not None
    assert not (tmp_path / "juryflow-server.json").exists()


def test_server_stop_port_without_a_server_says_none_runs_there(tmp_path: Path) -> None:
    result = _server(tmp_path, "stop", "--port", "4323")
    assert result.returncode == 0, result.stderr
    line = _error_line(result.stdout)
    assert line == "no server started by `juryflow server start` runs on port 4323"


# -- 3. a panel with no judges --------------------------------------------------------------


@pytest.mark.parametrize("judges", ["judges: []\n", "judges:\n"])
def test_a_panel_without_judges_names_the_fix(tmp_path: Path, judges: str) -> None:
    panel = tmp_path / "panel.yaml"
    panel.write_text(f"name: empty\n{judges}", encoding="utf-8")
    result = runner.invoke(app, ["run", "--panel", str(panel), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    line = _error_line(result.output)
    assert f"{panel}: judges: no judge listed; list at least one" in line
    assert "- {id: numbers, provider: offline, detector: numbers}" in line
    assert "Tuple should have" not in line


# -- 4. a CSV file named .jsonl -------------------------------------------------------------


def test_a_csv_named_jsonl_is_refused_naming_the_fix(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("id,reference,response\n1,the sky is blue,it is green\n", encoding="utf-8")
    result = runner.invoke(app, ["run", str(data), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    line = _error_line(result.output)
    assert (
        f"{data}: line 1 is not a JSON object (it looks like a CSV header): rename the file "
        "to .csv, or write one JSON object per line"
    ) in line
    assert "columns are" not in line


def test_a_json_array_named_jsonl_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('\n[{"reference": "r", "response": "x"}]\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="line 2 is not a JSON object \\(it is a JSON array\\)"):
        dataset_columns(data)


def test_a_broken_later_line_stays_a_row_error(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    good = [json.dumps({"id": str(n), "reference": "r", "response": "x"}) for n in range(8)]
    good[6] = "id,reference,response"  # line 7
    data.write_text("\n".join(good) + "\n", encoding="utf-8")
    rows = list(read_items(data, ["reference", "response"]))
    errors = {row.row_number: row.error for row in rows if isinstance(row, RowError)}
    assert list(errors) == [7] and errors[7].startswith("malformed JSON")
    assert len([row for row in rows if isinstance(row, Item)]) == 7


def test_a_cut_off_first_object_stays_a_row_error(tmp_path: Path) -> None:
    """A first line that is an object gone wrong is a row, reported with its number, as any
    later line would be; only a first line that is no object at all says the file's
    format is wrong."""
    data = tmp_path / "data.jsonl"
    rows_text = [json.dumps({"id": str(n), "reference": "r", "response": "x"}) for n in range(3)]
    rows_text[0] = rows_text[0][:12]
    data.write_text("\n".join(rows_text) + "\n", encoding="utf-8")
    assert dataset_columns(data) == ["id", "reference", "response"]
    rows = list(read_items(data, ["reference", "response"]))
    assert [row.row_number for row in rows if isinstance(row, RowError)] == [1]


@pytest.mark.parametrize(
    ("panel", "line"),
    [
        (
            {"qourum": 2, "judges": [{"id": "a", "provider": "offline", "detector": "numbers"}]},
            "panel: qourum: not a key this takes (did you mean 'quorum'?)",
        ),
        (
            {"judges": [{"id": "a", "provider": "offline", "detecter": "numbers"}]},
            "panel: judges.0.detecter: not a key this takes (did you mean 'detector'?)",
        ),
        (
            {
                "consensus": {"verdict": "weighted", "weights": {"strng": 2}},
                "judges": [{"id": "strong", "provider": "offline", "detector": "numbers"}],
            },
            "consensus.weights name judge(s) strng (did you mean 'strong'?)",
        ),
    ],
)
def test_a_misspelt_panel_key_or_judge_id_gets_the_close_one(
    panel: dict[str, object], line: str
) -> None:
    """Issue 43: "did you mean" for panel keys and judge ids."""
    from juryflow.judges.panel import PanelError, parse_panel

    with pytest.raises(PanelError) as refused:
        parse_panel(panel)
    assert line in str(refused.value) and "\n" not in str(refused.value)


def test_a_stale_prefect_api_url_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    """Issue 43: `error: Failed to reach API at ...` gave no hint."""
    env = dict(
        os.environ,
        PREFECT_API_URL="http://127.0.0.1:9/api",  # port 9 (discard): nothing answers
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
    )
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", "run", "--limit", "1", "--db", str(tmp_path / "s.db")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "Failed to reach API at http://127.0.0.1:9/api" in line
    assert "start one with `juryflow server start`, or unset PREFECT_API_URL" in line


def test_a_regressed_check_prints_no_prefect_error_line_and_markdown_on_request(
    tmp_path: Path,
) -> None:
    """Issue 43: the regressed case also printed Prefect's ERROR report of the flow run it
    ended Failed on purpose, beside the command's own lines; `--format markdown` gives the
    verdict for a CI step summary or a pull-request comment."""
    from tests.test_regression import PANEL

    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    db = str(tmp_path / "s.duckdb")
    codes = []
    for name, detector in (("good", "numbers"), ("changed", "content")):
        panel = tmp_path / f"{name}.yaml"
        panel.write_text(PANEL.format(numbers=detector), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "juryflow", "regression", str(SAMPLE), "--panel", str(panel),
             "--db", db, "--suite", "s", "--limit", "12",
             *(["--format", "markdown"] if name == "changed" else [])],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        codes.append(done.returncode)
    assert codes == [0, 1], done.stderr
    assert "ERROR" not in done.stderr, done.stderr
    # the second check asked for Markdown (a CI step summary): the verdict on stdout
    assert done.stdout.startswith("### juryflow regression: regressed"), done.stdout
    assert "| check | value | allowed |" in done.stdout


def test_the_summarys_duration_is_the_commands_with_the_judging_beside_it() -> None:
    """A 6-item run said `duration 2.3 s` after 52 s at the terminal: the command's wall
    time is what a person waited."""
    from juryflow.terminal.output import _pace_rows

    rows = dict(_pace_rows({"duration_seconds": 2.3, "command_seconds": 51.9}))
    assert rows["duration"] == "51.9 s for the command (judging 2.3 s)"
    assert dict(_pace_rows({"duration_seconds": 2.3}))["duration"] == "2.3 s"
