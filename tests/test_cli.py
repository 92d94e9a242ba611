"""The command line, run in-process against real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from tests.conftest import SAMPLE

runner = CliRunner()


@pytest.mark.usefixtures("prefect_harness")
def test_run_prints_progress_and_a_summary(tmp_path: Path) -> None:
    db = tmp_path / "cli.duckdb"
    result = runner.invoke(app, ["run", str(SAMPLE), "--db", str(db), "--chunk-size", "20"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "60/60" in out
    for label in (
        "items",
        "judges",
        "scored",
        "consensus hallucination rate",
        "mean score spread",
        "run",
        "store",
        "juryflow agreement",
    ):
        assert label in out
    assert str(db) in out


def test_run_fails_fast_on_a_bad_panel(tmp_path: Path) -> None:
    panel = tmp_path / "p.yaml"
    panel.write_text("judges:\n  - {id: a, provider: openai, model: m, prompt: nope}\n")
    result = runner.invoke(app, ["run", "--panel", str(panel), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "unknown prompt 'nope'" in result.output


def test_run_names_the_missing_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    panel = tmp_path / "p.yaml"
    panel.write_text(
        "judges:\n  - {id: c, provider: anthropic, model: claude-sonnet-4-5, "
        "prompt: data2txt_spans}\n"
    )
    result = runner.invoke(app, ["run", "--panel", str(panel), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY" in result.output
    assert not (tmp_path / "x.db").exists()


def test_run_rejects_a_bad_map(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--map", "oops", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and "VAR=COLUMN" in result.output


@pytest.mark.usefixtures("prefect_harness")
def test_bad_rows_are_stored_and_listed_while_the_rest_is_judged(tmp_path: Path) -> None:
    import json

    from juryflow.storage.store import Store

    good = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:3]]
    lines = [json.dumps(good[0]).encode(), b"{not json", json.dumps(good[1]).encode()]
    lines += [b'{"id": "bad-utf8", "reference": "r", "response": "caf\xe9"}']
    lines += [json.dumps({**good[2], "id": "empty", "response": "  "}).encode()]
    lines += [json.dumps({**good[2], "id": "huge", "response": "x" * 1_048_576}).encode()]
    lines += [json.dumps(good[2]).encode()]
    dataset = tmp_path / "mixed.jsonl"
    dataset.write_bytes(b"\n".join(lines) + b"\n")
    db = tmp_path / "mixed.duckdb"

    result = runner.invoke(app, ["run", str(dataset), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "4 rejected rows" in result.output
    for line in ("line 2: malformed JSON", "line 4: invalid UTF-8", "line 5:", "line 6:"):
        assert line in result.output
    _, errors = Store(db).query("SELECT row_number, error FROM row_errors ORDER BY row_number")
    assert [r[0] for r in errors] == [2, 4, 5, 6]
    assert "is empty" in errors[2][1] and "1,048,576 characters" in errors[3][1]
    _, judged = Store(db).query("SELECT count(DISTINCT item_id), count(*) FROM judgments")
    assert judged == [(3, 9)]


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    from juryflow.cli import app

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"juryflow {version('juryflow')}"
