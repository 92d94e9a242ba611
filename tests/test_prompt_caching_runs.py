"""Prompt-cache counts through a whole run (issue 24, point 2): stored per judgment, priced,
and shown by the summary, `juryflow runs`, the viewer and the Prefect artifacts; a store of
schema version 9 gains the columns."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from rich.console import Console

from juryflow.flows.artifacts import run_markdown
from juryflow.flows.evaluate import evaluate
from juryflow.maths.records import Judgment, Usage
from juryflow.planning.run_request import RunRequest
from juryflow.prompts.loader import load_template
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.reads.run_queries import list_runs
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS
from juryflow.storage.store import Store
from juryflow.terminal.output import print_run_summary
from juryflow.viewer.run_model import load_run_page
from tests.conftest import SAMPLE

KEY = "sk-test-planted-0123456789abcdef"
STATIC_TOKENS = len(load_template("data2txt_spans").static_text) // 4


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig()) as handle:
        yield handle


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    path = tmp_path / "subset.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:12]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _panel(path: Path, stub: StubHandle) -> Path:
    path.write_text(
        f"""
name: cached
quorum: 2
prices:
  stub-spans-good: {{input: 3.0, output: 15.0}}
  stub-spans-none: {{input: 0.4, output: 1.6, cache_read: 0.1}}
judges:
  - id: claude
    provider: anthropic
    model: stub-spans-good
    prompt: data2txt_spans
    base_url: "{stub.anthropic_base_url}"
    api_key_env: JURYFLOW_TEST_KEY
  - id: gpt
    provider: openai
    model: stub-spans-none
    prompt: data2txt_spans
    base_url: "{stub.openai_base_url}"
    api_key_env: JURYFLOW_TEST_KEY
  - {{id: numbers, provider: offline, detector: numbers}}
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_stores_prices_and_shows_the_cache_counts(
    stub: StubHandle, subset: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_TEST_KEY", KEY)
    summary = asyncio.run(
        evaluate(
            RunRequest(
                dataset=str(subset), panel=str(_panel(tmp_path / "p.yaml", stub)), db=str(db_path)
            )
        )
    )
    store = Store(db_path)
    run_id = summary["run_id"]
    _, rows = store.query(
        "SELECT judge_id, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, "
        "cost_usd FROM judgments WHERE run_id = ? ORDER BY judge_id, item_id",
        [run_id],
    )
    claude = [r for r in rows if r[0] == "claude"]
    gpt = [r for r in rows if r[0] == "gpt"]
    numbers = [r for r in rows if r[0] == "numbers"]
    assert len(claude) == len(gpt) == len(numbers) == 12
    # Anthropic: one call wrote the static part, the other eleven read it.
    assert sorted(r[3] for r in claude) == [0] * 11 + [STATIC_TOKENS]
    assert sorted(r[4] for r in claude) == [0] + [STATIC_TOKENS] * 11
    for _, tokens_in, tokens_out, written, read, cost in claude:
        # by hand: $3 / M input, $3.75 / M cache write, $0.30 / M cache read, $15 / M out
        by_hand = (tokens_in - written - read) * 3.0 + written * 3.75 + read * 0.30
        assert cost == pytest.approx((by_hand + tokens_out * 15.0) / 1e6)
    # OpenAI-compatible: no writes reported; the prefix is read from the second call on,
    # in 128-token steps from 1,024 (items of one source share their reference too).
    assert all(r[3] is None for r in gpt)
    reads = sorted(r[4] for r in gpt)
    assert reads[0] == 0 and all(r >= 1792 and (r - 1024) % 128 == 0 for r in reads[1:])
    for _, tokens_in, tokens_out, _, read, cost in gpt:
        assert cost == pytest.approx(
            ((tokens_in - read) * 0.4 + read * 0.1 + tokens_out * 1.6) / 1e6
        )
    assert all(r[3] is None and r[4] is None for r in numbers)  # detectors make no call

    total_read = sum(r[4] for r in claude + gpt)
    assert summary["cache_read_tokens_spent"] == total_read
    assert summary["cache_write_tokens_spent"] == STATIC_TOKENS
    console = Console(file=io.StringIO(), width=200)
    print_run_summary(console, summary)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert re.search(rf"prompt cache read / written +{total_read} / {STATIC_TOKENS} of the", shown)

    listing = list_runs(store, limit=5)
    (row,) = listing.rows
    assert dict(zip(listing.columns, row, strict=True))["cache_read_tokens"] == total_read

    page = load_run_page(store, run_id)
    assert page is not None
    judges = {j.judge_id: j for j in page.judges}
    claude_read = STATIC_TOKENS * 11
    assert judges["claude"].cache_read == f"{claude_read:,} ({STATIC_TOKENS:,} written)"
    assert judges["numbers"].cache_read == "–"

    markdown = run_markdown(store, run_id)
    assert f"{total_read:,} served from the prompt cache, {STATIC_TOKENS:,} written" in markdown


def _version_9_store(path: Path) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ DEFAULT current_timestamp)"
        )
        for version, ddl in MIGRATIONS:
            if version <= 9:
                con.execute(ddl)
                con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
        con.execute(
            "INSERT INTO judgments (run_id, item_id, judge_id, provider, model, output_kind, "
            "score, input_tokens, output_tokens, cost_usd, attempts, cached) VALUES "
            "('old', 'i', 'j', 'anthropic', 'claude-sonnet-4-5', 'score', 0.3, 100, 10, "
            "0.00045, 1, false)"
        )
    finally:
        con.close()


def test_a_version_9_store_gains_the_cache_columns(tmp_path: Path) -> None:
    path = tmp_path / "v9.duckdb"
    _version_9_store(path)
    store = Store(path)
    assert store.migrate() == LATEST_VERSION >= 10
    (old,) = store.load_judgments("old")
    assert old.usage == Usage(100, 10, 0.00045, None, None)  # what was stored, nothing made up
    new = Judgment(
        "i",
        "j",
        "score",
        0.6,
        usage=Usage(2000, 20, 0.001, cache_write_tokens=0, cache_read_tokens=1900),
    )
    store.write_chunk("new", [], [new], [])
    (back,) = store.load_judgments("new")
    assert back.usage == new.usage
    _, described = store.query("DESCRIBE judgments")
    types = {name: kind for name, kind, *_ in described}
    assert types["cache_write_tokens"] == types["cache_read_tokens"] == "BIGINT"
