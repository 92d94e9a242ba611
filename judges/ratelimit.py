"""In-process limits per provider endpoint: concurrency, requests/minute, tokens/minute,
and the provider's own account of what is left (:class:`HeaderBudget`).

Judges that share a provider, endpoint and model share one :class:`Limiter` through the
module registry, because the provider's quota is shared too. The primitives are
thread-safe rather than asyncio-only: tasks of one process may run on several event loops
(Prefect runs tasks in worker threads), and an ``asyncio.Semaphore`` is bound to one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers import header_memory
from juryflow.judges.providers.quota_headers import CURRENT_OBSERVER, Quota


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # called from a thread with no loop running
        return None


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
            if loop is _running_loop():
                # Its own thread: no need to wake the loop's selector through its self-pipe
                # (a write and a read per call on the hot path).
                loop.call_soon(self._grant, future)
            else:
                loop.call_soon_threadsafe(self._grant, future)
        except RuntimeError:
            self.release()  # the loop closed just now: pass the permit on

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            self.release()
        else:
            future.set_result(None)


class LoopSafeEvent:
    """A one-way event (set once, never cleared) awaitable from any event loop in any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def is_set(self) -> bool:
        with self._lock:
            return self._set

    def set(self) -> None:
        with self._lock:
            if self._set:
                return
            self._set = True
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                loop.call_soon_threadsafe(_wake, future)

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._set:
                return
            future: asyncio.Future[None] = loop.create_future()
            waiter = (loop, future)
            self._waiters.append(waiter)
        try:
            await future
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
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


HEADER_PACING_ENV = "JURYFLOW_HEADER_PACING"
"""Set to 0 (or off, false, no) to ignore the providers' rate-limit headers."""

MAX_HOLD_SECONDS = 60.0
"""The longest one call is held for the provider's budget: both APIs' limits are per minute;
a longer quota (a daily one, spent) is left to the 429s and their Retry-After."""

MARGIN_SECONDS = 0.05
"""Added to a hold, so that the call reaches the server once the budget has refilled."""

PROBE_SECONDS = 5.0
"""How long the calls behind the first one wait for its answer before going without it."""

PRECISE_SHARE = 0.25
"""A reading's refill rate replaces the one known once a quarter of the budget is missing:
near a full budget a reset given to the second (Anthropic) or a remaining rounded to
thousands of tokens makes it rough, and the rate only matters near an empty one."""


@dataclass(slots=True)
class _Level:
    """One budget as this process sees it: the provider's last reading, less the calls not
    counted in it, refilled at the rate the reading shows."""

    limit: float
    level: float
    rate: float
    """Units per second."""
    updated: float
    sent: float
    """When the call whose answer set the level went out: an answer to an earlier call is
    older news."""


@dataclass(frozen=True, slots=True)
class _Admitted:
    tokens: float
    sent: float
    """When the call goes out (its admission plus its hold), on the budget's clock."""


@dataclass(frozen=True, slots=True)
class QuotaTicket:
    """One admitted call: how long it is held, and where the answer's headers go."""

    budget: HeaderBudget
    seq: int
    hold: float
    sent_at: float
    """The Unix time the call goes out (its admission plus its hold)."""

    def observe(self, quotas: Sequence[Quota]) -> None:
        self.budget.observe(self.seq, quotas)

    def finish(self) -> None:
        """The call is over, answered or not."""
        self.budget.finish(self.seq)


