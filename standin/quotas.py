"""The stand-in's rate limits, kept and reported as the real APIs keep and report theirs.

Per model, a request budget (``StubConfig.rpm_limit``) and a token budget
(``StubConfig.tpm_limit``) per ``rate_window`` seconds, each a token bucket refilled
continuously, as both APIs document theirs. A call is counted when it arrives: the prompt
at ~4 characters a token plus its ``max_tokens`` against the token budget (the API cannot
know the answer's length yet). A call the budgets cannot pay for is refused with a 429 and
a ``retry-after``; every answer to a model call carries the API's rate-limit headers:

- Anthropic: ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, the reset an
  RFC 3339 time;
- OpenAI: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the reset a duration
  such as ``6m0s`` or ``20ms``.

``remaining`` is rounded down, and ``reset`` is when the budget is whole again from there.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass
class _Bucket:
    level: float
    updated: float


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a call may proceed, and the headers its answer carries."""

    refused: bool
    headers: dict[str, str]


NO_LIMITS = Admission(False, {})


class QuotaKeeper:
    """The budgets of every model a stand-in serves; thread-safe."""

    def __init__(
        self,
        rpm_limit: float | None,
        tpm_limit: float | None,
        window: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if window <= 0:
            raise ValueError("the rate window must be positive")
        self.limits = {
            name: float(limit)
            for name, limit in (("requests", rpm_limit), ("tokens", tpm_limit))
            if limit is not None
        }
        if any(limit <= 0 for limit in self.limits.values()):
            raise ValueError("rate limits must be positive")
        self.window = window
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def admit(self, api: str, model: str, body: dict[str, Any], prompt: str) -> Admission:
        """Count a call to ``model`` (or refuse it); ``prompt`` is the text it sends."""
        if not self.limits:
            return NO_LIMITS
        costs = {"requests": 1.0, "tokens": float(len(prompt) // 4 + _max_tokens(body))}
        with self._lock:
            now = self._clock()
            levels: dict[str, float] = {}
            for name, limit in self.limits.items():
                bucket = self._buckets.setdefault((model, name), _Bucket(limit, now))
                rate = limit / self.window
                bucket.level = min(limit, bucket.level + (now - bucket.updated) * rate)
                bucket.updated = now
                levels[name] = bucket.level
            # A call larger than a whole budget waits for a whole one (it could never run).
            need = {name: min(costs[name], limit) for name, limit in self.limits.items()}
            short = {name for name in self.limits if levels[name] < need[name]}
            if not short:
                for name in self.limits:
                    self._buckets[(model, name)].level -= need[name]
                    levels[name] -= need[name]
        headers = self._headers(api, levels)
        if not short:
            return Admission(False, headers)
        wait = max((need[name] - levels[name]) * self.window / self.limits[name] for name in short)
        headers["retry-after"] = str(max(1, math.ceil(wait)))  # whole seconds, as both APIs
        if api == "openai":
            headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        return Admission(True, headers)

    def _headers(self, api: str, levels: dict[str, float]) -> dict[str, str]:
        headers: dict[str, str] = {}
        wall = self._wall()
        for name, limit in self.limits.items():
            remaining = max(0, math.floor(levels[name]))
            reset = (limit - remaining) * self.window / limit
            if api == "anthropic":
                prefix = f"anthropic-ratelimit-{name}"
                headers[f"{prefix}-limit"] = _count(limit)
                headers[f"{prefix}-remaining"] = str(remaining)
                headers[f"{prefix}-reset"] = rfc3339(wall + reset)
            else:
                headers[f"x-ratelimit-limit-{name}"] = _count(limit)
                headers[f"x-ratelimit-remaining-{name}"] = str(remaining)
                headers[f"x-ratelimit-reset-{name}"] = go_duration(reset)
        return headers


def _max_tokens(body: dict[str, Any]) -> int:
    value = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    return value if isinstance(value, int) and value > 0 else 0


def _count(limit: float) -> str:
    return str(math.floor(limit))


def rfc3339(unix_time: float) -> str:
    """``2025-01-01T00:00:30.250Z``: milliseconds, so short test windows stay exact."""
    when = datetime.fromtimestamp(unix_time, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def go_duration(seconds: float) -> str:
    """``20ms``, ``1.5s``, ``6m0s``: how OpenAI writes a reset."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60.0)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text
