"""A ``--workers`` process tells the run of its 429 answers as they come, with its progress,
not only in a chunk's reply: a worker killed mid-chunk used to take them with it."""

from __future__ import annotations

import asyncio
import queue
import threading

from juryflow.flows.runtime import progress
from juryflow.flows.workers import (
    _LEFTOVER,
    Channels,
    Reply,
    _ProgressCounter,
    _RateLimitCounter,
    _watch,
)
from juryflow.judges.breaker import breaker_for, forget_run
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import error_from_status

RUN = "worker-429-report"


def test_a_429_reaches_the_run_before_the_progress_of_the_call_retried_after_it() -> None:
    spec = JudgeSpec(id="claude", provider="anthropic", model="m", prompt="data2txt_spans")
    counted_429 = _RateLimitCounter([spec], RUN)
    try:
        # A chunk in flight: its call was answered 429 and retried, then judged; no chunk
        # has replied, so only the worker's reports can carry the 429.
        breaker_for(RUN, spec).failed(error_from_status(429, "slow down", {"retry-after": "1"}))
        counted = _ProgressCounter()
        counted.take(progress.Judged(1))
        results: queue.Queue[object] = queue.Queue()
        stop = threading.Event()
        channels = Channels(work=queue.Queue(), results=results, stop=stop, setups=())

        async def one_report() -> None:
            watch = asyncio.create_task(_watch(channels, counted, counted_429, set()))
            while results.qsize() < 2:
                await asyncio.sleep(0.01)
            stop.set()
            await watch

        asyncio.run(one_report())
        first, second = results.get_nowait(), results.get_nowait()
        assert first == Reply(_LEFTOVER, rate_limited={"claude": 1})
        assert second == progress.Judged(1)
        # Reported once: the chunk's own reply, later, carries none of it again.
        assert counted_429.take() == {"claude": 0}
    finally:
        forget_run(RUN)
