"""Pacing under the providers' own rate-limit headers: both SDKs, real HTTP, the stand-in
keeping a real budget. Counts are compared, never times."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.quota_headers import parse_duration, parse_reset_time
from juryflow.judges.ratelimit import HEADER_PACING_ENV, reset_limiters
from juryflow.maths.records import Item, Judgment
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

KEY_ENV = "JURYFLOW_PACING_TEST_KEY"
ITEMS = [Item(f"i{n}", {"input": f"question {n}", "output": f"answer {n}"}) for n in range(40)]


@pytest.fixture(autouse=True)
def _fresh_limiters(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(KEY_ENV, "sk-pacing-test")
    reset_limiters()
    yield
    reset_limiters()


def judge_for(stub: StubHandle, provider: str, concurrency: int = 8) -> LLMJudge:
    spec = JudgeSpec(
        id=f"paced-{provider}",
        provider=provider,  # type: ignore[arg-type]
        model="stub-score-0.3",
        prompt="hallucination_score",
        base_url=stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url,
        api_key_env=KEY_ENV,
        timeout=30.0,
        max_attempts=8,
        max_concurrency=concurrency,
    )
    judge = build_judge(spec)
    assert isinstance(judge, LLMJudge)
    judge.base_delay = 0.01
    return judge


def run_batch(
    config: StubConfig, provider: str, pacing: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[Judgment]]:
    """429 answers the stand-in gave to the judge's calls over ITEMS, and the judgments."""
    monkeypatch.setenv(HEADER_PACING_ENV, "1" if pacing else "0")
    reset_limiters()  # the limiter reads the switch when it is made

    async def judge_all(stub: StubHandle) -> list[Judgment]:
        judge = judge_for(stub, provider)
        assert (judge.limiter.quota is not None) is pacing
        try:
            return list(await asyncio.gather(*(judge.judge(item) for item in ITEMS)))
        finally:
            await judge.aclose()

    with running_stub_server(config) as stub:
        judgments = asyncio.run(judge_all(stub))
        return stub.stats.snapshot()["by_outcome"].get("429", 0), judgments


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_request_budget_is_kept_by_its_headers(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10 requests a second, 40 calls 8 at a time: far more than the budget without pacing.
    config = StubConfig(latency_ms=20, rpm_limit=10, rate_window=1.0)
    unpaced, _ = run_batch(config, provider, False, monkeypatch)
    paced, judgments = run_batch(config, provider, True, monkeypatch)
    assert unpaced >= 10
    assert paced <= 1, f"{paced} 429s with header pacing (without: {unpaced})"
    assert all(j.scored for j in judgments)
    assert sum(j.attempts for j in judgments) == len(ITEMS) + paced


def test_a_token_budget_is_kept_by_its_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each call counts ~2,300 tokens (its prompt and max_tokens 2048): about 8 a second,
    # and fewer than 8 calls at once fill the budget before any answer is in.
    config = StubConfig(latency_ms=20, tpm_limit=18_000, rate_window=1.0)
    unpaced, _ = run_batch(config, "anthropic", False, monkeypatch)
    paced, judgments = run_batch(config, "anthropic", True, monkeypatch)
    assert unpaced >= 10
    assert paced <= 1, f"{paced} 429s with header pacing (without: {unpaced})"
    assert all(j.scored for j in judgments)


def test_without_headers_nothing_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server that reports no budget (vLLM, Ollama): every call goes, at full concurrency.
    monkeypatch.setenv(HEADER_PACING_ENV, "1")
    reset_limiters()

    async def judge_all(stub: StubHandle) -> list[Judgment]:
        judge = judge_for(stub, "openai")
        try:
            return list(await asyncio.gather(*(judge.judge(item) for item in ITEMS)))
        finally:
            await judge.aclose()

    with running_stub_server(StubConfig(latency_ms=20)) as stub:
        judgments = asyncio.run(judge_all(stub))
        stats = stub.stats.snapshot()
    assert all(j.scored for j in judgments)
    assert stats["max_in_flight"] > 1 and stats["total"] == len(ITEMS)
    assert stats["by_outcome"] == {"ok": len(ITEMS)}


# --- the stand-in's budget, on the wire ----------------------------------------------------


def post(stub: StubHandle, api: str, model: str = "stub-score-0.3") -> httpx.Response:
    if api == "anthropic":
        return httpx.post(
            f"{stub.base_url}/v1/messages",
            json={
                "model": model,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "x"}],
            },
            headers={"anthropic-version": "2023-06-01", "x-api-key": "k"},
            timeout=5,
        )
    return httpx.post(
        f"{stub.openai_base_url}/chat/completions",
        json={"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "x"}]},
        headers={"authorization": "Bearer k"},
        timeout=5,
    )


def test_the_stand_in_reports_and_enforces_anthropic_budgets() -> None:
    config = StubConfig(rpm_limit=3, tpm_limit=10_000, rate_window=600.0)
    with running_stub_server(config) as stub:
        answers = [post(stub, "anthropic") for _ in range(4)]
        other = post(stub, "anthropic", "stub-score-0.6")  # budgets are per model
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert other.status_code == 200
    first, refused = answers[0].headers, answers[3].headers
    assert first["anthropic-ratelimit-requests-limit"] == "3"
    assert first["anthropic-ratelimit-requests-remaining"] == "2"
    assert first["anthropic-ratelimit-tokens-limit"] == "10000"
    assert int(first["anthropic-ratelimit-tokens-remaining"]) == 10_000 - 100  # max_tokens
    reset = parse_reset_time(first["anthropic-ratelimit-requests-reset"], time.time())
    assert reset is not None and 150 < reset <= 201  # a third of the window, less the wait
    assert refused["anthropic-ratelimit-requests-remaining"] == "0"
    assert int(refused["retry-after"]) >= 1
    assert answers[3].json()["error"]["type"] == "rate_limit_error"


def test_the_stand_in_reports_and_enforces_openai_budgets() -> None:
    config = StubConfig(rpm_limit=2, rate_window=60.0)
    with running_stub_server(config) as stub:
        answers = [post(stub, "openai") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    first, refused = answers[0].headers, answers[2].headers
    assert first["x-ratelimit-limit-requests"] == "2"
    assert first["x-ratelimit-remaining-requests"] == "1"
    assert parse_duration(first["x-ratelimit-reset-requests"]) == pytest.approx(30.0, abs=1)
    assert "x-ratelimit-limit-tokens" not in first  # no token budget configured
    assert refused["x-ratelimit-remaining-requests"] == "0"
    assert int(refused["retry-after-ms"]) > 0


def test_without_limits_no_headers_are_sent() -> None:
    with running_stub_server(StubConfig()) as stub:
        answer = post(stub, "openai")
    assert answer.status_code == 200
    assert not [h for h in answer.headers if "ratelimit" in h]


def test_the_command_line_takes_the_limits() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "juryflow.standin.server", "--rpm-limit", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "rate limits and the rate window must be positive" in done.stderr
    assert (
        "--tpm-limit"
        in subprocess.run(
            [sys.executable, "-m", "juryflow.standin.server", "--help"],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )


def test_juryflow_stub_server_keeps_a_budget() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    juryflow = str(Path(sys.executable).with_name("juryflow"))
    command = [
        juryflow,
        "stub-server",
        "--port",
        str(port),
        "--rpm-limit",
        "1",
        "--rate-window",
        "600",
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert "stub server on" in server.stdout.readline()  # it listens now
        stub = StubHandle(f"http://127.0.0.1:{port}", None, None)  # type: ignore[arg-type]
        answers = [post(stub, "openai") for _ in range(2)]
    finally:
        server.terminate()
        server.wait(60)
    assert [a.status_code for a in answers] == [200, 429]
    assert answers[0].headers["x-ratelimit-remaining-requests"] == "0"


# --- what a run learns for the next one ----------------------------------------------------


def judge_some(judge: LLMJudge) -> list[Judgment]:
    async def judge_all() -> list[Judgment]:
        try:
            return list(await asyncio.gather(*(judge.judge(item) for item in ITEMS[:6])))
        finally:
            await judge.aclose()

    return asyncio.run(judge_all())


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_later_run_on_a_server_without_headers_does_not_wait_for_a_first_answer(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HEADER_PACING_ENV, "1")
    with running_stub_server(StubConfig(latency_ms=5)) as stub:
        for run, waits in enumerate((True, False, False)):
            reset_limiters()  # a new run: a new process's limiters
            judge = judge_for(stub, provider)
            assert judge.limiter.quota is not None
            assert judge.limiter.quota.waits_for_first_answer is waits, f"run {run}"
            assert all(j.scored for j in judge_some(judge))


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_server_with_headers_is_waited_for_at_every_run(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HEADER_PACING_ENV, "1")
    with running_stub_server(StubConfig(latency_ms=5, rpm_limit=1000)) as stub:
        for run in range(2):
            reset_limiters()
            judge = judge_for(stub, provider)
            assert judge.limiter.quota is not None
            assert judge.limiter.quota.waits_for_first_answer, f"run {run}"
            assert all(j.scored for j in judge_some(judge))
