"""Batch mode for sampled judges (issue 42, point 2: "batch mode, samples ... work as for the
other kinds"): real Prefect, real HTTP to the stand-in's batch API, real DuckDB.

A pairwise judge's two orders and a sampled judge's N samples go into its batch as one
request each (``custom_id`` by item, judge and sample); the judgment is their reduction, as
in real time. A sample a batch left unanswered makes its item wait for ``--resume``, which
sends that sample only; a run stopped while its batches run reads them on ``--resume`` and
pays for no request twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.exceptions import CancelledRun

from juryflow.flows.evaluate import evaluate
from juryflow.flows.runtime import interrupts
from juryflow.judges.batches.resend import RESEND
from juryflow.planning.run_request import RunRequest
from juryflow.standin.batches import stats_of
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE
from tests.sim_panels import MEDIUM, STRONG, sim_panel

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

PAIRS = REPO / "examples" / "ragtruth_pairs_sample.jsonl"
PAIRWISE_PANEL = REPO / "examples" / "panel.sim-pairwise.yaml"
KEY_ENV = "JURYFLOW_STUB_KEY"
SAMPLED = "stub-sim-spans-r0.6-f0.3-j0.3-F0.3"

JUDGMENTS = (
    "SELECT item_id, judge_id, score, unscored_reason FROM judgments WHERE run_id = ? "
    "ORDER BY item_id, judge_id"
)
SAMPLES = (
    "SELECT item_id, judge_id, sample_index, score, cache_key FROM judgment_samples "
    "WHERE run_id = ? ORDER BY item_id, judge_id, sample_index"
)
CONSENSUS = "SELECT item_id, score, status FROM consensus WHERE run_id = ? ORDER BY item_id"


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURYFLOW_BATCH_POLL_SECONDS", "0.01")
    monkeypatch.setenv(KEY_ENV, "anything")


@pytest.fixture(scope="module")
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


def _pairwise_panel(tmp_path: Path, stub: StubHandle) -> Path:
    """The README's pairwise panel on ``stub``, every model priced ($1 in, $4 out)."""
    panel = tmp_path / "panel.sim-pairwise.yaml"
    base = stub.openai_base_url.removesuffix("/v1")
    text = PAIRWISE_PANEL.read_text(encoding="utf-8").replace("http://127.0.0.1:8765", base)
    models = ("stub-sim-pair-a0.9", "stub-sim-pair-a0.9-P0.3", "stub-sim-pair-a0.6-P0.1")
    prices = "prices:\n" + "".join(f"  '{m}': {{input: 1.0, output: 4.0}}\n" for m in models)
    panel.write_text(prices + text, encoding="utf-8")
    return panel


def _sampled_panel(tmp_path: Path, stub: StubHandle, model: str) -> Path:
    """Two judges asked once and one asked three times at temperature 0.7, all priced."""
    judges = (("strong", "anthropic", STRONG), ("medium", "openai", MEDIUM))
    third = (
        f"  - {{id: sampled, provider: openai, model: '{model}', prompt: data2txt_spans, "
        f"base_url: '{stub.openai_base_url}', api_key_env: {KEY_ENV}, samples: 3, "
        "temperature: 0.7}\n"
    )
    path = sim_panel(tmp_path / "panel.yaml", stub, judges, key_env=KEY_ENV, priced=True)
    text = path.read_text(encoding="utf-8").replace(
        "judges:\n", f"  '{model}': {{input: 1.0, output: 4.0}}\njudges:\n"
    )
    path.write_text(text + third, encoding="utf-8")
    return path


def _run(db: Path, dataset: Path, panel: Path | None = None, **options: Any) -> dict[str, Any]:
    where = {"panel": str(panel)} if panel is not None else {}
    request = RunRequest(dataset=str(dataset), db=str(db), use_cache=False, **where, **options)
    return asyncio.run(evaluate(request))


def _stopped(db: Path, dataset: Path, panel: Path, **options: Any) -> tuple[str, str]:
    """Run, expecting a resumable stop: the run's id and its one line."""
    interrupts.take()
    with pytest.raises(CancelledRun):
        _run(db, dataset, panel, **options)
    outcome = interrupts.take()
    assert outcome is not None and outcome.run_id is not None
    return outcome.run_id, outcome.message


