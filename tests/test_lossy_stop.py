"""Lossy early stopping (issue 24, point 3: "an explicitly lossy mode whose out-of-fold
quality change is measured by `juryflow calibrate`").

The vectorised measure ``juryflow calibrate`` uses is checked against the per-item rule a
run uses; end to end, a run with ``lossy_agreement`` leaves out the calls calibrate said it
would, marks them ``lossy`` and keeps every other item's consensus as the full run's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juryflow.analysis.calibrate import calibration_data
from juryflow.flows.evaluate import evaluate
from juryflow.maths.calibration.data import CalibrationData
from juryflow.maths.lossy_stop import close_enough, lossy_report, span_agreement, stoppable
from juryflow.maths.records import Judgment, Span
from juryflow.maths.reducers import ConsensusRule
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.reads.analysis import calibration_rows
from juryflow.storage.store import Store
from tests import sim_panels
from tests.conftest import REPO, SAMPLE

KEY_ENV = "JURYFLOW_LOSSY_KEY"
TEXT = 40

judge_answer = st.one_of(
    st.none(),  # failed: unscored
    st.tuples(
        st.booleans(),  # verdict
        st.lists(st.tuples(st.integers(0, TEXT - 1), st.integers(1, 12)), max_size=3),
    ),
)


def _judgment(item: str, judge: str, answer: Any) -> Judgment:
    if answer is None:
        return Judgment(item, judge, "spans", None, unscored_reason="broken")
    verdict, raw = answer
    spans = tuple(
        Span(start, min(start + width, TEXT), "x" * (min(start + width, TEXT) - start), "exact")
        for start, width in raw
    )
    return Judgment(item, judge, "spans", 1.0 if verdict else 0.0, spans)


def _data(items: list[list[Judgment]]) -> CalibrationData:
    """The arrays calibration builds from a run's rows, for these judgments."""
    n, m = 3, len(items)
    verdicts = np.full((n, m), np.nan)
    covered = np.zeros((n, m * TEXT), dtype=bool)
    answered = np.zeros((n, m), dtype=bool)
    for i, judgments in enumerate(items):
        for j, judgment in enumerate(judgments):
            if judgment.score is None:
                continue
            verdicts[j, i] = float(bool(judgment.verdict))
            answered[j, i] = True
            for s in judgment.voting_spans:
                assert s.char_start is not None and s.char_end is not None
                covered[j, i * TEXT + s.char_start : i * TEXT + s.char_end] = True
    return CalibrationData(
        judge_ids=("a", "b", "c"),
        span_judge=np.ones(n, dtype=bool),
        verdicts=verdicts,
        scores=verdicts.copy(),
        covered=covered,
        span_answered=answered,
        char_item=np.repeat(np.arange(m), TEXT),
        word_id=np.arange(m * TEXT),
        gold_verdict=np.full(m, np.nan),
        gold_chars=np.zeros(m * TEXT, dtype=bool),
        span_labelled=np.zeros(m, dtype=bool),
        groups=np.asarray([str(i) for i in range(m)], dtype=object),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(st.tuples(judge_answer, judge_answer, judge_answer), min_size=1, max_size=6),
    agreement=st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]),
)
def test_calibrates_measure_stops_the_items_a_run_stops(
    items: list[tuple[Any, Any, Any]], agreement: float
) -> None:
    judged = [
        [_judgment(str(i), judge, answer) for judge, answer in zip("abc", row, strict=True)]
        for i, row in enumerate(items)
    ]
    by_run = [close_enough(judgments[:2], agreement) for judgments in judged]
    assert stoppable(_data(judged), [0, 1], agreement).tolist() == by_run


def test_span_agreement_is_character_f1() -> None:
    a = _judgment("i", "a", (True, [(0, 10)]))
    b = _judgment("i", "b", (True, [(5, 5)]))  # (start, width)
    assert span_agreement(a, b) == pytest.approx(2 * 5 / 15)
    assert span_agreement(_judgment("i", "a", (False, [])), _judgment("i", "b", (False, []))) == 1
    # Agreeing spans, different verdicts: not close.
    assert not close_enough([a, _judgment("i", "b", (False, [(0, 10)]))], 0.0)


