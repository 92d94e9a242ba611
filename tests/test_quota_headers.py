"""The providers' rate-limit headers, read; and the budget that paces calls by them."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.judges.providers import header_memory
from juryflow.judges.providers.quota_headers import (
    CURRENT_OBSERVER,
    Quota,
    observe_response,
    parse_duration,
    parse_reset_time,
    quotas_from_headers,
)
from juryflow.judges.providers.user_cache import cache_dir
from juryflow.judges.ratelimit import (
    MARGIN_SECONDS,
    MAX_HOLD_SECONDS,
    HeaderBudget,
    Limiter,
    LoopSafeEvent,
    header_pacing_enabled,
)
from juryflow.standin.quotas import go_duration, rfc3339

NOW = 1_700_000_000.0  # a Unix time


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def at(seconds: float) -> str:
    """An RFC 3339 time ``seconds`` after NOW, to the millisecond."""
    return rfc3339(NOW + seconds)


# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1s", 1.0),
        ("20ms", 0.02),
        ("8.64s", 8.64),
        ("1h2m3.5s", 3723.5),
        ("250us", 0.00025),
        ("0", 0.0),
        ("60", 60.0),  # bare seconds, as some proxies send
        (" 12ms ", 0.012),
    ],
)
def test_openai_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "abc", "-1s", "1x", "1s2", "s", "1.2.3s", "nan", "inf", "1 s", "1m-2s"]
)
def test_malformed_durations_are_none(text: str) -> None:
    assert parse_duration(text) is None


def test_anthropic_reset_times() -> None:
    assert parse_reset_time(at(30), NOW) == pytest.approx(30.0)
    assert parse_reset_time(at(0.25).lower(), NOW) == pytest.approx(0.25)  # "t" and "z" too
    # Given to the whole second, the time may have been cut: read as up to a second later.
    whole = datetime.fromtimestamp(NOW + 30, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert parse_reset_time(whole, NOW) == pytest.approx(31.0)
    offset = datetime.fromtimestamp(NOW + 10, UTC).astimezone().isoformat(timespec="seconds")
    assert parse_reset_time(offset, NOW) == pytest.approx(11.0)
    assert parse_reset_time(at(-5), NOW) == 0.0  # past: whole already


@pytest.mark.parametrize(
    "text",
    ["", "soon", "2025-01-01", "2025-01-01T00:00:30", "2025-13-01T00:00:30Z", "1700000000", "30"],
)
def test_malformed_reset_times_are_none(text: str) -> None:
    assert parse_reset_time(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-23:59",
        "2025-01-01T00:00:00+99:00",
        "2025-01-01T00:00:00.123456789Z",
    ],
)
def test_extreme_reset_times_never_raise(text: str) -> None:
    seconds = parse_reset_time(text, NOW)
    assert seconds is None or seconds >= 0
    headers = {
        "anthropic-ratelimit-requests-limit": "5",
        "anthropic-ratelimit-requests-remaining": "1",
        "anthropic-ratelimit-requests-reset": text,
    }
    for quota in quotas_from_headers(headers, NOW):
        assert quota.reset_seconds is None or 0 <= quota.reset_seconds <= 86_400


def test_anthropic_headers() -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": at(1.2),
        "anthropic-ratelimit-tokens-limit": "48000",
        "anthropic-ratelimit-tokens-remaining": "47000",
        "anthropic-ratelimit-tokens-reset": at(1.5),
        "anthropic-ratelimit-input-tokens-limit": "40000",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
        "anthropic-ratelimit-input-tokens-reset": at(1.5),
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "8000",
        "anthropic-ratelimit-output-tokens-reset": at(0),
        "request-id": "req_1",
    }
    quotas = {q.dimension: q for q in quotas_from_headers(headers, NOW)}
    assert quotas["requests"] == Quota("requests", 50, 49, pytest.approx(1.2))
    assert quotas["tokens"].limit == 48000 and quotas["tokens"].remaining == 47000
    assert quotas["input_tokens"].remaining == 39000
    assert quotas["output_tokens"].reset_seconds == 0.0
    assert quotas["requests"].refill_per_second == pytest.approx(1 / 1.2)
    assert quotas["output_tokens"].refill_per_second is None  # full: no rate to be seen


def test_openai_headers_any_case() -> None:
    headers = {
        "X-RateLimit-Limit-Requests": "60",
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-limit-tokens_usage_based": "150000",  # a variant nobody documents
    }
    quotas = {q.dimension: q for q in quotas_from_headers(headers, NOW)}
    assert set(quotas) == {"requests", "tokens"}
    assert quotas["requests"] == Quota("requests", 60, 59, 1.0)
    assert quotas["tokens"].reset_seconds == 360.0
    assert quotas["requests"].refill_per_second == pytest.approx(1.0)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content-type": "application/json"},
        {"x-ratelimit-limit-requests": "60"},  # no remaining
        {"x-ratelimit-limit-requests": "abc", "x-ratelimit-remaining-requests": "5"},
        {"x-ratelimit-limit-requests": "-1", "x-ratelimit-remaining-requests": "-1"},  # Azure
        {"x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "0"},
        {"x-ratelimit-limit-requests": "nan", "x-ratelimit-remaining-requests": "1"},
        {"x-ratelimit-limit-requests": "inf", "x-ratelimit-remaining-requests": "1"},
        {"anthropic-ratelimit-requests-limit": "", "anthropic-ratelimit-requests-remaining": ""},
    ],
)
def test_unusable_budgets_are_left_out(headers: dict[str, str]) -> None:
    assert quotas_from_headers(headers, NOW) == ()


def test_a_bad_reset_keeps_the_budget_without_a_rate() -> None:
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "75",  # more than the limit: read as the limit
        "x-ratelimit-reset-requests": "soon",
        "anthropic-ratelimit-tokens-limit": "1000",
        "anthropic-ratelimit-tokens-remaining": "10",
        "anthropic-ratelimit-tokens-reset": "tomorrow",
    }
    quotas = {q.dimension: q for q in quotas_from_headers(headers, NOW)}
    assert quotas["requests"] == Quota("requests", 60, 60, None)
    assert quotas["tokens"].reset_seconds is None and quotas["tokens"].refill_per_second is None


@settings(deadline=None, max_examples=300)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                f"{p}-{d}-{f}"
                for p in ("anthropic-ratelimit",)
                for d in ("requests", "tokens", "input-tokens", "output-tokens")
                for f in ("limit", "remaining", "reset")
            ]
            + [
                f"x-ratelimit-{f}-{d}"
                for f in ("limit", "remaining", "reset")
                for d in ("requests", "tokens")
            ]
        ),
        st.one_of(
            st.text(max_size=40),
            st.floats(allow_nan=True, allow_infinity=True).map(str),
            st.integers(-(10**30), 10**30).map(str),
            st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
        ),
    )
)
def test_any_header_values_never_raise(headers: dict[str, str]) -> None:
    for quota in quotas_from_headers(headers, NOW):
        assert quota.limit > 0 and 0 <= quota.remaining <= quota.limit
        assert math.isfinite(quota.limit) and math.isfinite(quota.remaining)
        assert quota.reset_seconds is None or 0 <= quota.reset_seconds <= 86_400


def test_the_stand_in_writes_what_is_read() -> None:
    for seconds in (0.02, 0.5, 1.0, 8.64, 59.999, 60.0, 360.0, 3723.5):
        assert parse_duration(go_duration(seconds)) == pytest.approx(seconds, abs=1e-3)
    assert go_duration(360.0) == "6m0s" and go_duration(0.02) == "20ms"
    assert parse_reset_time(rfc3339(NOW + 12.345), NOW) == pytest.approx(12.345)


def test_a_response_outside_any_call_is_ignored() -> None:
    assert CURRENT_OBSERVER.get() is None
    observe_response({"x-ratelimit-limit-requests": "1", "x-ratelimit-remaining-requests": "0"})


# --- the budget ----------------------------------------------------------------------------


def requests(limit: float, remaining: float, reset: float | None) -> Quota:
    return Quota("requests", limit, remaining, reset)


def test_nothing_known_holds_nothing() -> None:
    budget = HeaderBudget(clock=Clock())
    assert all(budget.reserve(1000).hold == 0.0 for _ in range(100))


def test_a_spent_budget_holds_calls_until_it_refills() -> None:
    clock = Clock()
    budget = HeaderBudget(clock=clock)
    first = budget.reserve(10)
    # 10 requests a second: 2 left when the server counted the first call.
    first.observe([requests(10, 2, 0.8)])
    first.finish()
    holds = [budget.reserve(10).hold for _ in range(5)]
    assert holds[:2] == [0.0, 0.0]
    # The others queue behind each other, one refill period apart, without polling.
    margin = MARGIN_SECONDS
    assert holds[2:] == pytest.approx([0.1 + margin, 0.2 + margin, 0.3 + margin])
    clock.now = 10.0  # long after: whole again
    assert budget.levels()["requests"] == pytest.approx(10.0)


def test_calls_still_out_are_not_in_the_reading() -> None:
    clock = Clock()
    budget = HeaderBudget(clock=clock)
    tickets = [budget.reserve(10) for _ in range(4)]  # four calls out at once
    # The answer to the first says 5 were left; the three others may have been counted
    # after it: they are taken off.
    tickets[0].observe([requests(10, 5, 0.5)])
    assert budget.levels()["requests"] == pytest.approx(2.0)


def test_an_older_answer_does_not_undo_a_newer_one() -> None:
    clock = Clock()
    budget = HeaderBudget(clock=clock)
    early = budget.reserve(10)
    clock.now = 1.0
    late = budget.reserve(10)
    late.observe([requests(100, 10, 9.0)])
    late.finish()
    early.observe([requests(100, 90, 1.0)])  # sent before: stale
    assert budget.levels()["requests"] == pytest.approx(9.0)  # 10, less the early call still out
    early.finish()
    early.observe([requests(100, 90, 1.0)])  # and once over, no news at all
    assert budget.levels()["requests"] == pytest.approx(9.0)


def test_a_token_budget_is_charged_the_estimate() -> None:
    clock = Clock()
    budget = HeaderBudget(clock=clock)
    ticket = budget.reserve(3000)
    ticket.observe([Quota("output_tokens", 8000, 5000, 3.0)])  # 1000 tokens a second
    ticket.finish()
    assert budget.reserve(3000).hold == 0.0
    assert budget.reserve(3000).hold == pytest.approx(1.0 + MARGIN_SECONDS)
    # A call bigger than the whole budget waits for a whole budget, not for ever.
    assert budget.reserve(10**9).hold <= MAX_HOLD_SECONDS


def test_a_long_quota_holds_at_most_a_minute() -> None:
    budget = HeaderBudget(clock=Clock())
    ticket = budget.reserve(1)
    ticket.observe([requests(200, 0, 86_400.0)])  # a daily quota, spent
    assert budget.reserve(1).hold == MAX_HOLD_SECONDS


def test_a_rough_rate_near_a_full_budget_does_not_replace_a_precise_one() -> None:
    budget = HeaderBudget(clock=Clock())
    ticket = budget.reserve(1)
    ticket.observe([requests(60, 10, 50.0)])  # precise: 1 a second
    ticket.finish()
    ticket = budget.reserve(1)
    ticket.observe([requests(60, 59, 0.1)])  # 10 a second, read off a nearly full budget
    ticket.finish()
    for _ in range(59):
        budget.reserve(1)
    assert budget.reserve(1).hold == pytest.approx(1.0 + MARGIN_SECONDS)


def test_pacing_is_on_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JURYFLOW_HEADER_PACING", raising=False)
    assert header_pacing_enabled() and Limiter(2).quota is not None
    for off in ("0", "off", "False", " no "):
        monkeypatch.setenv("JURYFLOW_HEADER_PACING", off)
        assert not header_pacing_enabled() and Limiter(2).quota is None
    assert Limiter(2, header_pacing=True).quota is not None


async def test_the_first_call_goes_alone_until_its_answer() -> None:
    limiter = Limiter(4, header_pacing=True)
    started: list[int] = []
    answer = asyncio.Event()

    async def call(n: int) -> None:
        async with limiter.slot(10):
            started.append(n)
            if n == 0:
                await answer.wait()
                ticket = CURRENT_OBSERVER.get()
                assert ticket is not None
                ticket.observe([requests(100, 99, 0.6)])

    first = asyncio.create_task(call(0))
    await asyncio.sleep(0)
    others = [asyncio.create_task(call(n)) for n in (1, 2, 3)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert started == [0]  # the others wait for what the first answer says
    answer.set()
    await asyncio.gather(first, *others)
    assert sorted(started) == [0, 1, 2, 3]
    assert limiter.in_flight == 0 and CURRENT_OBSERVER.get() is None


def test_a_loop_safe_event_wakes_waiters_on_other_loops() -> None:
    event = LoopSafeEvent()
    woke: list[str] = []

    def wait_on_own_loop(name: str) -> None:
        asyncio.run(event.wait())
        woke.append(name)

    threads = [threading.Thread(target=wait_on_own_loop, args=(f"t{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(event._waiters) < 3 and time.monotonic() < deadline:  # all three are waiting
        time.sleep(0.01)
    event.set()
    for thread in threads:
        thread.join(10)
    assert sorted(woke) == ["t0", "t1", "t2"]
    asyncio.run(event.wait())  # set: returns at once


def test_an_endpoint_that_sent_no_headers_is_not_waited_for_until_it_sends_some() -> None:
    first = HeaderBudget(clock=Clock(), endpoint="openai|http://127.0.0.1:1/v1|m")
    assert first.waits_for_first_answer
    ticket = first.reserve(10)
    ticket.observe([])  # answered without any budget
    ticket.finish()
    later = HeaderBudget(clock=Clock(), endpoint="openai|http://127.0.0.1:1/v1|m")
    assert not later.waits_for_first_answer
    assert HeaderBudget(
        clock=Clock(), endpoint="openai|http://127.0.0.1:2/v1|m"
    ).waits_for_first_answer
    assert HeaderBudget(clock=Clock()).waits_for_first_answer  # no endpoint: nothing kept
    # The server has begun to send budgets: the next run waits for what they say.
    ticket = later.reserve(10)
    ticket.observe([])
    ticket.observe([requests(100, 99, 0.6)])
    ticket.finish()
    assert HeaderBudget(
        clock=Clock(), endpoint="openai|http://127.0.0.1:1/v1|m"
    ).waits_for_first_answer


def test_what_an_endpoint_sends_is_kept_without_its_address() -> None:
    endpoint = "openai|http://user:secret-pass@10.0.0.7:8000/v1|m"
    ticket = HeaderBudget(clock=Clock(), endpoint=endpoint).reserve(1)
    ticket.observe([])
    text = (cache_dir() / header_memory.FILE_NAME).read_text()
    assert "secret-pass" not in text and "10.0.0.7" not in text and "false" in text
