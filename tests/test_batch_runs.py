"""Batch mode end to end (issue 24, point 1): real Prefect, both SDKs' real batch methods
over HTTP to the stand-in's batch APIs, real DuckDB.

A batch run stores the real-time run's consensus at batch prices; requests a batch left
unanswered are unscored with the provider's reason and `--resume` sends only those again;
early stopping is rounds of batches; a batch that outlasts `--batch-wait` is left running
and read by `--resume`; a server without a batch API is judged in real time with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.exceptions import CancelledRun

from juryflow.flows.evaluate import evaluate
from juryflow.flows.runtime import interrupts, progress
from juryflow.judges.batches.records import BatchFailure
from juryflow.judges.batches.resend import RESEND, failure_reason, resendable
from juryflow.judges.batches.waiting import poll_backoff
from juryflow.judges.budget import BUDGET_EXIT_CODE
from juryflow.judges.providers.price import Price
from juryflow.maths.records import unscored
from juryflow.planning.run_request import RunRequest
from juryflow.standin.batches import stats_of
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from juryflow.terminal.progress_view import Tally
from tests.conftest import REPO, SAMPLE
from tests.sim_panels import DECISION, MEDIUM, STRONG, THREE_JUDGES, sim_panel

KEY_ENV = "JURYFLOW_BATCH_KEY"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURYFLOW_BATCH_POLL_SECONDS", "0.01")
    monkeypatch.setenv(KEY_ENV, "sk-batch-runs")


def panel_file(
    path: Path, stub: StubHandle, judges: tuple[tuple[str, str, str], ...], extra: str = ""
) -> Path:
    """A panel of ``(id, provider, model)`` judges on the stand-in, every model priced."""
    return sim_panel(path, stub, judges, key_env=KEY_ENV, name="batched", priced=True, extra=extra)


def run(db: Path, panel: Path | None = None, **options: Any) -> dict[str, Any]:
    where = {"dataset": str(SAMPLE), "panel": str(panel)} if panel is not None else {}
    return asyncio.run(evaluate(RunRequest(db=str(db), use_cache=False, **where, **options)))


def rows(db: Path, run_id: str, sql: str) -> list[tuple[Any, ...]]:
    with Store(db).read() as con:
        return con.execute(sql, [run_id]).fetchall()


def stopped(db: Path, panel: Path | None = None, **options: Any) -> tuple[str, str]:
    """Run, expecting a resumable stop: the run's id and the one line the run printed."""
    interrupts.take()
    with pytest.raises(CancelledRun):
        run(db, panel, **options)
    outcome = interrupts.take()
    assert outcome is not None and outcome.run_id is not None
    assert outcome.interruption.exit_code == BUDGET_EXIT_CODE
    return outcome.run_id, outcome.message


@pytest.fixture(scope="module")
def gold_stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


@pytest.fixture
def events() -> Iterator[list[progress.Event]]:
    seen: list[progress.Event] = []
    progress.add_listener(seen.append)
    try:
        yield seen
    finally:
        progress.remove_listener(seen.append)


# -- the parts ------------------------------------------------------------------------------


def test_what_a_batch_left_unanswered_is_sent_again_and_what_would_fail_again_is_not() -> None:
    for failure, again in (
        (BatchFailure("expired", "expired"), True),
        (BatchFailure("canceled", "canceled"), True),
        (BatchFailure("failed", "batch failed: token limit"), True),
        (BatchFailure("missing", "no result in batch b"), True),
        (BatchFailure("errored", "overloaded", 529), True),
        (BatchFailure("errored", "slow down", 429), True),
        (BatchFailure("errored", "no status"), True),
        (BatchFailure("errored", "prompt too long", 400), False),
        (BatchFailure("errored", "unknown model", 404), False),
    ):
        reason, resend = failure_reason("batch_1", failure)
        assert resend is again, failure
        assert "batch_1" in reason and failure.reason in reason
        judgment = unscored("i", "j", "spans", reason, batch_id="batch_1")
        assert resendable(judgment) is again
        assert reason.endswith(RESEND) is again
    assert not resendable(unscored("i", "j", "spans", "provider error after 5 attempts: 500"))


