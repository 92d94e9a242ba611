"""Bounded retries with exponential backoff, full jitter, and the server's Retry-After.

A small loop rather than tenacity: the wait depends on the error (Retry-After), the sleep
is injectable for tests, and the attempt count is part of the result.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from juryflow.judges.providers.base import ProviderError
from juryflow.judges.redact import redact_text

T = TypeVar("T")


class RetriesExhausted(Exception):
    """Every allowed attempt failed with a retryable error; carries the last one."""

    def __init__(self, last_error: ProviderError, attempts: int) -> None:
        # Redacted again although ProviderError cleans its message: a caller may have built
        # the error with a secret this process learnt only later.
        super().__init__(redact_text(f"gave up after {attempts} attempts: {last_error}"))
        self.last_error = last_error
        self.attempts = attempts


def backoff_delay(
    attempt: int,
    error: ProviderError,
    base_delay: float,
    max_delay: float,
    rng: random.Random | random.SystemRandom,
) -> float:
    """How long to wait after failed attempt number ``attempt`` (1-based)."""
    if error.retry_after is not None:
        # The server said when; waiting less just earns another 429.
        return min(max(error.retry_after, 0.0), max_delay)
    ceiling = min(max_delay, base_delay * 2 ** (attempt - 1))
    # Full jitter: concurrent judges that failed together do not retry together.
    return rng.uniform(0.0, ceiling)


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    should_retry: Callable[[ProviderError], bool],
    max_attempts: int,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """``(fn(), attempts)``, retrying ProviderErrors that ``should_retry`` accepts.

    A non-retryable ProviderError is re-raised at once, and so is a fatal one (a rejected
    key, an unknown model) whatever ``should_retry`` says; other exceptions are bugs and
    propagate untouched. After ``max_attempts`` retryable failures: RetriesExhausted.
    """
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    jitter = rng or random.SystemRandom()
    last_error: ProviderError | None = None
    for attempt in range(1, max_attempts + 1):
        try:
            return await fn(), attempt
        except ProviderError as error:
            if error.fatal or not should_retry(error):
                raise
            last_error = error
            if attempt < max_attempts:
                await sleep(backoff_delay(attempt, error, base_delay, max_delay, jitter))
    assert last_error is not None
    raise RetriesExhausted(last_error, max_attempts)
