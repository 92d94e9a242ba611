"""Bounded retries: backoff with full jitter, Retry-After, and immediate non-retryable errors."""

from __future__ import annotations

import random

import pytest

from juryflow.judges.providers.base import (
    ProviderError,
    parse_retry_after,
    retry_after_from_headers,
)
from juryflow.judges.retry import RetriesExhausted, backoff_delay, call_with_retries


class Flaky:
    """Fails with the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def server_error(retry_after: float | None = None) -> ProviderError:
    return ProviderError("boom", retryable=True, status=500, retry_after=retry_after, kind="server")


def retryable(error: ProviderError) -> bool:
    return error.retryable


async def test_succeeds_after_transient_failures() -> None:
    fn, sleeps = Flaky(server_error(), server_error()), Sleeps()
    result, attempts = await call_with_retries(fn, retryable, 5, base_delay=0.1, sleep=sleeps)
    assert (result, attempts, fn.calls) == ("ok", 3, 3)
    assert len(sleeps.delays) == 2


async def test_first_try_success_counts_one_attempt() -> None:
    sleeps = Sleeps()
    assert await call_with_retries(Flaky(), retryable, 3, sleep=sleeps) == ("ok", 1)
    assert sleeps.delays == []


async def test_non_retryable_error_raises_at_once() -> None:
    auth = ProviderError("bad key", retryable=False, status=401, kind="auth")
    fn, sleeps = Flaky(auth), Sleeps()
    with pytest.raises(ProviderError) as caught:
        await call_with_retries(fn, retryable, 5, sleep=sleeps)
    assert caught.value is auth
    assert fn.calls == 1 and sleeps.delays == []


async def test_should_retry_decides_not_the_flag_alone() -> None:
    fn = Flaky(server_error())
    with pytest.raises(ProviderError):
        await call_with_retries(fn, lambda error: False, 5, sleep=Sleeps())
    assert fn.calls == 1


async def test_exhausted_attempts_raise_with_last_error_and_count() -> None:
    errors = [server_error() for _ in range(4)]
    fn, sleeps = Flaky(*errors), Sleeps()
    with pytest.raises(RetriesExhausted) as caught:
        await call_with_retries(fn, retryable, 3, sleep=sleeps)
    assert caught.value.attempts == 3
    assert caught.value.last_error is errors[2]
    assert fn.calls == 3
    assert len(sleeps.delays) == 2  # no pointless sleep after the last attempt


async def test_retry_after_is_honoured_and_capped() -> None:
    rate_limited = ProviderError(
        "slow down", retryable=True, status=429, retry_after=2.5, kind="rate_limit"
    )
    too_long = ProviderError(
        "slow down", retryable=True, status=429, retry_after=600, kind="rate_limit"
    )
    sleeps = Sleeps()
    await call_with_retries(Flaky(rate_limited, too_long), retryable, 5, max_delay=30, sleep=sleeps)
    assert sleeps.delays == [2.5, 30]


async def test_other_exceptions_are_bugs_and_propagate() -> None:
    fn = Flaky(KeyError("bug"))
    with pytest.raises(KeyError):
        await call_with_retries(fn, retryable, 5, sleep=Sleeps())
    assert fn.calls == 1


async def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        await call_with_retries(Flaky(), retryable, 0, sleep=Sleeps())


def test_backoff_is_full_jitter_under_an_exponential_ceiling() -> None:
    rng = random.Random(1)
    error = server_error()
    for attempt in range(1, 10):
        ceiling = min(8.0, 0.5 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, error, 0.5, 8.0, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # spread over the whole range, not clustered
        assert min(delays) < ceiling * 0.2


async def test_jitter_is_reproducible_with_a_seeded_rng() -> None:
    def run() -> list[float]:
        return [backoff_delay(n, server_error(), 1.0, 30.0, random.Random(42)) for n in (1, 2)]

    assert run() == run()


def test_retry_after_header_forms() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert retry_after_from_headers({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    assert retry_after_from_headers({"retry-after": "9"}) == 9.0