def test_polls_wait_by_the_setting_and_double(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURYFLOW_BATCH_POLL_SECONDS", "2")
    assert poll_backoff().delays()[:4] == [2, 4, 8, 16] and poll_backoff().maximum == 24
    monkeypatch.delenv("JURYFLOW_BATCH_POLL_SECONDS")
    assert poll_backoff().initial == 5 and poll_backoff().maximum == 60
    monkeypatch.setenv("JURYFLOW_BATCH_POLL_SECONDS", "soon")
    with pytest.raises(ValueError, match="JURYFLOW_BATCH_POLL_SECONDS"):
        poll_backoff()


def test_the_progress_line_shows_where_the_batches_stand() -> None:
    tally = Tally()
    tally.take(progress.Total(10, 2))
    tally.take(progress.BatchStatus("a", "b1", "validating", 0, 10))
    tally.take(progress.BatchStatus("b", "b2", "in_progress", 4, 10))
    assert "batches 1 validating, 1 in progress (4/20 requests done)" in tally.line()
    tally.take(progress.BatchStatus("a", "b1", "completed", 10, 10))
    tally.take(progress.BatchStatus("b", "b2", "in_progress", 7, 10))
    assert "batches 1 in progress, 1 completed (17/20 requests done)" in tally.line()


def test_a_dry_run_costs_batch_judges_at_batch_prices() -> None:
    from juryflow.planning.dry_run import estimate_run

    panel = str(REPO / "examples" / "panel.stub.yaml")
    full = estimate_run(RunRequest(dataset=str(SAMPLE), panel=panel, limit=10))
    batch = estimate_run(RunRequest(dataset=str(SAMPLE), panel=panel, limit=10, batch=True))
    for real_time, batched in zip(full.judges, batch.judges, strict=True):
        assert batched.batch is (real_time.model is not None)
        assert batched.cost_usd == pytest.approx((real_time.cost_usd or 0) / 2)
        assert batched.cost_max_usd == pytest.approx((real_time.cost_max_usd or 0) / 2)
    assert any("claude-stub's calls go through its provider's batch API" in n for n in batch.notes)
    assert batch.table().column("batch").to_pylist() == [True, True, False]


def test_the_readme_dry_run_with_batch_says_batch() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "juryflow", "run", "examples/ragtruth_data2txt_sample.jsonl",
         "--panel", "examples/panel.stub.yaml", "--batch", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # $0.4799 and $0.4812 at full price (the README's table; claude-stub's static prompt
    # part priced as cached)
    assert "$0.2400" in result.stdout and "$0.2406" in result.stdout
    assert "batch: gpt-stub's calls go through its provider's batch API" in result.stdout


# -- runs -------------------------------------------------------------------------------------

runs = pytest.mark.usefixtures("prefect_harness")


@runs
def test_a_batch_run_stores_the_real_time_consensus_at_batch_prices(
    tmp_path: Path, gold_stub: StubHandle, events: list[progress.Event]
) -> None:
    judges = (("strong", "anthropic", STRONG), ("medium", "openai", MEDIUM))
    panel = panel_file(tmp_path / "panel.yaml", gold_stub, judges)
    real_time = run(tmp_path / "real-time.duckdb", panel)
    batches = stats_of(gold_stub.server)
    batches.reset()
    batched = run(tmp_path / "batch.duckdb", panel, batch=True)

    decision = rows(tmp_path / "batch.duckdb", batched["run_id"], DECISION)
    assert decision == rows(tmp_path / "real-time.duckdb", real_time["run_id"], DECISION)
    assert len(decision) == 60
    # every answer from a batch, one batch per judge (the whole sample is one chunk)
    snapshot = batches.snapshot()
    assert snapshot["batches_created"] == 2 and snapshot["batch_requests"] == 120
    per_judge = (
        "SELECT judge_id, count(DISTINCT batch_id), count(batch_id), sum(input_tokens), "
        "sum(output_tokens) FROM judgments WHERE run_id = ? GROUP BY judge_id ORDER BY judge_id"
    )
    batch_rows = rows(tmp_path / "batch.duckdb", batched["run_id"], per_judge)
    full_rows = rows(tmp_path / "real-time.duckdb", real_time["run_id"], per_judge)
    for (judge, ids, count, inp, out), full in zip(batch_rows, full_rows, strict=True):
        assert (judge, ids, count) == (full[0], 1, 60)
        assert full[1:3] == (0, 0)  # real time: no batch
        assert (inp, out) == full[3:5]  # the same answers, the same usage
    # each call at its provider's batch price (cache reads and writes discounted alike)
    price = Price(input=1.0, output=4.0)
    usage = (
        "SELECT input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd "
        "FROM judgments WHERE run_id = ?"
    )
    totals = []
    for db, run_id, batch in (
        (tmp_path / "batch.duckdb", batched["run_id"], True),
        (tmp_path / "real-time.duckdb", real_time["run_id"], False),
    ):
        costs = rows(db, run_id, usage)
        for inp, out, written, read, cost in costs:
            expected = price.cost(
                inp, out, cache_write_tokens=written, cache_read_tokens=read, batch=batch
            )
            assert cost == pytest.approx(expected)
        totals.append(sum(row[-1] for row in costs))
    # about half (the provider's cache served the two runs' prompts a little differently)
    assert 0.4 < totals[0] / totals[1] < 0.6
    run_row = Store(tmp_path / "batch.duckdb").get_run(batched["run_id"])
    assert run_row is not None and run_row.panel["batch"] is True
    assert (run_row.parameters or {})["chunk_size"] == 10_000
    # progress: each batch's states as it was polled, up to its end
    states = [e for e in events if isinstance(e, progress.BatchStatus)]
    assert {e.judge_id for e in states} == {"strong", "medium"}
    assert {e.state for e in states} >= {"in_progress", "completed"}
    assert all(e.ended == (e.state == "completed") for e in states)


@runs
def test_requests_a_batch_left_unanswered_are_unscored_with_the_reason_and_resume_sends_them(
    tmp_path: Path, gold_stub: StubHandle
) -> None:
    # Faults by request number: the first requests of each model fail inside the batch.
    judges = (
        ("a", "anthropic", STRONG + "+500x1+hangx1+400x1"),
        ("o", "openai", MEDIUM + "+hangx1+429x1"),
    )
    panel = panel_file(tmp_path / "panel.yaml", gold_stub, judges)
    db = tmp_path / "store.duckdb"
    batches = stats_of(gold_stub.server)
    batches.reset()
    run_id, message = stopped(db, panel, batch=True, limit=6)
    assert (
        "4 requests not answered in their batches (errored 2, expired 2), stored unscored "
        "with the provider's reason; --resume sends only those again" in message
    )
    assert f"juryflow run --resume {run_id}" in message
    failed = rows(
        db,
        run_id,
        "SELECT judge_id, item_id, unscored_reason, batch_id FROM judgments "
        "WHERE run_id = ? AND score IS NULL ORDER BY judge_id, unscored_reason",
    )
    reasons = {(judge, reason.split(": ", 1)[0]) for judge, _, reason, _ in failed}
    assert len(failed) == 5 and all(batch_id for *_, batch_id in failed)
    assert reasons == {
        ("a", "not answered in batch " + failed[0][3]),
        ("a", "provider error in batch " + failed[0][3]),
        ("o", "not answered in batch " + failed[3][3]),
        ("o", "provider error in batch " + failed[3][3]),
    }
    texts = [reason for _, _, reason, _ in failed]
    assert sum("HTTP 500: stub: batch request failed with HTTP 500" in t for t in texts) == 1
    assert sum("HTTP 429: stub: batch request failed with HTTP 429" in t for t in texts) == 1
    assert sum("expired: expired" in t for t in texts) == 2
    final = [t for t in texts if "HTTP 400" in t]
    assert len(final) == 1 and not final[0].endswith(RESEND)  # an error that would repeat
    waiting = {item for _, item, reason, _ in failed if reason.endswith(RESEND)}
    have_consensus = {
        r[0] for r in rows(db, run_id, "SELECT item_id FROM consensus WHERE run_id = ?")
    }
    assert len(have_consensus) == 6 - len(waiting) and not waiting & have_consensus
    assert Store(db).get_run(run_id).status == "interrupted"  # type: ignore[union-attr]

    resumed = run(db, resume=run_id)
    assert resumed["run_id"] == run_id
    assert Store(db).get_run(run_id).status == "completed"  # type: ignore[union-attr]
    snapshot = batches.snapshot()
    # one new batch per judge, holding only the four requests left unanswered
    assert snapshot["batches_created"] == 4 and snapshot["batch_requests"] == 12 + 4
    after = rows(
        db,
        run_id,
        "SELECT count(*), count(score), list(unscored_reason) FILTER (WHERE score IS NULL) "
        "FROM judgments WHERE run_id = ?",
    )
    assert after[0][0] == 12 and after[0][1] == 11 and after[0][2] == final
    assert len(rows(db, run_id, "SELECT item_id FROM consensus WHERE run_id = ?")) == 6


@runs
def test_early_stopping_in_batch_mode_is_rounds_of_batches_with_the_full_consensus(
    tmp_path: Path, gold_stub: StubHandle
) -> None:
    panel = panel_file(tmp_path / "panel.yaml", gold_stub, THREE_JUDGES, "judge_order: panel\n")
    full = run(tmp_path / "full.duckdb", panel)
    batches = stats_of(gold_stub.server)
    batches.reset()
    early = run(tmp_path / "early.duckdb", panel, batch=True, early_stop=True, audit_fraction=0.2)
    assert rows(tmp_path / "early.duckdb", early["run_id"], DECISION) == rows(
        tmp_path / "full.duckdb", full["run_id"], DECISION
    )
    per_judge = dict(
        rows(
            tmp_path / "early.duckdb",
            early["run_id"],
            "SELECT judge_id, count(DISTINCT batch_id) FROM judgments WHERE run_id = ? "
            "GROUP BY judge_id",
        )
    )
    # round 1: the first two judges on every item, the third on the audit sample; round 2:
    # the third on the items still open
    assert per_judge == {"strong": 1, "medium": 1, "weak": 2}
    skipped = rows(
        tmp_path / "early.duckdb",
        early["run_id"],
        "SELECT count(*) FROM skipped_judgments WHERE run_id = ?",
    )[0][0]
    assert skipped > 0
    snapshot = batches.snapshot()
    assert snapshot["batches_created"] == 4 and snapshot["batch_requests"] == 180 - skipped


@runs
def test_a_batch_that_never_finishes_within_the_run_is_read_by_resume(tmp_path: Path) -> None:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE), batch_never_finishes=True)) as stub:
        judges = (("strong", "anthropic", STRONG), ("medium", "openai", MEDIUM))
        panel = panel_file(tmp_path / "panel.yaml", stub, judges)
        db = tmp_path / "store.duckdb"
        # No wait at all: the first judge's batch is polled before the second's is sent (an
        # OpenAI batch takes two requests, an upload and a create); the stop names both.
        run_id, message = stopped(db, panel, batch=True, batch_wait=0, limit=10)
        assert "--batch-wait 0 s passed with 2 batches still running at the provider" in message
        assert (
            "2 batches are left running at the provider (not cancelled); --resume reads their "
            "answers and pays for no request twice" in message
        )
        record = Store(db).get_run(run_id)
        assert record is not None and record.status == "interrupted"
        batches = stats_of(stub.server)
        assert batches.get("batches_created") == 2 and batches.get("batch_requests") == 0

        stub.server.config.batch_never_finishes = False  # the provider gets to them
        run(db, resume=run_id)
        record = Store(db).get_run(run_id)
        assert record is not None and record.status == "completed"
        # the same two batches, read: no request sent twice
        assert batches.get("batches_created") == 2 and batches.get("batch_requests") == 20
        judged = rows(
            db,
            run_id,
            "SELECT count(*), count(score), count(batch_id) FROM judgments WHERE run_id = ?",
        )
        assert judged == [(20, 20, 20)]


