"""In-process limits: concurrency, requests and tokens per minute, shared per endpoint."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from juryflow.judges.panel import JudgeSpec
from juryflow.judges.ratelimit import (
    Limiter,
    LoopSafeSemaphore,
    TokenBucket,
    estimate_tokens,
    limiter_for,
    limiter_key,
    reset_limiters,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def spec(judge_id: str, model: str = "m", **extra: Any) -> JudgeSpec:
    return JudgeSpec(
        id=judge_id, provider="openai", model=model, prompt="hallucination_score", **extra
    )


async def test_concurrency_is_capped() -> None:
    limiter = Limiter(max_concurrency=3)

    async def call() -> None:
        async with limiter.slot(10):
            await asyncio.sleep(0.01)

    await asyncio.gather(*(call() for _ in range(20)))
    assert limiter.max_in_flight == 3
    assert limiter.in_flight == 0


def test_token_bucket_reserves_and_refills() -> None:
    clock = Clock()
    bucket = TokenBucket(60, clock=clock)  # one per second
    assert bucket.reserve(60) == 0.0  # a full minute's burst is allowed
    assert bucket.reserve(1) == pytest.approx(1.0)
    assert bucket.reserve(2) == pytest.approx(3.0)  # queued behind the previous caller
    clock.now = 10.0
    assert bucket.level == pytest.approx(7.0)
    assert bucket.reserve(1000) == pytest.approx(53.0)  # clamped to one minute's budget


def test_token_bucket_correction_with_actual_usage() -> None:
    clock = Clock()
    bucket = TokenBucket(6000, clock=clock)
    bucket.reserve(5000)
    bucket.adjust(300 - 5000)  # the call used 300, not the 5000 estimated
    assert bucket.level == pytest.approx(5700)
    bucket.adjust(10_000)  # under-estimated: charged as debt
    assert bucket.level == pytest.approx(-4300)
    bucket.adjust(-1e9)  # refunds never overfill
    assert bucket.level == 6000


async def test_requests_per_minute_makes_callers_wait() -> None:
    waits: list[float] = []

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)

    limiter = Limiter(max_concurrency=10, requests_per_minute=120, sleep=fake_sleep)
    for _ in range(121):
        async with limiter.slot(1):
            pass
    assert len(waits) == 1  # the 121st request of the minute
    assert waits[0] == pytest.approx(0.5, abs=0.1)


async def test_tokens_per_minute_uses_estimate_then_actual() -> None:
    waits: list[float] = []

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)

    limiter = Limiter(max_concurrency=10, tokens_per_minute=1000, sleep=fake_sleep)
    async with limiter.slot(900) as slot:
        slot.settle(100)  # the real call was small: 800 tokens come back
    async with limiter.slot(900):
        pass
    assert waits == []
    assert limiter.tokens is not None
    assert limiter.tokens.level == pytest.approx(0, abs=5)
    async with limiter.slot(600):
        pass
    assert waits and waits[0] == pytest.approx(36, abs=1)  # 600 tokens at 1000/min


def test_estimate_tokens() -> None:
    assert estimate_tokens("x" * 400, 2048) == 100 + 2048


def test_registry_shares_limiters_per_endpoint_and_model() -> None:
    reset_limiters()
    first = limiter_for(spec("a", max_concurrency=2))
    assert limiter_for(spec("b", max_concurrency=9)) is first  # same endpoint: shared quota
    assert first.max_concurrency == 2  # the first judge's limits stand
    assert limiter_for(spec("c", model="other")) is not first
    local = spec("d", base_url="http://127.0.0.1:8000/v1")
    assert limiter_for(local) is not first
    assert limiter_key(local) == "openai|http://127.0.0.1:8000/v1|m"
    reset_limiters()
    assert limiter_for(spec("a")) is not first


def test_one_limiter_serves_several_event_loops() -> None:
    # Prefect may run tasks on worker threads with their own loops; the cap must hold.
    limiter = Limiter(max_concurrency=2)
    errors: list[BaseException] = []

    async def burst() -> None:
        async def call() -> None:
            async with limiter.slot(1):
                await asyncio.sleep(0.005)

        await asyncio.gather(*(call() for _ in range(15)))

    def worker() -> None:
        try:
            asyncio.run(burst())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert errors == []
    assert limiter.max_in_flight == 2
    assert limiter.in_flight == 0


async def test_cancelled_waiter_does_not_leak_a_permit() -> None:
    semaphore = LoopSafeSemaphore(1)
    await semaphore.acquire()
    waiter = asyncio.create_task(semaphore.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    semaphore.release()
    await asyncio.wait_for(semaphore.acquire(), 1)  # the permit came back
    semaphore.release()


async def test_permit_granted_during_cancellation_is_returned() -> None:
    semaphore = LoopSafeSemaphore(1)
    await semaphore.acquire()
    waiter = asyncio.create_task(semaphore.acquire())
    await asyncio.sleep(0)
    semaphore.release()  # hands the permit to the waiter (scheduled)...
    waiter.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.wait_for(semaphore.acquire(), 1)


class _CountingLoop(asyncio.SelectorEventLoop):
    """A real event loop that counts the callbacks handed to it from outside."""

    threadsafe_calls = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def test_a_permit_passed_within_one_loop_does_not_wake_it_from_outside() -> None:
    """On the hot path a permit goes from one call to the next on the same loop: it is
    granted with ``call_soon``, not through the loop's self-pipe; from another thread it
    still goes through ``call_soon_threadsafe``."""
    semaphore = LoopSafeSemaphore(1)
    loop = _CountingLoop()

    async def within() -> None:
        await semaphore.acquire()
        waiters = [asyncio.create_task(semaphore.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        for waiter in waiters:
            semaphore.release()
            await asyncio.wait_for(waiter, 5)
        assert loop.threadsafe_calls == 0

        waiter = asyncio.create_task(semaphore.acquire())
        await asyncio.sleep(0)
        releaser = threading.Thread(target=semaphore.release)
        releaser.start()
        await asyncio.wait_for(waiter, 5)
        releaser.join(5)
        assert loop.threadsafe_calls == 1
        semaphore.release()

    try:
        loop.run_until_complete(within())
    finally:
        loop.close()