class HeaderBudget:
    """Paces calls under the request and token budgets the provider reports in its headers.

    Each answer's headers (successes and errors alike) reset the budgets they report: what
    was left when the server counted the call, less every other call of this process not
    yet over (those sent at the same time may have been counted after it, and those held or
    sent later certainly were). Each new call reserves its share at
    once, as :class:`TokenBucket` does: when that takes a budget below zero, the call is
    held until the refill covers it (the reset time, for a spent budget), in arrival order
    and without polling. A call's tokens are not known before it is made, so every token
    budget (total, input or output) is charged the estimate; the next answer corrects it.
    Before the first answer nothing is known, so the first call goes alone and the others
    wait for its answer (:meth:`first_answer`, up to PROBE_SECONDS): max_concurrency calls
    of max_tokens each may be more than a whole budget. A server that sends no headers
    costs that one wait, and nothing is held after it; and once a run has found that (see
    :mod:`~juryflow.judges.providers.header_memory`), later runs on it skip the wait.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        endpoint: str | None = None,
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._levels: dict[str, _Level] = {}
        self._outstanding: dict[int, _Admitted] = {}
        self._seq = 0
        self._probing = False
        self._answered = LoopSafeEvent()
        self._endpoint = endpoint
        """Where what the answers carry is remembered for later runs (None: nowhere)."""
        self._sends_headers: bool | None = None
        if endpoint is not None and header_memory.sent_none_before(endpoint):
            self._answered.set()  # no first answer to wait for: it would say nothing

    @property
    def waits_for_first_answer(self) -> bool:
        """Whether calls still wait for the first answer (the first call goes alone)."""
        return not self._answered.is_set()

    async def first_answer(self) -> None:
        """Return at once for the first call and once its answer is in for the others."""
        if self._answered.is_set():
            return
        with self._lock:
            first = not self._probing
            self._probing = True
        if not first:
            # A first call that hangs holds the others only so long.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._answered.wait(), PROBE_SECONDS)

    def reserve(self, tokens: float) -> QuotaTicket:
        """Admit a call of about ``tokens`` tokens; its ticket says how long to hold it."""
        with self._lock:
            now = self._clock()
            self._seq += 1
            wait = 0.0
            for dimension, budget in self._levels.items():
                budget.level = min(
                    budget.limit, budget.level + (now - budget.updated) * budget.rate
                )
                budget.updated = now
                budget.level -= min(_cost(dimension, 1.0, tokens), budget.limit)
                if budget.level < 0:
                    wait = max(wait, -budget.level / budget.rate)
            if wait > 0:
                wait = min(wait + MARGIN_SECONDS, MAX_HOLD_SECONDS)
            self._outstanding[self._seq] = _Admitted(float(tokens), now + wait)
            return QuotaTicket(self, self._seq, wait, self._wall() + wait)

    def observe(self, seq: int, quotas: Sequence[Quota]) -> None:
        """What the answer to call ``seq`` says of the budgets (none: it had no headers)."""
        with self._lock:
            call = self._outstanding.get(seq)
            if call is None:  # over already: its answer is no news
                return
            # The first answer tells the next run whether to wait for one; a later answer
            # with headers after answers without tells it to wait again.
            sends = bool(quotas)
            learned = self._endpoint is not None and (
                self._sends_headers is None or (sends and not self._sends_headers)
            )
            if learned:
                self._sends_headers = sends
            now = self._clock()
            other_calls = len(self._outstanding) - 1
            # Summed only when there is a budget to correct: it walks every call in flight.
            other_tokens = (
                sum(a.tokens for s, a in self._outstanding.items() if s != seq) if sends else 0.0
            )
            for quota in quotas:
                known = self._levels.get(quota.dimension)
                if known is not None and known.sent > call.sent:
                    continue
                # No refill between the server's count and now: when it counted is not known
                # (the call may have waited for a connection), and a level kept a little
                # low costs nothing once calls are paced: they go out at the refill rate.
                level = quota.remaining - _cost(quota.dimension, other_calls, other_tokens)
                rate = _refill_rate(quota, known)
                self._levels[quota.dimension] = _Level(quota.limit, level, rate, now, call.sent)
        if learned and self._endpoint is not None:
            header_memory.remember(self._endpoint, sends)
        self._answered.set()

    def finish(self, seq: int) -> None:
        with self._lock:
            self._outstanding.pop(seq, None)
        self._answered.set()  # answered without headers, or not at all: nothing to wait for

    def levels(self) -> dict[str, float]:
        """What is left of each budget now, as far as this process knows (for inspection)."""
        with self._lock:
            now = self._clock()
            return {
                dimension: min(budget.limit, budget.level + (now - budget.updated) * budget.rate)
                for dimension, budget in self._levels.items()
            }


def _cost(dimension: str, calls: float, tokens: float) -> float:
    return calls if dimension == "requests" else tokens


def _refill_rate(quota: Quota, known: _Level | None) -> float:
    estimate = quota.refill_per_second
    precise = quota.limit - quota.remaining >= PRECISE_SHARE * quota.limit
    if estimate is not None and (precise or known is None):
        return estimate
    if known is not None:
        return known.rate
    return quota.limit / 60.0  # nothing to go by: both APIs' budgets are per minute


def header_pacing_enabled() -> bool:
    """Whether limiters pace calls by the providers' headers (on unless the variable says 0)."""
    return os.environ.get(HEADER_PACING_ENV, "").strip().lower() not in ("0", "off", "false", "no")


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
        header_pacing: bool | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.max_concurrency = max_concurrency
        self.semaphore = LoopSafeSemaphore(max_concurrency)
        self.requests = TokenBucket(requests_per_minute) if requests_per_minute else None
        self.tokens = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        pacing = header_pacing_enabled() if header_pacing is None else header_pacing
        self.quota = HeaderBudget(endpoint=endpoint) if pacing else None
        """The provider's reported budgets; None when header pacing is off."""
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
        counted = False
        ticket: QuotaTicket | None = None
        try:
            if self.quota is not None:
                await self.quota.first_answer()
                ticket = self.quota.reserve(estimated_tokens)
            if ticket is not None and ticket.hold > 0:
                # Held with its permit: the headers only speak of calls that were made, so
                # at most max_concurrency calls can go out before an answer says "spent".
                await self._sleep(ticket.hold)
            with self._count_lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            counted = True
            # The HTTP client's response hook finds the ticket here (same task, same context).
            token = CURRENT_OBSERVER.set(ticket)
            try:
                yield slot
            finally:
                # A context left elsewhere (a generator finalised by the loop) has no token.
                with contextlib.suppress(ValueError):
                    CURRENT_OBSERVER.reset(token)
        finally:
            if ticket is not None:
                ticket.finish()
            if counted:
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
                spec.max_concurrency,
                spec.requests_per_minute,
                spec.tokens_per_minute,
                endpoint=key,
            )
            _registry[key] = limiter
        return limiter


def reset_limiters() -> None:
    """Forget every limiter (tests, or a new run in a long-lived process)."""
    with _registry_lock:
        _registry.clear()