def _rows(db: Path, run_id: str, sql: str) -> list[tuple[Any, ...]]:
    with Store(db).read() as con:
        return con.execute(sql, [run_id]).fetchall()


def test_a_pairwise_panel_in_batch_mode_stores_both_orders_as_real_time_does(
    tmp_path: Path, stub: StubHandle
) -> None:
    panel = _pairwise_panel(tmp_path, stub)
    real_time = _run(tmp_path / "real-time.duckdb", PAIRS, panel)
    batches = stats_of(stub.server)
    batches.reset()
    batched = _run(tmp_path / "batch.duckdb", PAIRS, panel, batch=True)

    stores = ((tmp_path / "batch.duckdb", batched), (tmp_path / "real-time.duckdb", real_time))
    for sql in (JUDGMENTS, SAMPLES, CONSENSUS):
        batch_rows, real_rows = (_rows(db, run["run_id"], sql) for db, run in stores)
        assert batch_rows == real_rows and batch_rows
    # One batch per judge, each holding both orders of the 30 pairs: 60 requests.
    snapshot = batches.snapshot()
    assert snapshot["batches_created"] == 3 and snapshot["batch_requests"] == 3 * 2 * 30
    db, run_id = tmp_path / "batch.duckdb", batched["run_id"]
    costs = _rows(
        db,
        run_id,
        "SELECT j.cost_usd, (SELECT sum(s.cost_usd) FROM judgment_samples s "
        "WHERE s.run_id = j.run_id AND s.item_id = j.item_id AND s.judge_id = j.judge_id), "
        "j.batch_id FROM judgments j WHERE j.run_id = ?",
    )
    assert len(costs) == 90
    # Each judgment costs its two orders, at batch prices (half the real-time ones).
    assert all(cost == pytest.approx(both) and batch_id for cost, both, batch_id in costs)
    per_judge = "SELECT judge_id, sum(cost_usd) FROM judgments WHERE run_id = ? GROUP BY 1"
    batch_cost = dict(_rows(db, run_id, per_judge))
    real_cost = dict(_rows(tmp_path / "real-time.duckdb", real_time["run_id"], per_judge))
    # Half price for the same tokens: exactly, where no prompt cache was involved (the
    # stand-in's OpenAI cache served more prefixes in a batch: cheaper still).
    assert batch_cost["steady"] == pytest.approx(real_cost["steady"] / 2)
    assert all(batch_cost[judge] <= real_cost[judge] / 2 + 1e-12 for judge in real_cost)
    summary = Store(db).run_summary(run_id)
    assert summary["preference_judgments"] == 90 and summary["inconsistent"] > 0


def test_a_sample_a_batch_left_unanswered_is_the_only_request_resume_sends(
    tmp_path: Path, stub: StubHandle
) -> None:
    # The sampled judge's first request expires in its batch: one sample of one item.
    panel = _sampled_panel(tmp_path, stub, SAMPLED + "+hangx1")
    db = tmp_path / "store.duckdb"
    batches = stats_of(stub.server)
    batches.reset()
    run_id, message = _stopped(db, SAMPLE, panel, batch=True, limit=4)
    assert "1 request not answered in their batches (expired 1)" in message
    assert batches.snapshot()["batch_requests"] == 4 + 4 + 3 * 4
    (waiting,) = _rows(
        db,
        run_id,
        "SELECT item_id, unscored_reason, cost_usd FROM judgments "
        "WHERE run_id = ? AND score IS NULL",
    )
    item_id, reason, first_cost = waiting
    assert reason.startswith("sample ") and "expired" in reason and reason.endswith(RESEND)
    answered_before = _rows(
        db, run_id, "SELECT sample_index, cache_key, cost_usd FROM judgment_samples "
        f"WHERE run_id = ? AND item_id = '{item_id}' AND score IS NOT NULL ORDER BY 1",
    )  # fmt: skip
    assert len(answered_before) == 2 and first_cost == pytest.approx(
        sum(cost for *_, cost in answered_before)
    )

    _run(db, SAMPLE, resume=run_id)
    # One request more, in one new batch: the expired sample, nothing answered before.
    snapshot = batches.snapshot()
    assert snapshot["batch_requests"] == 4 + 4 + 3 * 4 + 1
    assert snapshot["batches_created"] == 3 + 1
    assert Store(db).get_run(run_id).status == "completed"  # type: ignore[union-attr]
    after = _rows(
        db, run_id, "SELECT sample_index, cache_key, cost_usd, score IS NOT NULL "
        f"FROM judgment_samples WHERE run_id = ? AND item_id = '{item_id}' ORDER BY 1",
    )  # fmt: skip
    assert len(after) == 3 and all(scored for *_, scored in after)  # no sample stored twice
    assert [row[:3] for row in after if row[0] != 0] == [tuple(r) for r in answered_before]
    (judged,) = _rows(
        db,
        run_id,
        f"SELECT score IS NOT NULL, cost_usd FROM judgments WHERE run_id = ? "
        f"AND item_id = '{item_id}' AND judge_id = 'sampled'",
    )
    # The item's judgment costs all three samples: the two the first invocation paid too.
    assert judged[0] and judged[1] == pytest.approx(sum(cost for _, _, cost, _ in after))
    counts = _rows(
        db,
        run_id,
        "SELECT count(*), count(DISTINCT (item_id, sample_index)) FROM judgment_samples "
        "WHERE run_id = ?",
    )
    assert counts == [(12, 12)]
    assert len(_rows(db, run_id, CONSENSUS)) == 4


