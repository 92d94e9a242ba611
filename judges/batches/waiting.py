"""Waiting for batches: polls spaced by exponential backoff, asleep in between.

The wait holds no CPU (``asyncio.sleep``) and is cancellable: cancelling the task that
waits ends it at its next await, leaving the remote batches as they are (cancel them with
``BatchClient.cancel``, or leave them to finish and be read by a resumed run).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from juryflow.judges.batches.base import BatchClient
from juryflow.judges.batches.records import BatchStatus
from juryflow.judges.providers.base import ProviderError

POLL_SECONDS_ENV = "JURYFLOW_BATCH_POLL_SECONDS"
"""The first wait between two polls of a batch, in seconds (default 5); each wait doubles,
up to twelve times the first (a minute by default)."""
DEFAULT_POLL_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """Seconds between polling rounds: ``initial``, times ``factor`` each round, at most
    ``maximum``. Batches take minutes to hours: a poll a minute at most is plenty."""

    initial: float = 5.0
    factor: float = 2.0
    maximum: float = 60.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < self.initial or self.factor < 1:
            raise ValueError("backoff needs 0 <= initial <= maximum and factor >= 1")

    def delays(self) -> list[float]:
        """The first delays, for display and tests (the schedule then stays at maximum)."""
        delays: list[float] = []
        delay = self.initial
        while delay < self.maximum and len(delays) < 64:
            delays.append(delay)
            delay = min(self.maximum, delay * self.factor) if delay > 0 else self.maximum
        return [*delays, self.maximum]


async def wait_for(
    client: BatchClient,
    batch_ids: Sequence[str],
    on_status: Callable[[BatchStatus], None] | None = None,
    backoff: Backoff = Backoff(),
    *,
    max_polls: int | None = None,
    timeout: float | None = None,
) -> dict[str, BatchStatus]:
    """Poll every batch until all have ended; their last statuses, by batch id.

    Each round polls the batches not yet ended, tells ``on_status`` of each status (for
    progress), then sleeps the next backoff delay. It stops early after ``max_polls``
    rounds or once ``timeout`` seconds have passed, returning the statuses as they are:
    batches still running are the caller's to leave for a resumed run. A poll that fails
    with a retryable error is tried again next round; any other error is raised.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout if timeout is not None else None
    statuses: dict[str, BatchStatus] = {}
    pending = list(dict.fromkeys(batch_ids))
    delay = backoff.initial
    rounds = 0
    while pending:
        for batch_id in pending:
            try:
                status = await client.poll(batch_id)
            except ProviderError as error:
                if not error.retryable:
                    raise
                continue  # a passing fault: asked again next round
            statuses[batch_id] = status
            if on_status is not None:
                on_status(status)
        pending = [b for b in pending if b not in statuses or not statuses[b].ended]
        rounds += 1
        if not pending or (max_polls is not None and rounds >= max_polls):
            break
        sleep = delay
        if deadline is not None:
            left = deadline - loop.time()
            if left <= 0:
                break
            sleep = min(sleep, left)
        await asyncio.sleep(sleep)
        delay = min(backoff.maximum, delay * backoff.factor) if delay > 0 else backoff.maximum
    return statuses


def poll_backoff() -> Backoff:
    """The polls' backoff, from ``JURYFLOW_BATCH_POLL_SECONDS`` (tests poll fast)."""
    raw = os.environ.get(POLL_SECONDS_ENV)
    try:
        first = float(raw) if raw is not None else DEFAULT_POLL_SECONDS
    except ValueError:
        first = -1.0
    if not 0 <= first < float("inf"):
        raise ValueError(f"{POLL_SECONDS_ENV}={raw!r}: give the first wait between polls, seconds")
    return Backoff(initial=first, factor=2.0, maximum=max(first * 12, first))
