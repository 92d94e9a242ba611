"""Repeated samples per judge end to end (issue 26, point 1): real Prefect, real HTTP to the
stand-in's simulated judges, real DuckDB.

A judge at ``samples: 3, temperature: 0.7`` stores three sample rows per item and one
reduced judgment; a re-run serves every sample from the cache (no request); raised to four
samples, only sample 3 is called. ``samples: 1`` changes nothing a run stores.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from tests import sim_panels
from tests.conftest import REPO, SAMPLE
from tests.sim_panels import DECISION, MEDIUM

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

KEY_ENV = "JURYFLOW_SAMPLES_KEY"
ITEMS = 4
SAMPLED = "stub-sim-spans-r0.6-f0.3-j0.3-F0.3"
"""The sampled judge: a span judge whose verdict also flips with chance 0.3 per sample."""
JUDGES = (("strong", "anthropic", sim_panels.STRONG), ("medium", "openai", MEDIUM))

JUDGMENTS = (
    "SELECT item_id, judge_id, score, raw_output, reasoning, cache_key, cached "
    "FROM judgments WHERE run_id = ? ORDER BY item_id, judge_id"
)
SAMPLES = (
    "SELECT item_id, sample_index, score, cached, cache_key FROM judgment_samples "
    "WHERE run_id = ? ORDER BY item_id, sample_index"
)


@pytest.fixture(scope="module")
def stub() -> Any:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-samples")


def _panel(path: Path, stub: StubHandle, sampled: str, extra: str = "") -> Path:
    """Two judges asked once and ``sampled``, the YAML of a third (openai) judge's options."""
    url = stub.openai_base_url
    third = (
        f"  - {{id: sampled, provider: openai, model: '{SAMPLED}', prompt: data2txt_spans, "
        f"base_url: '{url}', api_key_env: {KEY_ENV}{sampled}}}\n"
    )
    sim_panels.sim_panel(path, stub, JUDGES, key_env=KEY_ENV, name="sampled")
    path.write_text(path.read_text(encoding="utf-8") + third + extra, encoding="utf-8")
    return path


def _run(db: Path, panel: Path, **options: Any) -> dict[str, Any]:
    return asyncio.run(
        evaluate(
            RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(db), limit=ITEMS, **options)
        )
    )


def _rows(db: Path, run_id: str, sql: str) -> list[tuple[Any, ...]]:
    with Store(db).read() as con:
        return con.execute(sql, [run_id]).fetchall()


def test_samples_are_stored_reduced_and_served_from_the_cache(
    tmp_path: Path, stub: StubHandle
) -> None:
    db = tmp_path / "store.duckdb"
    panel = _panel(tmp_path / "panel.yaml", stub, ", samples: 3, temperature: 0.7")
    stub.stats.reset()
    first = _run(db, panel)
    assert stub.stats.requests(SAMPLED) == 3 * ITEMS
    samples = _rows(db, first["run_id"], SAMPLES)
    assert len(samples) == 3 * ITEMS
    assert sorted({(item, index) for item, index, *_ in samples}) == sorted(
        (item, index) for item in {s[0] for s in samples} for index in range(3)
    )
    assert len({key for *_, key in samples}) == 3 * ITEMS  # a cache key per sample
    judgments = _rows(db, first["run_id"], JUDGMENTS)
    assert len(judgments) == 3 * ITEMS  # one row per (item, judge), the sampled one reduced
    reduced = [j for j in judgments if j[1] == "sampled"]
    assert all("of 3" in (reasoning or "") for *_, reasoning, _, _ in reduced)
    # The run records each judge's samples and the reducer by name.
    (panel_json,) = _rows(db, first["run_id"], "SELECT panel FROM runs WHERE run_id = ?")[0]
    assert '"samples": 3' in panel_json and '"sample_reducer": "majority"' in panel_json
    # The noisy judge's samples do not all agree (independent draws of the stand-in).
    by_item: dict[str, set[float]] = {}
    for item, _, score, _, _ in samples:
        by_item.setdefault(item, set()).add(score)
    assert any(len(scores) > 1 for scores in by_item.values())

    stub.stats.reset()
    again = _run(db, panel)
    assert stub.stats.requests() == 0  # every sample, and every other judge, from the cache
    assert _rows(db, again["run_id"], DECISION) == _rows(db, first["run_id"], DECISION)
    assert all(cached for *_, cached, _ in _rows(db, again["run_id"], SAMPLES))
    stored = [(i, k, s) for i, k, s, _, _ in _rows(db, again["run_id"], SAMPLES)]
    assert stored == [(i, k, s) for i, k, s, _, _ in samples]

    stub.stats.reset()
    four = _run(db, _panel(tmp_path / "four.yaml", stub, ", samples: 4, temperature: 0.7"))
    assert stub.stats.requests() == ITEMS  # sample 3 of each item, nothing else
    rows = _rows(db, four["run_id"], SAMPLES)
    assert len(rows) == 4 * ITEMS
    assert [cached for _, index, _, cached, _ in rows] == [index < 3 for _, index, *_ in rows]

    # Back to one sample: each item's sample 0 answers it, from the cache.
    stub.stats.reset()
    one = _run(db, _panel(tmp_path / "one.yaml", stub, ", temperature: 0.7"))
    assert stub.stats.requests() == 0
    assert _rows(db, one["run_id"], SAMPLES) == []
    firsts = {(i, s) for i, k, s, _, _ in samples if k == 0}
    ones = _rows(db, one["run_id"], JUDGMENTS)
    assert {(i, s) for i, j, s, *_ in ones if j == "sampled"} == firsts
    assert all(cached for *_, cached in ones)


