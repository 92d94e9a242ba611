"""The quota a provider reports on every answer: its rate-limit headers, read.

Both APIs say on each response, success or error, how much of the account's request and
token budgets is left and when each is whole again:

- Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}``, the reset an RFC 3339 time (``2025-01-01T00:00:30Z``);
- OpenAI: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the reset a duration
  (``6m0s``, ``1s``, ``20ms``, ``8.64s``).

Both refill their budgets continuously (token buckets), so a budget's refill rate is what
it lacks over the time it takes to be whole. A value that does not parse, or that no
budget can have (a negative limit, as some proxies send), drops that budget from the
reading: headers are advice, and never fail a call.

The HTTP client's response hook hands each response's headers to :func:`observe_response`,
which passes what they say to the observer the call was admitted under (a context
variable set by :mod:`juryflow.judges.ratelimit` around each call): no body is parsed to
tell which judge's limiter a response belongs to.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

Dimension = Literal["requests", "tokens", "input_tokens", "output_tokens"]

MAX_RESET_SECONDS = 86_400.0
"""A reset further away is read as this far: a daily quota is the longest either API has."""

_ANTHROPIC = {
    "requests": "anthropic-ratelimit-requests",
    "tokens": "anthropic-ratelimit-tokens",
    "input_tokens": "anthropic-ratelimit-input-tokens",
    "output_tokens": "anthropic-ratelimit-output-tokens",
}
_OPENAI = {"requests": "requests", "tokens": "tokens"}
_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
_UNIT_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}


@dataclass(frozen=True, slots=True)
class Quota:
    """One budget as a response reports it."""

    dimension: Dimension
    limit: float
    remaining: float
    """At most ``limit``, at least 0."""
    reset_seconds: float | None
    """From when the server counted the call until the budget is whole again (at the
    latest); None when the server left it out."""

    @property
    def refill_per_second(self) -> float | None:
        """The bucket's refill rate, when the reading shows one (something is missing)."""
        if self.reset_seconds is None or self.reset_seconds <= 0 or self.remaining >= self.limit:
            return None
        return (self.limit - self.remaining) / self.reset_seconds


def parse_duration(value: str) -> float | None:
    """Seconds in a Go duration (``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``); None if not one."""
    text = value.strip()
    if not text:
        return None
    bare = _number(text)  # "0", or plain seconds as some proxies send
    if bare is not None:
        return bare if bare >= 0 else None
    seconds = 0.0
    position = 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(text) or not math.isfinite(seconds):
        return None
    return seconds


def parse_reset_time(value: str, now: float) -> float | None:
    """Seconds from ``now`` (a Unix time) until an RFC 3339 time, at the latest; None if not
    one."""
    # fromisoformat reads "Z" and fractions from Python 3.11; RFC 3339 also allows "t", "z".
    text = value.strip().upper()
    if len(text) < 20 or text[10] not in "T ":
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:  # RFC 3339 always has an offset; a time without one is not it
        return None
    # A time given to the whole second may have been cut: the budget is whole by the next.
    cut = 0.0 if "." in text[19:] else 1.0
    return max(0.0, when.timestamp() + cut - now)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _quota(
    dimension: Dimension,
    limit: str | None,
    remaining: str | None,
    reset: float | None,
) -> Quota | None:
    top, left = _number(limit), _number(remaining)
    if top is None or left is None or top <= 0 or left < 0:
        return None
    reset = None if reset is None else min(reset, MAX_RESET_SECONDS)
    return Quota(dimension, top, min(left, top), reset)


def quotas_from_headers(
    headers: Mapping[str, str], counted_at: float | None = None
) -> tuple[Quota, ...]:
    """Every budget ``headers`` report, in either API's format; () when they report none.

    ``counted_at`` is the Unix time the server counted the call (when it was sent; now by
    default): Anthropic's reset is a time, and the answer may come long after it counted.
    """
    found = {
        name.lower(): value
        for name, value in headers.items()
        if name.lower().startswith(_PREFIXES) and isinstance(value, str)
    }
    if not found:
        return ()
    wall = time.time() if counted_at is None else counted_at
    quotas: list[Quota] = []
    for dimension, prefix in _ANTHROPIC.items():
        reset_text = found.get(f"{prefix}-reset")
        reset = parse_reset_time(reset_text, wall) if reset_text is not None else None
        quota = _quota(
            dimension,  # type: ignore[arg-type]
            found.get(f"{prefix}-limit"),
            found.get(f"{prefix}-remaining"),
            reset,
        )
        if quota is not None:
            quotas.append(quota)
    for dimension, suffix in _OPENAI.items():
        reset_text = found.get(f"x-ratelimit-reset-{suffix}")
        reset = parse_duration(reset_text) if reset_text is not None else None
        quota = _quota(
            dimension,  # type: ignore[arg-type]
            found.get(f"x-ratelimit-limit-{suffix}"),
            found.get(f"x-ratelimit-remaining-{suffix}"),
            reset,
        )
        if quota is not None:
            quotas.append(quota)
    return tuple(quotas)


class QuotaObserver(Protocol):
    """Told what the answer to the call it admitted says of the provider's budgets."""

    @property
    def sent_at(self) -> float:
        """The Unix time the call went out."""
        ...

    def observe(self, quotas: Sequence[Quota]) -> None: ...


CURRENT_OBSERVER: ContextVar[QuotaObserver | None] = ContextVar(
    "juryflow_quota_observer", default=None
)
"""The observer of the call in progress in this task (set around the call by its limiter)."""


def observe_response(headers: Mapping[str, str]) -> None:
    """Pass what a response's headers say of the budgets to the call's observer, if any."""
    observer = CURRENT_OBSERVER.get()
    if observer is None:
        return
    # Told even when there are none: that the endpoint sends none is news too.
    observer.observe(quotas_from_headers(headers, observer.sent_at))