@runs
def test_a_server_without_a_batch_api_is_judged_in_real_time_with_one_warning(
    tmp_path: Path,
) -> None:
    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    handler = Keep()
    # Another test of this process may have quieted Prefect's loggers (as the command line
    # does): this one hears the run's warnings whatever ran before it.
    flow_runs = logging.getLogger("prefect.flow_runs")
    level, disabled = flow_runs.level, flow_runs.disabled
    flow_runs.setLevel(logging.INFO)
    flow_runs.disabled = False
    flow_runs.addHandler(handler)
    try:
        with running_stub_server(StubConfig(gold=load_gold(SAMPLE), batch_api=False)) as stub:
            judges = (("local", "openai", STRONG), ("other", "anthropic", MEDIUM))
            panel = panel_file(tmp_path / "panel.yaml", stub, judges)
            summary = run(tmp_path / "store.duckdb", panel, batch=True, limit=5)
            assert stats_of(stub.server).get("batches_created") == 0
            assert stub.stats.requests() == 10  # real time, every call once
    finally:
        flow_runs.removeHandler(handler)
        flow_runs.setLevel(level)
        flow_runs.disabled = disabled
    judged = rows(
        tmp_path / "store.duckdb",
        summary["run_id"],
        "SELECT count(*), count(score), count(batch_id) FROM judgments WHERE run_id = ?",
    )
    assert judged == [(10, 10, 0)]
    assert len(summary["warnings"]) == 2  # the command line's summary says it too
    lines = [w for w in warnings if "in real time, at full price" in w]
    assert len(lines) == 2  # one per judge
    assert any(
        "judge 'local' is judged in real time, at full price:" in w
        and "has no batch API (HTTP 404 on POST /files)" in w
        and "set batch: false for judge 'local'" in w
        for w in lines
    )