def test_one_sample_changes_nothing_stored(tmp_path: Path, stub: StubHandle) -> None:
    plain = _run(tmp_path / "plain.duckdb", _panel(tmp_path / "p.yaml", stub, ""))
    one = _run(tmp_path / "one.duckdb", _panel(tmp_path / "o.yaml", stub, ", samples: 1"))
    for sql in (JUDGMENTS, DECISION):
        assert _rows(tmp_path / "one.duckdb", one["run_id"], sql) == _rows(
            tmp_path / "plain.duckdb", plain["run_id"], sql
        )
    assert _rows(tmp_path / "one.duckdb", one["run_id"], SAMPLES) == []
    panels = "SELECT panel FROM runs WHERE run_id = ?"
    assert _rows(tmp_path / "one.duckdb", one["run_id"], panels) == _rows(
        tmp_path / "plain.duckdb", plain["run_id"], panels
    )


@pytest.mark.parametrize("audit", [0.5, 0.0])
def test_early_stopping_with_a_sampled_judge(
    tmp_path: Path, stub: StubHandle, audit: float
) -> None:
    """A sampled judge's reduced answer is one judgment: early stopping decides on it; with
    no audit sample (no item every judge judged) the run still ends completed."""
    panel = _panel(tmp_path / "panel.yaml", stub, ", samples: 3, temperature: 0.7")
    run = _run(tmp_path / "early.duckdb", panel, early_stop=True, audit_fraction=audit)
    status = "SELECT status FROM runs WHERE run_id = ?"
    assert _rows(tmp_path / "early.duckdb", run["run_id"], status) == [("completed",)]
    decided = _rows(tmp_path / "early.duckdb", run["run_id"], DECISION)
    assert len(decided) == ITEMS
    samples = _rows(tmp_path / "early.duckdb", run["run_id"], SAMPLES)
    sampled_items = {
        item
        for (item,) in _rows(
            tmp_path / "early.duckdb",
            run["run_id"],
            "SELECT item_id FROM judgments WHERE run_id = ? AND judge_id = 'sampled'",
        )
    }
    assert sampled_items or audit == 0  # the audited items at least
    assert len(samples) == 3 * len(sampled_items)


NOISY_FIGURES = (
    "WITH s AS (SELECT s.item_id, s.verdict, i.gold_hallucinated AS gold "
    "  FROM judgment_samples s JOIN items i USING (run_id, item_id) WHERE run_id = $run), "
    "r AS (SELECT j.verdict, i.gold_hallucinated AS gold "
    "  FROM judgments j JOIN items i USING (run_id, item_id) "
    "  WHERE run_id = $run AND judge_id = 'noisy') "
    "SELECT (SELECT count(*) FROM s), "
    "(SELECT count(*) FROM (SELECT item_id FROM s GROUP BY 1 HAVING count(DISTINCT verdict) > 1)), "
    "(SELECT round(avg((verdict = gold)::int), 3) FROM s), "
    "(SELECT round(avg((verdict = gold)::int), 3) FROM r)"
)


def test_the_readmes_samples_panel_runs_as_shipped(
    tmp_path: Path, stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README "Repeated samples": `juryflow stub-server --port 8765 --gold
    examples/ragtruth_data2txt_sample.jsonl &` then `juryflow run ... --panel
    examples/panel.sim-samples.yaml`, the stand-in's port in place of 8765; the figures the
    README quotes (a majority of three samples is right more often than one sample)."""
    monkeypatch.setenv("JURYFLOW_STUB_KEY", "anything")
    shipped = (REPO / "examples" / "panel.sim-samples.yaml").read_text(encoding="utf-8")
    panel = tmp_path / "panel.sim-samples.yaml"
    base = stub.openai_base_url.removesuffix("/v1")
    panel.write_text(shipped.replace("http://127.0.0.1:8765", base), encoding="utf-8")
    db = tmp_path / "samples.duckdb"
    run = asyncio.run(evaluate(RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(db))))
    with Store(db).read() as con:
        figures = con.execute(NOISY_FIGURES, {"run": run["run_id"]}).fetchone()
    print("samples, items whose samples disagree, sample accuracy, reduced accuracy:", figures)
    assert figures is not None
    # Seeded (server seed 0, draws 0-2 of each item): the same figures on every run.
    assert figures == (3 * 60, 38, 0.667, 0.733)


@pytest.mark.slow
def test_worker_processes_sample_too(tmp_path: Path, stub: StubHandle) -> None:
    """``--workers 2``: the worker processes build the sampled judge from its spec; a re-run
    serves every sample from the cache read in the flow's process, and a third sample costs
    one call an item: the two cached ones go to the worker with the items."""
    db = tmp_path / "workers.duckdb"
    panel = _panel(tmp_path / "panel.yaml", stub, ", samples: 2, temperature: 0.7")
    run = _run(db, panel, workers=2)
    assert len(_rows(db, run["run_id"], SAMPLES)) == 2 * ITEMS
    assert len(_rows(db, run["run_id"], JUDGMENTS)) == 3 * ITEMS
    stub.stats.reset()
    again = _run(db, panel, workers=2)
    assert stub.stats.requests() == 0
    assert _rows(db, again["run_id"], DECISION) == _rows(db, run["run_id"], DECISION)
    stub.stats.reset()
    three = _panel(tmp_path / "three.yaml", stub, ", samples: 3, temperature: 0.7")
    more = _run(db, three, workers=2)
    assert stub.stats.requests() == ITEMS  # sample 2 of each item, nothing else
    rows = _rows(db, more["run_id"], SAMPLES)
    assert len(rows) == 3 * ITEMS
    assert [cached for _, index, _, cached, _ in rows] == [index < 2 for _, index, *_ in rows]
