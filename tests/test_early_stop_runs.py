"""Exact early stopping end to end (issue 24, point 3): real Prefect, real HTTP to the
stand-in's simulated span judges, real DuckDB. An early-stopped run makes fewer calls and
stores the same consensus as a full run; the judges it left out are `skipped: decided`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from juryflow.flows.evaluate import evaluate
from juryflow.maths.early_stop import in_audit
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from tests import sim_panels
from tests.conftest import SAMPLE
from tests.sim_panels import DECISION

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

KEY_ENV = "JURYFLOW_EARLY_STOP_KEY"


def sim_panel(path: Path, stub: StubHandle, extra: str = "") -> Path:
    return sim_panels.sim_panel(path, stub, key_env=KEY_ENV, extra=extra)


def _run(db: Path, panel: Path, **options: Any) -> dict[str, Any]:
    return asyncio.run(
        evaluate(
            RunRequest(
                dataset=str(SAMPLE), panel=str(panel), db=str(db), use_cache=False, **options
            )
        )
    )


def _rows(db: Path, run_id: str, sql: str) -> list[tuple[Any, ...]]:
    with Store(db).read() as con:
        return con.execute(sql, [run_id]).fetchall()


@pytest.fixture(scope="module")
def stub() -> Any:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


def test_an_early_stopped_run_stores_the_full_runs_consensus_with_fewer_calls(
    tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-early-stop")
    panel = sim_panel(tmp_path / "panel.yaml", stub)
    stub.stats.reset()
    full = _run(tmp_path / "full.duckdb", panel)
    full_calls = stub.stats.requests()
    stub.stats.reset()
    early = _run(tmp_path / "early.duckdb", panel, early_stop=True, audit_fraction=0.2)
    early_calls = stub.stats.requests()

    assert _rows(tmp_path / "early.duckdb", early["run_id"], DECISION) == _rows(
        tmp_path / "full.duckdb", full["run_id"], DECISION
    )
    skipped = _rows(
        tmp_path / "early.duckdb",
        early["run_id"],
        "SELECT item_id, judge_id, reason FROM skipped_judgments WHERE run_id = ?",
    )
    assert skipped, "the sample has items two judges decide"
    assert early_calls == full_calls - len(skipped)
    assert {reason for _, _, reason in skipped} == {"decided"}
    # Cheapest first, and every stub model is unpriced: the panel's order, so only the
    # third judge is ever left out.
    assert {judge for _, judge, _ in skipped} == {"weak"}
    audit = {
        row[0]
        for row in _rows(
            tmp_path / "early.duckdb",
            early["run_id"],
            "SELECT item_id FROM audit_items WHERE run_id = ?",
        )
    }
    items = _rows(
        tmp_path / "early.duckdb", early["run_id"], "SELECT item_id FROM items WHERE run_id = ?"
    )
    assert audit == {row[0] for row in items if in_audit(row[0], 0.2, 0)}
    assert not audit & {item for item, _, _ in skipped}
    # Every item: each judge either answered (scored or not) or was left out as decided.
    covered = _rows(
        tmp_path / "early.duckdb",
        early["run_id"],
        "SELECT item_id, count(*) FROM (SELECT item_id, judge_id FROM judgments WHERE run_id = $1 "
        "UNION ALL SELECT item_id, judge_id FROM skipped_judgments WHERE run_id = $1) "
        "GROUP BY item_id HAVING count(*) <> 3",
    )
    assert covered == []
    assert early["skipped_decided"] == len(skipped)
    from juryflow.flows.artifacts import run_markdown

    markdown = run_markdown(Store(tmp_path / "early.duckdb"), early["run_id"])
    assert f"**early stopping**: {len(skipped)} judge calls skipped (decided)" in markdown

    # Agreement only where every judge judged (the random audit sample); the consensus's
    # accuracy over every item, as the full run's.
    from juryflow.analysis.agreement_report import agreement_report

    report = agreement_report(Store(tmp_path / "early.duckdb"), early["run_id"])
    whole = agreement_report(Store(tmp_path / "full.duckdb"), full["run_id"])
    assert f"over the {len(audit)} audit items" in " ".join(report.notes)
    by_predictor = {a.predictor: a for a in report.accuracy}
    assert by_predictor["weak"].n_items == len(audit)
    assert by_predictor["consensus"] == {a.predictor: a for a in whole.accuracy}["consensus"]

    # The viewer's item page says which judge was left out, and why.
    import httpx

    from juryflow.viewer.server import start_in_thread
    from juryflow.viewer.state import ViewerState

    item, judge, _ = skipped[0]
    from juryflow.viewer.item_model import item_href

    viewer = start_in_thread(ViewerState(Store(tmp_path / "early.duckdb"), "tester"))
    try:
        page = httpx.get(viewer.url.rstrip("/") + item_href(early["run_id"], item)).text
    finally:
        viewer.stop()
    assert f"Skipped (decided): {judge}" in page


def test_a_rule_that_cannot_prove_exactness_calls_every_judge(
    tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.planning.run_setup import preflight

    monkeypatch.setenv(KEY_ENV, "sk-early-stop")
    weighted = "consensus: {verdict: weighted, weights: {strong: 2}}\nearly_stop: true\n"
    panel = sim_panel(tmp_path / "panel.yaml", stub, weighted)
    warnings = preflight(
        RunRequest(
            dataset=str(SAMPLE), panel=str(panel), mapping=None, db=str(tmp_path / "w.duckdb")
        )
    )
    assert warnings == [
        "early_stop is off for this run: verdict rule weighted is not proved exact "
        "(a weight can turn a vote around); every judge is called"
    ]
    stub.stats.reset()
    summary = _run(tmp_path / "w.duckdb", panel, limit=10)
    assert stub.stats.requests() == 30
    assert summary["skipped_decided"] == 0


def test_a_resumed_early_stopped_run_calls_no_judge_twice_and_none_it_left_out(
    tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped by its budget mid-way, then resumed: the calls of both invocations are those
    of one uninterrupted early-stopped run, and so is the consensus."""
    from prefect.exceptions import CancelledRun

    monkeypatch.setenv(KEY_ENV, "sk-early-stop")
    models = (
        "stub-sim-spans-r0.8-f0.1-j0.2-n0.1",
        "stub-sim-spans-r0.6-f0.3-j0.3-n0.2",
        "stub-sim-spans-r0.4-f0.5-j0.4-n0.2-o0.3-b0.05",
    )
    priced = ", ".join(f"{model}: {{input: 1.0, output: 1.0}}" for model in models)
    prices = f"prices: {{{priced}}}\n"
    panel = sim_panel(tmp_path / "panel.yaml", stub, prices + "early_stop: true\n")
    stub.stats.reset()
    whole = _run(tmp_path / "whole.duckdb", panel, chunk_size=10)
    whole_calls = stub.stats.requests()
    stub.stats.reset()
    with pytest.raises(CancelledRun, match="budget reached") as stopped:
        _run(tmp_path / "resumed.duckdb", panel, chunk_size=10, max_cost=0.05)
    run_id = str(stopped.value).split("run ", 1)[1].split(" ", 1)[0]
    first_calls = stub.stats.requests()
    assert 0 < first_calls < whole_calls
    resumed = asyncio.run(
        evaluate(RunRequest(resume=run_id, db=str(tmp_path / "resumed.duckdb"), chunk_size=10))
    )
    assert stub.stats.requests() == whole_calls
    assert _rows(tmp_path / "resumed.duckdb", resumed["run_id"], DECISION) == _rows(
        tmp_path / "whole.duckdb", whole["run_id"], DECISION
    )
    assert resumed["skipped_decided"] == whole["skipped_decided"] > 0