@runs
def test_max_cost_sends_only_what_the_budget_can_pay_at_batch_prices(
    tmp_path: Path, gold_stub: StubHandle
) -> None:
    panel = panel_file(tmp_path / "panel.yaml", gold_stub, (("strong", "anthropic", STRONG),))
    db = tmp_path / "store.duckdb"
    batches = stats_of(gold_stub.server)
    batches.reset()
    # Each request counts at its most until answered: its prompt and max_tokens (2,048) at
    # batch prices, about $0.005 at $1/$4 per million tokens: $0.02 pays for 3 or 4.
    run_id, message = stopped(db, panel, batch=True, limit=10, max_cost=0.02)
    assert "budget reached" in message and "items left to judge" in message
    sent = batches.get("batch_requests")
    assert 1 <= sent < 10 and batches.get("batches_created") == 1
    spent = rows(db, run_id, "SELECT count(*), sum(cost_usd) FROM judgments WHERE run_id = ?")
    assert spent[0][0] == sent and spent[0][1] <= 0.02  # the bound kept it under the limit

    run(db, resume=run_id)
    assert batches.get("batch_requests") == 10 and batches.get("batches_created") == 2
    assert rows(db, run_id, "SELECT count(*) FROM consensus WHERE run_id = ?") == [(10,)]
