"""A mixed panel through the Prefect flow: real SDKs over real HTTP to the stand-in server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

pytestmark = pytest.mark.usefixtures("prefect_harness")

KEY = "sk-test-planted-0123456789abcdef"


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(latency_ms=5)) as handle:
        yield handle


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    path = tmp_path / "subset.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:12]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def write_panel(path: Path, stub: StubHandle) -> Path:
    path.write_text(
        f"""
name: stub-mixed
quorum: 2
prices:
  stub-spans-good: {{input: 3.0, output: 15.0}}
  stub-spans-nearmiss: {{input: 2.0, output: 8.0}}
judges:
  - id: claude
    provider: anthropic
    model: stub-spans-good
    prompt: data2txt_spans
    base_url: "{stub.anthropic_base_url}"
    api_key_env: JURYFLOW_TEST_KEY
  - id: gpt
    provider: openai
    model: stub-spans-nearmiss
    prompt: data2txt_spans
    base_url: "{stub.openai_base_url}"
    api_key_env: JURYFLOW_TEST_KEY
    max_concurrency: 4
  - {{id: numbers, provider: offline, detector: numbers}}
""",
        encoding="utf-8",
    )
    return path


def test_mixed_panel_runs_end_to_end_and_the_cache_saves_every_call(
    stub: StubHandle, subset: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_TEST_KEY", KEY)
    panel = write_panel(tmp_path / "panel.yaml", stub)

    first = asyncio.run(
        evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path)))
    )
    calls = stub.stats.requests()
    assert calls == 24  # 12 items x 2 model judges; the detector makes no call
    assert first["judgments"] == 36 and first["items"] == 12
    assert first["cache_hits"] == 0
    assert first["cost_usd"] is not None and first["cost_usd"] > 0

    store = Store(db_path)
    _, rows = store.query(
        "SELECT judge_id, count(*), count(score), sum(input_tokens), sum(cost_usd), "
        "count(DISTINCT prompt_hash) FROM judgments WHERE run_id = ? GROUP BY judge_id "
        "ORDER BY judge_id",
        [first["run_id"]],
    )
    by_judge = {r[0]: r for r in rows}
    assert by_judge["claude"][1:3] == (12, 12) and by_judge["gpt"][1:3] == (12, 12)
    assert by_judge["claude"][3] > 0 and by_judge["claude"][4] > 0
    assert by_judge["claude"][5] == 1  # one template, one hash
    assert by_judge["numbers"][4] is None  # detectors cost nothing and say so
    _, kinds = store.query(
        "SELECT DISTINCT match_kind FROM judgment_spans WHERE run_id = ? AND judge_id = 'gpt'",
        [first["run_id"]],
    )
    assert {k for (k,) in kinds} & {"normalized", "fuzzy"}

    second = asyncio.run(
        evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path)))
    )
    assert stub.stats.requests() == calls  # zero model calls the second time
    assert second["cache_hits"] == 24
    _, same = store.query(
        "SELECT count(*) FROM judgments a JOIN judgments b USING (item_id, judge_id) "
        "WHERE a.run_id = ? AND b.run_id = ? AND a.score = b.score",
        [first["run_id"], second["run_id"]],
    )
    assert same[0][0] == 36

    asyncio.run(
        evaluate(
            RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path), use_cache=False)
        )
    )
    assert stub.stats.requests() == 2 * calls  # --no-cache calls again


def test_a_missing_key_stops_the_run_before_any_call(
    stub: StubHandle, subset: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.judges.providers.base import MissingKeyError

    monkeypatch.delenv("JURYFLOW_TEST_KEY", raising=False)
    panel = write_panel(tmp_path / "panel.yaml", stub)
    with pytest.raises(MissingKeyError, match="JURYFLOW_TEST_KEY"):
        asyncio.run(evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path))))
    assert stub.stats.requests() == 0
