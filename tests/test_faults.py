"""Faults at scale: 2,000 items x 3 judges against a stand-in that misbehaves on purpose."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

# ~35 s, in the default run: no other test shows one row per pair under every fault at once
pytestmark = [pytest.mark.usefixtures("prefect_harness")]


def synthetic_dataset(path: Path, n: int) -> Path:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            row = dict(rows[i % len(rows)])
            row["id"] = f"item-{i:05d}"
            # a distinct response per item, so no two items share a prompt (or a cache key)
            row["response"] = f"{row['response']} (copy {i})"
            row["labels"] = []
            out.write(json.dumps(row) + "\n")
    return path


def test_every_pair_ends_with_exactly_one_row_under_faults(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_TEST_KEY", "sk-test-faults")
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 2000)
    config = StubConfig(
        fault_429=0.10,
        fault_500=0.05,
        fault_hang=0.02,
        malformed=0.05,
        retry_after=0.05,
        hang_seconds=5.0,
        seed=7,
    )
    with running_stub_server(config) as stub:
        judge = (
            "  - {{id: {id}, provider: {provider}, model: {model}, prompt: data2txt_spans, "
            "base_url: '{url}', api_key_env: JURYFLOW_TEST_KEY, timeout: 1.0, "
            "max_concurrency: 48, max_attempts: 6}}\n"
        )
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            "name: faulty\njudges:\n"
            + judge.format(
                id="a", provider="anthropic", model="claude-x", url=stub.anthropic_base_url
            )
            + judge.format(id="b", provider="openai", model="gpt-x", url=stub.openai_base_url)
            + judge.format(id="c", provider="openai", model="llama-x", url=stub.openai_base_url),
            encoding="utf-8",
        )
        summary = asyncio.run(
            evaluate(
                RunRequest(dataset=str(dataset), panel=str(panel), db=str(db_path), chunk_size=250)
            )
        )
        outcomes = stub.stats.snapshot()["by_outcome"]

    assert summary["items"] == 2000 and summary["judgments"] == 6000
    store = Store(db_path)
    _, rows = store.query(
        "SELECT count(*), count(DISTINCT (item_id, judge_id)), count(score), "
        "count(*) FILTER (WHERE score IS NULL AND unscored_reason IS NULL), "
        "count(*) FILTER (WHERE unscored_reason LIKE 'unparseable output:%'), "
        "count(*) FILTER (WHERE unscored_reason LIKE 'provider error%'), "
        "count(*) FILTER (WHERE attempts > 1) "
        "FROM judgments WHERE run_id = ?",
        [summary["run_id"]],
    )
    total, distinct, scored, silent, unparseable, provider_errors, retried = rows[0]
    assert total == distinct == 6000
    assert silent == 0  # every unscored row says why
    assert scored + unparseable + provider_errors == 6000
    # ~5 % malformed answers become unscored rows, never a default grade
    assert 150 <= unparseable <= 450
    # the faults happened, and retries absorbed nearly all of them
    assert outcomes.get("429", 0) > 300 and outcomes.get("500", 0) > 150
    assert outcomes.get("hang", 0) > 40
    assert retried > 600
    assert provider_errors < 30
    _, consensus = store.query(
        "SELECT count(*) FROM consensus WHERE run_id = ?", [summary["run_id"]]
    )
    assert consensus[0][0] == 2000
