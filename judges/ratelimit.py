"""In-process limits per provider endpoint: concurrency, requests/minute, tokens/minute.

Judges that share a provider, endpoint and model share one :class:`Limiter` through the
module registry, because the provider's quota is shared too. The primitives are
thread-safe rather than asyncio-only: tasks of one process may run on several event loops
(Prefect runs tasks in worker threads), and an ``asyncio.Semaphore`` is bound to one loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from juryflow.judges.panel import JudgeSpec


class LoopSafeSemaphore:
    """A counting semaphore awaitable from any event loop in any thread."""

    def __init__(self, value: int) -> None:
        if value < 1:
            raise ValueError("a semaphore needs at least one permit")
        self._value = value
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._value > 0 and not self._waiters:
                self._value -= 1
                return
            future: asyncio.Future[None] = loop.create_future()
            waiter = (loop, future)
            self._waiters.append(waiter)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                queued = waiter in self._waiters
                if queued:
                    self._waiters.remove(waiter)
            # Granted just before the cancellation landed: the permit is ours to give back.
            if not queued and future.done() and not future.cancelled():
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            # Skip waiters that were cancelled or whose loop has gone away.
            while self._waiters and (self._waiters[0][1].done() or self._waiters[0][0].is_closed()):
                self._waiters.popleft()
            if not self._waiters:
                self._value += 1
                return
            loop, future = self._waiters.popleft()
        try:
            loop.call_soon_threadsafe(self._grant, future)
        except RuntimeError:
            self.release()  # the loop closed just now: pass the permit on

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            self.release()
        else:
            future.set_result(None)


class TokenBucket:
    """A per-minute budget refilled continuously, used by reservation.

    ``reserve`` takes the amount at once, letting the level go negative, and returns how
    long the caller must wait for the debt to be refilled: callers queue in arrival order
    without polling.
    """

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = self.capacity / 60.0
        self._clock = clock
        self._level = self.capacity
        self._updated = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._updated) * self.rate)
        self._updated = now

    def reserve(self, amount: float) -> float:
        """Take ``amount`` (at most a full minute's budget); seconds to wait before using it."""
        with self._lock:
            self._refill()
            self._level -= min(float(amount), self.capacity)
            return max(0.0, -self._level / self.rate)

    def adjust(self, delta: float) -> None:
        """Charge ``delta`` more (or refund, if negative) once the true usage is known."""
        with self._lock:
            self._refill()
            self._level = min(self.capacity, self._level - delta)

    @property
    def level(self) -> float:
        with self._lock:
            self._refill()
            return self._level


@dataclass
class Slot:
    """One admitted request; ``settle`` reports the tokens it really used."""

    estimated_tokens: int
    actual_tokens: int | None = None

    def settle(self, actual_tokens: int | None) -> None:
        self.actual_tokens = actual_tokens


class Limiter:
    def __init__(
        self,
        max_concurrency: int,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.max_concurrency = max_concurrency
        self.semaphore = LoopSafeSemaphore(max_concurrency)
        self.requests = TokenBucket(requests_per_minute) if requests_per_minute else None
        self.tokens = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        self._sleep = sleep
        self._count_lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    @asynccontextmanager
    async def slot(self, estimated_tokens: int) -> AsyncIterator[Slot]:
        """Wait for rate budget, then a concurrency permit; hold the permit inside the block."""
        wait = 0.0
        if self.requests is not None:
            wait = self.requests.reserve(1)
        if self.tokens is not None:
            wait = max(wait, self.tokens.reserve(estimated_tokens))
        if wait > 0:
            # Waiting for budget outside the semaphore: a queued request holds no permit.
            await self._sleep(wait)
        await self.semaphore.acquire()
        slot = Slot(estimated_tokens)
        with self._count_lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield slot
        finally:
            with self._count_lock:
                self.in_flight -= 1
            self.semaphore.release()
            if self.tokens is not None and slot.actual_tokens is not None:
                self.tokens.adjust(slot.actual_tokens - estimated_tokens)


def estimate_tokens(prompt: str, max_tokens: int) -> int:
    """A pre-call upper-ish bound: ~4 characters per prompt token plus the whole output cap."""
    return len(prompt) // 4 + max_tokens


def limiter_key(spec: JudgeSpec) -> str:
    # Quotas belong to an account per model on hosted APIs, and to the server on local ones.
    return f"{spec.provider}|{spec.base_url or 'default'}|{spec.model}"


_registry: dict[str, Limiter] = {}
_registry_lock = threading.Lock()


def limiter_for(spec: JudgeSpec) -> Limiter:
    """The process-wide limiter of ``spec``'s endpoint; the first judge to ask sets its limits."""
    key = limiter_key(spec)
    with _registry_lock:
        limiter = _registry.get(key)
        if limiter is None:
            limiter = Limiter(
                spec.max_concurrency, spec.requests_per_minute, spec.tokens_per_minute
            )
            _registry[key] = limiter
        return limiter


def reset_limiters() -> None:
    """Forget every limiter (tests, or a new run in a long-lived process)."""
    with _registry_lock:
        _registry.clear()
