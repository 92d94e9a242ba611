"""The run summary counts each judge's 429 answers, retried calls included: real runs of the
Prefect flow, both SDKs over real HTTP to the stand-in."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.exceptions import CancelledRun
from rich.console import Console

from juryflow.flows.evaluate import evaluate
from juryflow.flows.runtime import interrupts
from juryflow.judges.budget import BUDGET_EXIT_CODE
from juryflow.judges.ratelimit import HEADER_PACING_ENV, reset_limiters
from juryflow.judges.retry import backoff_delay
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from juryflow.terminal.output import print_run_summary
from tests.conftest import SAMPLE
from tests.test_resume import child_env

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


def write_panel(
    path: Path, stub: StubHandle, claude_model: str, gpt_model: str | None, priced: bool = False
) -> Path:
    """``priced``: both models at $1 in, $4 out per million tokens (for ``--max-cost``)."""
    gpt = (
        f"""
  - id: gpt
    provider: openai
    model: {gpt_model}
    prompt: data2txt_spans
    base_url: "{stub.openai_base_url}"
    api_key_env: {KEY_ENV}
    max_attempts: 8"""
        if gpt_model
        else ""
    )
    models = [model for model in (claude_model, gpt_model) if model]
    prices = "prices:\n" + "".join(f"  '{m}': {{input: 1.0, output: 4.0}}\n" for m in models)
    path.write_text(
        f"""
name: rate-limited
{prices if priced else ""}judges:
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
        summary = asyncio.run(
            evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path)))
        )
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
        summary = asyncio.run(
            evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path)))
        )
        served = stub.stats.snapshot()["by_outcome"].get("429", 0)
    assert summary["rate_limited"] == {"claude": served}
    if pacing:
        assert served <= 1
    else:
        assert served >= 4
    assert shown(summary).endswith(f"({'claude ' + str(served)})" if served else "none")


# -- kept in the store: every invocation, every --workers process ----------------------------


def served_429(stub: StubHandle) -> int:
    return int(stub.stats.snapshot()["by_outcome"].get("429", 0))


def test_a_resumed_runs_summary_counts_the_first_invocations_429s(
    subset: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both models over the stand-in's quota of 4 calls a second, unpaced: 429s from the
    # first calls on. The first invocation stops at its budget, the resume judges the rest.
    monkeypatch.setenv(HEADER_PACING_ENV, "0")
    config = StubConfig(latency_ms=10, rpm_limit=4, rate_window=1.0, retry_after=0.05)
    with running_stub_server(config) as stub:
        panel = write_panel(
            tmp_path / "panel.yaml", stub, "stub-spans-good", "stub-spans-none", priced=True
        )
        interrupts.take()
        with pytest.raises(CancelledRun):
            asyncio.run(
                evaluate(
                    RunRequest(
                        dataset=str(subset), panel=str(panel), db=str(db_path), max_cost=0.02
                    )
                )
            )
        outcome = interrupts.take()
        assert outcome is not None and outcome.run_id is not None
        assert outcome.interruption.exit_code == BUDGET_EXIT_CODE
        first = served_429(stub)
        assert first > 0, "four calls a second, eight at once: the quota answers 429"
        summary = asyncio.run(evaluate(RunRequest(resume=outcome.run_id, db=str(db_path))))
        total = served_429(stub)
    assert summary["run_id"] == outcome.run_id and summary["items"] == 12
    counts = summary["rate_limited"]
    assert list(counts) == ["claude", "gpt"]  # LLM judges only, in the panel's order
    assert sum(counts.values()) == total >= first
    line = shown(summary)
    assert line.split(maxsplit=2)[2].startswith(f"{total} (")
    assert "invocation" not in line
    # one row per judge per invocation, summed when read
    with Store(db_path).read() as con:
        rows = con.execute(
            "SELECT judge_id, count(*), sum(answers) FROM rate_limited WHERE run_id = ? "
            "GROUP BY judge_id ORDER BY judge_id",
            [outcome.run_id],
        ).fetchall()
    assert [(judge, n) for judge, n, _ in rows] == [("claude", 2), ("gpt", 2)]
    assert {judge: int(answers) for judge, _, answers in rows} == counts


@pytest.mark.slow
def test_a_run_on_worker_processes_counts_their_429s(
    subset: Path, db_path: Path, tmp_path: Path
) -> None:
    # The first three calls of claude's model are answered 429, on whichever worker.
    with running_stub_server(StubConfig(retry_after=0.01)) as stub:
        panel = write_panel(
            tmp_path / "panel.yaml", stub, "stub-spans-good+429x3", "stub-spans-none"
        )
        done = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", str(subset), "--panel", str(panel),
             "--db", str(db_path), "--chunk-size", "3", "--no-cache", "--workers", "2"],
            env=child_env(**{KEY_ENV: "sk-summary-test"}), capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert served_429(stub) == 3
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("429 answers")]
    assert line.split(maxsplit=2)[2].rstrip() == "3 (claude 3)", done.stdout
    _, runs = Store(db_path).query("SELECT run_id FROM runs")
    [(run_id,)] = runs
    assert Store(db_path).rate_limited(str(run_id)) == {"claude": 3, "gpt": 0}


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
