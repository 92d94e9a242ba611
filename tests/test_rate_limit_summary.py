"""The run summary counts each judge's 429 answers, retried calls included: real runs of the
Prefect flow, both SDKs over real HTTP to the stand-in."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from juryflow.flows.evaluate import evaluate
from juryflow.judges.ratelimit import HEADER_PACING_ENV, reset_limiters
from juryflow.judges.retry import backoff_delay
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.terminal.output import print_run_summary
from tests.conftest import SAMPLE

pytestmark = pytest.mark.usefixtures("prefect_harness")

KEY_ENV = "JURYFLOW_SUMMARY_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(KEY_ENV, "sk-summary-test")
    reset_limiters()
    yield
    reset_limiters()


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    path = tmp_path / "subset.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:12]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def write_panel(path: Path, stub: StubHandle, claude_model: str, gpt_model: str | None) -> Path:
    gpt = (
        f"""
  - id: gpt
    provider: openai
    model: {gpt_model}
    prompt: data2txt_spans
    base_url: "{stub.openai_base_url}"
    api_key_env: {KEY_ENV}"""
        if gpt_model
        else ""
    )
    path.write_text(
        f"""
name: rate-limited
judges:
  - id: claude
    provider: anthropic
    model: {claude_model}
    prompt: data2txt_spans
    base_url: "{stub.anthropic_base_url}"
    api_key_env: {KEY_ENV}
    max_attempts: 8{gpt}
  - {{id: numbers, provider: offline, detector: numbers}}
""",
        encoding="utf-8",
    )
    return path


def shown(summary: dict[str, Any]) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_run_summary(console, summary)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return next(line.rstrip() for line in text.splitlines() if line.startswith("429 answers"))


def test_scripted_429s_are_counted_for_their_judge(
    subset: Path, db_path: Path, tmp_path: Path
) -> None:
    # The first three calls of claude's model are answered 429, then it answers; gpt never.
    with running_stub_server(StubConfig(retry_after=0.01)) as stub:
        panel = write_panel(
            tmp_path / "panel.yaml", stub, "stub-spans-good+429x3", "stub-spans-none"
        )
        summary = asyncio.run(evaluate(dataset=str(subset), panel=str(panel), db=str(db_path)))
        served = stub.stats.snapshot()["by_outcome"]
    assert served["429"] == 3
    assert summary["rate_limited"] == {"claude": 3, "gpt": 0}  # offline judges make no call
    assert summary["unscored"] == 0  # the calls were retried and succeeded
    assert shown(summary).split(maxsplit=2)[2] == "3 (claude 3)"


@pytest.mark.parametrize("pacing", [False, True])
def test_the_summary_counts_what_the_server_answered(
    pacing: bool, subset: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 calls a second against 12 items 8 at a time: without pacing the budget is overrun.
    monkeypatch.setenv(HEADER_PACING_ENV, "1" if pacing else "0")
    config = StubConfig(latency_ms=10, rpm_limit=4, rate_window=1.0)
    with running_stub_server(config) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, "stub-spans-good", None)
        summary = asyncio.run(evaluate(dataset=str(subset), panel=str(panel), db=str(db_path)))
        served = stub.stats.snapshot()["by_outcome"].get("429", 0)
    assert summary["rate_limited"] == {"claude": served}
    if pacing:
        assert served <= 1
    else:
        assert served >= 4
    assert shown(summary).endswith(f"({'claude ' + str(served)})" if served else "none")


def base_summary(**extra: Any) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "items": 3,
        "judges": 2,
        "scored": 6,
        "unscored": 0,
        "db": "store.duckdb",
        "duration_seconds": 1.0,
        "judgments_per_second": 6.0,
        "retries": 2,
        **extra,
    }


def test_the_row_says_what_it_knows() -> None:
    assert shown(base_summary(rate_limited={"a": 0, "b": 0})).endswith("none")
    assert shown(base_summary(rate_limited={"a": 2, "b": 0, "c": 5})).endswith("7 (a 2, c 5)")
    elsewhere = shown(base_summary(rate_limited=None))
    assert elsewhere.endswith("not counted: the calls were made on Dask workers")
    for silent in (base_summary(), base_summary(rate_limited={})):  # no LLM judge: no row
        console = Console(file=io.StringIO(), width=200, color_system=None)
        print_run_summary(console, silent)
        assert "429" not in console.file.getvalue()  # type: ignore[attr-defined]


def test_a_judge_id_cannot_drive_the_terminal() -> None:
    line = shown(base_summary(rate_limited={"evil\x1b[2J[red]x[/]": 1}))
    assert "\x1b" not in line and "\\x1b" in line and "[red]x[/]" in line


def test_retry_after_still_sets_the_wait() -> None:
    # Pacing by headers leaves the 429's own Retry-After in charge of the retry's wait.
    import random

    from juryflow.judges.providers.base import error_from_status

    error = error_from_status(429, "slow down", {"retry-after": "7"})
    assert error.kind == "rate_limit" and error.retry_after == 7.0
    assert backoff_delay(1, error, 0.5, 30.0, random.Random(0)) == 7.0