# ------------------------------------------------------------------------ end to end


def _run(db: Path, panel: Path) -> dict[str, Any]:
    return asyncio.run(
        evaluate(RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(db), use_cache=False))
    )


@pytest.fixture(scope="module")
def stub() -> Any:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


@pytest.mark.usefixtures("prefect_harness")
def test_a_lossy_run_leaves_out_what_calibrate_measured(
    tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-lossy")
    full_panel = sim_panels.sim_panel(tmp_path / "full.yaml", stub, key_env=KEY_ENV)
    stub.stats.reset()
    full = _run(tmp_path / "full.duckdb", full_panel)
    full_calls = stub.stats.requests()

    store = Store(tmp_path / "full.duckdb")
    data = calibration_data(calibration_rows(store, full["run_id"], None), 2)
    report = lossy_report(
        data, ConsensusRule().resolve(True), ["strong", "medium", "weak"], 2, folds=2
    )
    measured = dict(zip((1.0, 0.9, 0.8, 0.7, 0.6, 0.5), report.in_sample, strict=False))
    saved_share = measured[0.5][0]

    lossy_panel = sim_panels.sim_panel(
        tmp_path / "lossy.yaml",
        stub,
        key_env=KEY_ENV,
        extra="early_stop: true\naudit_fraction: 0\njudge_order: panel\nlossy_agreement: 0.5\n",
    )
    stub.stats.reset()
    lossy = _run(tmp_path / "lossy.duckdb", lossy_panel)
    lossy_calls = stub.stats.requests()

    with Store(tmp_path / "lossy.duckdb").read() as con:
        skipped = con.execute(
            "SELECT item_id, judge_id, reason FROM skipped_judgments WHERE run_id = ?",
            [lossy["run_id"]],
        ).fetchall()
    reasons = {reason for _, _, reason in skipped}
    assert "lossy" in reasons, "the sample has items the first two judges nearly agree on"
    assert {judge for _, judge, _ in skipped} == {"weak"}
    assert lossy_calls == full_calls - len(skipped)
    assert len(skipped) == round(saved_share * full_calls)
    assert lossy["items_stopped_lossy"] == len({i for i, _, r in skipped if r == "lossy"})

    # Items not stopped lossily have the full run's consensus.
    lossy_items = {item for item, _, reason in skipped if reason == "lossy"}
    decision = (
        "SELECT item_id, status, score_median, hallucinated FROM consensus WHERE run_id = ? "
        "ORDER BY item_id"
    )
    with store.read() as con:
        full_rows = con.execute(decision, [full["run_id"]]).fetchall()
    with Store(tmp_path / "lossy.duckdb").read() as con:
        lossy_rows = con.execute(decision, [lossy["run_id"]]).fetchall()
    assert [r for r in lossy_rows if r[0] not in lossy_items] == [
        r for r in full_rows if r[0] not in lossy_items
    ]


@pytest.mark.usefixtures("prefect_harness")
def test_the_readmes_lossy_panel_runs_as_shipped(
    tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: `juryflow run ... --panel examples/panel.sim-3span-lossy.yaml`, the
    stand-in's port in place of 8765."""
    monkeypatch.setenv("JURYFLOW_STUB_KEY", "anything")
    shipped = (REPO / "examples" / "panel.sim-3span-lossy.yaml").read_text(encoding="utf-8")
    base = stub.openai_base_url.removesuffix("/v1")
    panel = tmp_path / "panel.sim-3span-lossy.yaml"
    panel.write_text(shipped.replace("http://127.0.0.1:8765", base), encoding="utf-8")
    summary = _run(tmp_path / "lossy.duckdb", panel)
    assert summary["items_stopped_lossy"] > 0
    with Store(tmp_path / "lossy.duckdb").read() as con:
        reasons = con.execute(
            "SELECT DISTINCT reason FROM skipped_judgments WHERE run_id = ? ORDER BY 1",
            [summary["run_id"]],
        ).fetchall()
    assert reasons == [("decided",), ("lossy",)]
