"""The command line, run in-process against real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
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
        "juryflow sql",
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
