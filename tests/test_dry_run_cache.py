"""`--dry-run` with prompt caching (issue 24): the static part of a split prompt is priced as
one cache write per judge and a cache read by each later call where the provider caches it,
and the output says what that assumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from juryflow.judges.pricing import cached_prefix_tokens
from juryflow.planning.dry_run import CHARS_PER_TOKEN, estimate_run
from juryflow.planning.run_request import RunRequest
from juryflow.prompts.loader import load_template
from tests.test_faults import synthetic_dataset

KEY = "JURYFLOW_DRY_RUN_CACHE_KEY"
STATIC = len(load_template("data2txt_spans").static_text) // CHARS_PER_TOKEN


def _panel(path: Path, judges: str) -> Path:
    path.write_text(f"name: cached\njudges:\n{judges}", encoding="utf-8")
    return path


def _judge(judge_id: str, provider: str, model: str, extra: str = "") -> str:
    return (
        f"  - {{id: {judge_id}, provider: {provider}, model: {model}, prompt: data2txt_spans, "
        f"api_key_env: {KEY}{extra}}}\n"
    )


def test_the_cached_prefix_follows_each_providers_rules() -> None:
    assert cached_prefix_tokens("anthropic", "claude-sonnet-4-5", None, 1500) == 1500
    assert cached_prefix_tokens("anthropic", "claude-sonnet-4-5", None, 1000) == 0
    assert cached_prefix_tokens("anthropic", "claude-haiku-4-5-20251001", None, 3000) == 0
    assert cached_prefix_tokens("anthropic", "claude-3-5-haiku", None, 2048) == 2048
    # OpenAI: from 1,024 tokens, in steps of 128
    assert cached_prefix_tokens("openai", "gpt-4o-mini", None, 1023) == 0
    assert cached_prefix_tokens("openai", "gpt-4o-mini", None, 1300) == 1280
    # an OpenAI-compatible server: no cache juryflow can price
    assert cached_prefix_tokens("openai", "llama", "http://127.0.0.1:8000/v1", 5000) is None


def test_the_static_part_is_one_write_then_reads_and_the_assumption_is_said(
    tmp_path: Path,
) -> None:
    assert STATIC > 1024, "data2txt_spans has a static part over both providers' minimum"
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 10)
    panel = _panel(
        tmp_path / "panel.yaml",
        _judge("sonnet", "anthropic", "claude-sonnet-4-5")
        + _judge("mini", "openai", "gpt-4o-mini")
        + _judge("haiku", "anthropic", "claude-haiku-4-5")
        + _judge("local", "openai", "llama", ", base_url: 'http://127.0.0.1:9/v1'")
        + _judge("batched", "anthropic", "claude-sonnet-4-5", ", batch: true"),
    )
    result = estimate_run(
        RunRequest(dataset=str(dataset), panel=str(panel), db=str(tmp_path / "none.duckdb"))
    )
    by_id = {e.judge_id: e for e in result.judges}
    assert {e.calls for e in result.judges} == {10}

    sonnet = by_id["sonnet"]
    assert sonnet.cache_tokens == (STATIC, 9 * STATIC)
    full = sonnet.input_tokens - 10 * STATIC
    expected = (full * 3.0 + STATIC * 3.75 + 9 * STATIC * 0.3 + sonnet.output_tokens * 15.0) / 1e6
    assert sonnet.cost_usd == pytest.approx(expected)
    # cheaper than every prompt token at the full rate, as the run will be billed
    assert sonnet.cost_usd < (sonnet.input_tokens * 3.0 + sonnet.output_tokens * 15.0) / 1e6

    mini = by_id["mini"]
    kept = 1024 + (STATIC - 1024) // 128 * 128
    assert mini.cache_tokens == (kept, 9 * kept)
    # OpenAI bills a write at the input price and a read at its cached-input price
    expected = (
        (mini.input_tokens - 9 * kept) * 0.15 + 9 * kept * 0.075 + mini.output_tokens * 0.6
    ) / 1e6
    assert mini.cost_usd == pytest.approx(expected)

    # under Haiku 4.5's minimum, on a compatible server: the full rate
    for judge in ("haiku", "local"):
        assert by_id[judge].cache_tokens == (0, 0)
    # a batch: the same cache at batch prices, half of everything
    batched = by_id["batched"]
    assert batched.cache_tokens == sonnet.cache_tokens
    assert batched.cost_usd == pytest.approx((sonnet.cost_usd or 0) / 2)

    notes = {judge: [n for n in result.notes if n.startswith(f"prompt cache: {judge}'s")]
             for judge in by_id}  # fmt: skip
    assert all(len(found) == 1 for found in notes.values()), result.notes
    assert "one cache write" in notes["sonnet"][0] and "5 minutes" in notes["sonnet"][0]
    assert "automatic prefix caching" in notes["mini"][0]
    assert "under the provider's minimum" in notes["haiku"][0]
    assert "OpenAI-compatible server" in notes["local"][0]
    assert "one cache write" in notes["batched"][0] and "best effort" in notes["batched"][0]


def test_a_prompt_without_a_static_part_says_nothing_of_the_cache(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 4)
    judge = _judge("s", "anthropic", "claude-sonnet-4-5").replace(
        "data2txt_spans", "hallucination_score"
    )
    result = estimate_run(
        RunRequest(dataset=str(dataset), panel=str(_panel(tmp_path / "panel.yaml", judge)))
    )
    [estimate] = result.judges
    assert estimate.cache_tokens == (0, 0)
    assert not [note for note in result.notes if note.startswith("prompt cache")]
    assert estimate.cost_usd == pytest.approx(
        (estimate.input_tokens * 3.0 + estimate.output_tokens * 15.0) / 1e6
    )