def test_a_pairwise_run_stopped_while_its_batches_run_reads_them_on_resume(
    tmp_path: Path,
) -> None:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE), batch_never_finishes=True)) as stub:
        panel = _pairwise_panel(tmp_path, stub)
        db = tmp_path / "store.duckdb"
        run_id, message = _stopped(db, PAIRS, panel, batch=True, batch_wait=0, limit=5)
        assert "3 batches are left running at the provider (not cancelled)" in message
        batches = stats_of(stub.server)
        assert batches.get("batches_created") == 3 and batches.get("batch_requests") == 0

        stub.server.config.batch_never_finishes = False
        _run(db, PAIRS, resume=run_id)
        # The same three batches, read: both orders of 5 pairs for 3 judges, none sent twice.
        assert batches.get("batches_created") == 3 and batches.get("batch_requests") == 30
        assert _rows(db, run_id, "SELECT count(*) FROM judgment_samples WHERE run_id = ?") == [
            (30,)
        ]
        assert len(_rows(db, run_id, CONSENSUS)) == 5


def test_max_cost_admits_a_pairwise_items_two_orders_together_or_neither(
    tmp_path: Path, stub: StubHandle
) -> None:
    text = _pairwise_panel(tmp_path, stub).read_text(encoding="utf-8")
    panel = tmp_path / "one-judge.yaml"
    panel.write_text(text.split("  - {id: first-pick")[0], encoding="utf-8")  # steady only
    db = tmp_path / "store.duckdb"
    batches = stats_of(stub.server)
    batches.reset()
    # Each request counts at its most until answered (its prompt and 2,048 output tokens at
    # batch prices, about $0.0045): $0.015 pays for three requests, so one item's second
    # order is not sent, nor its first.
    run_id, message = _stopped(db, PAIRS, panel, batch=True, limit=6, max_cost=0.015)
    assert "budget reached" in message
    sent = batches.get("batch_requests")
    assert sent >= 2 and sent % 2 == 0 and sent < 12
    judged = _rows(db, run_id, "SELECT unscored_reason FROM judgments WHERE run_id = ?")
    assert len(judged) == sent // 2
    assert not any("unanswered" in (reason or "") for (reason,) in judged)

    _run(db, PAIRS, resume=run_id)
    assert batches.get("batch_requests") == 12
    assert _rows(db, run_id, "SELECT count(*) FROM judgment_samples WHERE run_id = ?") == [(12,)]


