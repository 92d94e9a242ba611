"""Re-aggregating an early-stopped run (issue 24): its consensus is exact for its own rule
only, so another rule is computed over the judges it called, and the summary says so in
one line. Real Prefect, real HTTP to the stand-in's simulated span judges, real DuckDB."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.flows.evaluate import evaluate
from juryflow.flows.reaggregate import reaggregate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from tests.conftest import SAMPLE
from tests.sim_panels import sim_panel

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

KEY_ENV = "JURYFLOW_REAGGREGATE_KEY"


@pytest.fixture(scope="module")
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


@pytest.fixture
def panel(tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-reaggregate")
    return sim_panel(tmp_path / "panel.yaml", stub, key_env=KEY_ENV)


def _evaluate(db: Path, panel: Path, early_stop: bool) -> str:
    where = {"dataset": str(SAMPLE), "panel": str(panel), "db": str(db)}
    summary = asyncio.run(evaluate(RunRequest(**where, use_cache=False, early_stop=early_stop)))
    return str(summary["run_id"])


def test_another_rule_over_an_early_stopped_run_is_said_in_one_line(
    tmp_path: Path, panel: Path
) -> None:
    db = tmp_path / "early.duckdb"
    early = _evaluate(db, panel, early_stop=True)
    assert Store(db).skipped_pairs(early), "the sample has items two judges decide"

    # Its own rule and quorum: exact, nothing to say.
    same = asyncio.run(reaggregate(run_id=early, db=str(db)))
    assert same["warnings"] == []

    union = asyncio.run(reaggregate(run_id=early, db=str(db), consensus=["spans=union"]))
    [warning] = union["warnings"]
    assert f"run {early} stopped early" in warning
    assert "without --early-stop" in warning
    assert "\n" not in warning
    fewer = asyncio.run(reaggregate(run_id=early, db=str(db), quorum=1))
    assert len(fewer["warnings"]) == 1

    from juryflow.cli import app

    result = CliRunner().invoke(
        app, ["reaggregate", early, "--consensus", "spans=union", "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and "without --early-stop" in lines[0], result.output


def test_another_rule_over_a_run_that_called_every_judge_says_nothing(
    tmp_path: Path, panel: Path
) -> None:
    full = _evaluate(tmp_path / "full.duckdb", panel, early_stop=False)
    union = asyncio.run(
        reaggregate(run_id=full, db=str(tmp_path / "full.duckdb"), consensus=["spans=union"])
    )
    assert union["warnings"] == []