def test_a_nightly_regressions_head_to_head_goes_through_the_batch_apis(
    tmp_path: Path, stub: StubHandle
) -> None:
    """prefect.yaml's regression-nightly with ``batch: true`` and a ``pairwise`` panel: the
    pairs of the baseline's and the new run's answers are judged in batches, both orders."""
    from juryflow.flows.regression import regression

    db = tmp_path / "nightly.duckdb"
    panel = _pairwise_panel(tmp_path, stub)
    suite = RunRequest(dataset=str(SAMPLE), db=str(db), suite="nightly", limit=8, batch=True)
    first: Any = asyncio.run(regression(suite, return_state=True))  # type: ignore[call-overload]
    assert first.is_completed() and "is the baseline" in (first.message or "")
    batches = stats_of(stub.server)
    batches.reset()
    second: Any = asyncio.run(
        regression(suite, pairwise=str(panel), return_state=True)  # type: ignore[call-overload]
    )
    assert second.is_completed(), second.message
    with Store(db).read() as con:
        (pair_run,) = con.execute(
            "SELECT run_id FROM runs WHERE suite = 'nightly~head-to-head'"
        ).fetchall()
        judged = con.execute(
            "SELECT count(*), count(batch_id), (SELECT count(*) FROM judgment_samples s "
            "WHERE s.run_id = j.run_id) FROM judgments j WHERE run_id = ? GROUP BY run_id",
            [pair_run[0]],
        ).fetchall()
    assert judged == [(3 * 8, 3 * 8, 2 * 3 * 8)]
    assert batches.get("batches_created") == 3 and batches.get("batch_requests") == 2 * 3 * 8


@pytest.mark.parametrize(
    "dask", [None, pytest.param("local", marks=pytest.mark.slow, id="dask")], ids=str
)
def test_a_batch_sends_only_the_samples_the_cache_has_not(
    tmp_path: Path, stub: StubHandle, dask: str | None
) -> None:
    """Raised from two samples to four, a batch judge's run sends samples 2 and 3 of each
    item only: samples 0 and 1 come from the cache (on Dask too: a batch is sent from the
    flow's process, where the cache was read)."""
    if dask is not None:
        pytest.importorskip("prefect_dask")
    db = tmp_path / "store.duckdb"
    two = _sampled_panel(tmp_path, stub, SAMPLED)
    four = tmp_path / "four.yaml"
    four.write_text(two.read_text().replace("samples: 3", "samples: 4"), encoding="utf-8")
    two.write_text(two.read_text().replace("samples: 3", "samples: 2"), encoding="utf-8")
    asyncio.run(evaluate(RunRequest(dataset=str(SAMPLE), panel=str(two), db=str(db), limit=4)))
    batches = stats_of(stub.server)
    batches.reset()
    request = RunRequest(
        dataset=str(SAMPLE), panel=str(four), db=str(db), limit=4, batch=True, dask=dask
    )
    run_id = asyncio.run(evaluate(request))["run_id"]
    # Samples 2 and 3 of the 4 items; the judges asked once are served whole from the cache.
    assert batches.get("batch_requests") == 2 * 4 and batches.get("batches_created") == 1
    cached = _rows(
        db,
        run_id,
        "SELECT sample_index, bool_and(cached), count(*) FROM judgment_samples "
        "WHERE run_id = ? GROUP BY 1 ORDER BY 1",
    )
    assert cached == [(0, True, 4), (1, True, 4), (2, False, 4), (3, False, 4)]


def test_a_sampled_judge_on_a_server_without_a_batch_api_sends_only_its_missing_samples(
    tmp_path: Path,
) -> None:
    """Judged in real time instead (the cache looked up again for it), the judge still
    finds the samples the cache had."""
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE), batch_api=False)) as stub:
        db = tmp_path / "store.duckdb"
        two = _sampled_panel(tmp_path, stub, SAMPLED)
        four = tmp_path / "four.yaml"
        four.write_text(two.read_text().replace("samples: 3", "samples: 4"), encoding="utf-8")
        two.write_text(two.read_text().replace("samples: 3", "samples: 2"), encoding="utf-8")
        first = RunRequest(dataset=str(SAMPLE), panel=str(two), db=str(db), limit=4)
        asyncio.run(evaluate(first))
        stub.stats.reset()
        again = RunRequest(dataset=str(SAMPLE), panel=str(four), db=str(db), limit=4, batch=True)
        asyncio.run(evaluate(again))
        assert stub.stats.requests() == 2 * 4  # samples 2 and 3 of each item, in real time
        assert stats_of(stub.server).get("batches_created") == 0
