"""``--workers N``: judging on N processes when one event loop cannot keep up.

A call costs ~1 ms of CPU (the SDK builds a judge's first request, the rest replay it), so
one event loop saturates one core at several hundred calls/s. With N workers the flow starts
N long-lived ``judge-worker`` tasks on Prefect's process-pool task runner, one per process.
Each has its own event loop, SDK clients and a 1/N share of every judge's limits; it takes
chunks from a queue as it has room for them, judges them, journals and reports every
judgment as it completes, and sends each chunk's judgments back. The flow process stays the
store's single writer. Prefect sees N task runs for the whole run: nothing per call or per chunk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import math
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.task_runners import ProcessPoolTaskRunner

from juryflow.flows.runtime import progress
from juryflow.flows.runtime.prefect_env import quiet_stopped_run
from juryflow.flows.tasks import JudgedChunk, close_judges, judge_items
from juryflow.judges.breaker import breaker_for
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.price import Price
from juryflow.judges.sampling import known
from juryflow.maths.records import Item, Judgment
from juryflow.storage.journal import JournalWriteError

PROGRESS_SECONDS = 0.25
"""How often a worker reports the judgments it completed."""

POLL_SECONDS = 0.2
"""How often a worker looks for a stop request, or for its parent having gone."""


def share(spec: JudgeSpec, worker: int, workers: int) -> JudgeSpec:
    """Worker ``worker``'s part of a judge's limits: the N parts add up to the judge's own."""
    base, extra = divmod(spec.max_concurrency, workers)
    update: dict[str, Any] = {"max_concurrency": max(1, base + (1 if worker < extra else 0))}
    if spec.requests_per_minute is not None:
        update["requests_per_minute"] = spec.requests_per_minute / workers
    if spec.tokens_per_minute is not None:
        update["tokens_per_minute"] = spec.tokens_per_minute / workers
    return spec.model_copy(update=update)


@dataclass(frozen=True, slots=True)
class Channels:
    """The queues between the flow and its workers (made by the spawn context, and handed to
    each process as it starts: multiprocessing queues cannot travel as task parameters)."""

    work: Any
    results: Any
    stop: Any
    setups: tuple[Any, ...]
    """One queue per worker for its :class:`Setup` (from the shared queue, a worker could
    take another's)."""


@dataclass(frozen=True, slots=True)
class Setup:
    """What every worker needs to judge a run: the first message each one takes (the
    processes start while the flow is still planning the run)."""

    specs: list[JudgeSpec]
    """The judges, with their full limits: each worker takes its share."""
    prices: dict[str, Price]
    journal: str | None
    run_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    request_id: int
    work: dict[str, list[Item]]
    """Items to judge, by judge id."""
    samples: dict[str, dict[int, Judgment]] = field(default_factory=dict)
    """Cached samples of partly cached items, by their single-call cache key, for the
    worker's sampled judges to leave uncalled (:mod:`juryflow.judges.sampling.known`)."""


@dataclass(frozen=True, slots=True)
class Reply:
    request_id: int
    chunks: dict[str, JudgedChunk] = field(default_factory=dict)
    error: str | None = None
    rate_limited: dict[str, int] = field(default_factory=dict)
    """429 answers per judge in the worker since its previous report (the run keeps them);
    sent by :func:`_send_progress`, before the chunk's own reply."""


_LEFTOVER = -1
"""The request id of a report of 429s that no chunk's reply carries (no chunk waits on it)."""


_channels: list[Channels] = []
"""This worker process's channels (a list: a task's function travels by value, with a copy
of the module globals it names; a list named by it is a copy too, so it is read through
``_worker_channels``, which travels by reference)."""


def _worker_channels() -> Channels | None:
    return _channels[0] if _channels else None


def _start_worker_process(channels: Channels, parent: int) -> None:
    """Runs once in each worker process, before any task."""
    from juryflow.flows.runtime.allocator import limit_malloc_arenas
    from juryflow.flows.runtime.prefect_server import die_with_parent

    limit_malloc_arenas()

    _channels.append(channels)
    # Killed with SIGKILL, the flow process cannot stop its workers: they leave by
    # themselves, or their calls would go on being paid for with nobody reading the answers.
    # (No kernel signal: the pool starts its processes from a thread that may end first.)
    die_with_parent(parent, kernel_signal=False)
    # Ctrl-C reaches the whole process group; the flow process decides what stops, and
    # tells its workers through ``channels.stop``.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@task(name="judge-worker", task_run_name="worker-{index}", cache_policy=NO_CACHE)
async def judge_worker(index: int, workers: int, chunks_at_once: int) -> int:
    """Judge chunks from the queue until told there are no more; returns the judgments made."""
    channels = _worker_channels()
    if channels is None:
        raise RuntimeError("judge-worker runs only on the process pool its flow started")
    setup = await _next_message(channels, channels.setups[index])
    if not isinstance(setup, Setup):
        return 0  # the run ended before it was planned
    specs = [share(spec, index, workers) for spec in setup.specs]
    prices, journal, run_id = setup.prices, setup.journal, setup.run_id
    by_id = {spec.id: spec for spec in specs}
    counted_429 = _RateLimitCounter(specs, run_id)
    made = 0
    counted = _ProgressCounter()
    progress.add_listener(counted.take)
    slots = asyncio.Semaphore(chunks_at_once)
    pending: set[asyncio.Task[None]] = set()

    async def judge(request: Request) -> None:
        nonlocal made
        try:
            for key, samples in request.samples.items():
                known.offer(key, samples)
            names = list(request.work)
            results = await asyncio.gather(
                *(judge_items(by_id[n], prices, request.work[n], journal, run_id) for n in names)
            )
            made += sum(len(chunk.judgments) for chunk in results)
            chunks = dict(zip(names, results, strict=True))
            reply = Reply(request.request_id, chunks)
        # Whatever a chunk raises, the flow must hear of it rather than wait for good.
        except Exception as error:
            failure = f"{type(error).__name__}: {error}"
            reply = Reply(request.request_id, error=failure)
        finally:
            slots.release()
        _send_progress(channels, counted, counted_429)
        channels.results.put(reply)

    watch = asyncio.create_task(_watch(channels, counted, counted_429, pending))
    try:
        while True:
            await slots.acquire()
            request = await _next_request(channels)
            if request is None:
                slots.release()
                break
            job = asyncio.create_task(judge(request))
            pending.add(job)
            job.add_done_callback(pending.discard)
        # A stop request cancels the chunks: they end here, and the worker with them.
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        watch.cancel()
        for job in pending:
            job.cancel()
        await asyncio.gather(*pending, watch, return_exceptions=True)
        progress.remove_listener(counted.take)
        _send_progress(channels, counted, counted_429)
        await close_judges()
    return made


class _RateLimitCounter:
    """A worker's 429 answers per judge not yet sent to the flow (its breakers count them
    all; each reply takes what came since the one before)."""

    def __init__(self, specs: list[JudgeSpec], run_id: str | None) -> None:
        llm = [spec for spec in specs if spec.provider != "offline"]
        self._breakers = [breaker_for(run_id, spec) for spec in llm] if run_id else []
        self._sent: dict[str, int] = {}

    def take(self) -> dict[str, int]:
        taken: dict[str, int] = {}
        for breaker in self._breakers:
            judge, total = breaker.spec.id, breaker.rate_limited
            taken[judge] = total - self._sent.get(judge, 0)
            self._sent[judge] = total
        return taken


async def _next_request(channels: Channels) -> Request | None:
    """The next chunk, or None when there are no more (or the run is stopping)."""
    message = await _next_message(channels, channels.work)
    return message if isinstance(message, Request) else None


async def _next_message(channels: Channels, source: Any) -> Setup | Request | None:
    """The next message from the flow on ``source``, or None when the run is stopping."""
    while not channels.stop.is_set():
        try:
            # A short wait on a thread: a thread blocked for good would hold up the task's end.
            message: Setup | Request | None = await asyncio.to_thread(
                source.get, True, POLL_SECONDS
            )
        except queue.Empty:
            continue
        return message
    return None


async def _watch(
    channels: Channels,
    counted: _ProgressCounter,
    counted_429: _RateLimitCounter,
    jobs: set[asyncio.Task[None]],
) -> None:
    """Report progress and 429 answers; stop the chunks at the flow's request."""
    while True:
        await asyncio.sleep(min(PROGRESS_SECONDS, POLL_SECONDS))
        if channels.stop.is_set():
            for job in jobs:
                job.cancel()
            return
        _send_progress(channels, counted, counted_429)


def _send_progress(
    channels: Channels, counted: _ProgressCounter, counted_429: _RateLimitCounter
) -> None:
    """Send what the worker did since its last report: its 429 answers as they come, not
    only with a chunk's reply, so a worker killed mid-chunk has already told the run of
    all but the last moment's (the 429s first: the flow has them when it sees the progress
    of the calls retried after them)."""
    throttled = counted_429.take()
    if any(throttled.values()):
        channels.results.put(Reply(_LEFTOVER, rate_limited=throttled))
    event = counted.flush()
    if event is not None:
        channels.results.put(event)


class _ProgressCounter:
    """Sums a worker's progress events between two reports to the flow."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sum = progress.Judged(0)

    def take(self, event: progress.Event) -> None:
        if isinstance(event, progress.Judged):
            with self._lock:
                s = self._sum
                self._sum = progress.Judged(
                    s.count + event.count,
                    s.cost_usd + event.cost_usd,
                    s.unscored + event.unscored,
                    s.cached + event.cached,
                )

    def flush(self) -> progress.Judged | None:
        with self._lock:
            event, self._sum = self._sum, progress.Judged(0)
        return event if event.count else None


class WorkerPool:
    """The flow's side: N worker processes, and a reader thread for what they send back."""

    def __init__(self, workers: int, chunks_in_flight: int) -> None:
        self.workers = workers
        context = multiprocessing.get_context("spawn")
        self.channels = Channels(
            context.Queue(),
            context.Queue(),
            context.Event(),
            tuple(context.Queue() for _ in range(workers)),
        )
        self._runner = ProcessPoolTaskRunner(
            max_workers=workers,
            initializer=_start_worker_process,
            initargs=(self.channels, os.getpid()),
        )
        self._chunks_at_once = math.ceil(chunks_in_flight / workers) + 1
        self._resume_hint = "juryflow run --resume RUN"
        self._ids = itertools.count()
        self._waiting: dict[int, asyncio.Future[dict[str, JudgedChunk]]] = {}
        self._futures: list[PrefectFuture[int]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: threading.Thread | None = None
        self._closing = False
        self._failure: str | None = None
        self._rate_limited: dict[str, int] = {}

    def start(self) -> None:
        """Start the processes (they import what judging needs meanwhile)."""
        self._loop = asyncio.get_running_loop()
        self._runner.__enter__()
        self._reader = threading.Thread(target=self._read, name="juryflow-workers", daemon=True)
        self._reader.start()
        with _this_api_for_workers():
            for index in range(self.workers):
                parameters = {
                    "index": index,
                    "workers": self.workers,
                    "chunks_at_once": self._chunks_at_once,
                }
                # An async task's future resolves to its result, not to a coroutine.
                future = cast("PrefectFuture[int]", self._runner.submit(judge_worker, parameters))
                future.add_done_callback(self._worker_ended)
                self._futures.append(future)

    def configure(
        self,
        specs: list[JudgeSpec],
        prices: Mapping[str, Price],
        journal: str | None,
        run_id: str | None,
        resume_hint: str,
    ) -> None:
        """The run the workers judge (once planned)."""
        self._resume_hint = resume_hint
        setup = Setup(list(specs), dict(prices), journal, run_id)
        for own in self.channels.setups:
            own.put(setup)

    async def judge(
        self,
        work: dict[str, list[Item]],
        samples: dict[str, dict[int, Judgment]] | None = None,
    ) -> dict[str, JudgedChunk]:
        """Judge these items (by judge id) on whichever worker has room first; ``samples``:
        the cached samples of partly cached items (see :class:`Request`)."""
        if self._failure is not None:
            raise RuntimeError(self._failure)
        assert self._loop is not None, "start() the pool first"
        request_id = next(self._ids)
        waiting: asyncio.Future[dict[str, JudgedChunk]] = self._loop.create_future()
        self._waiting[request_id] = waiting
        self.channels.work.put(Request(request_id, work, samples or {}))
        try:
            return await waiting
        finally:
            self._waiting.pop(request_id, None)

    async def close(self, cancel: bool) -> None:
        """End the workers: after their chunks (``cancel`` False), or at once."""
        if self._closing:
            return
        self._closing = True
        if cancel:
            self.channels.stop.set()
        else:
            for _ in range(self.workers):
                self.channels.work.put(None)
        await asyncio.to_thread(self._shut_down)

    def _shut_down(self) -> None:
        for future in self._futures:
            # A worker killed under the run breaks the pool; every future then holds that
            # error, which the run has reported already.
            with contextlib.suppress(concurrent.futures.BrokenExecutor):
                future.wait()
        self._runner.__exit__(None, None, None)
        self.channels.results.put(None)
        if self._reader is not None:
            self._reader.join()

    def _read(self) -> None:
        while True:
            message = self.channels.results.get()
            if message is None:
                return
            assert self._loop is not None
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody listens
                self._loop.call_soon_threadsafe(self._deliver, message)

    def take_rate_limited(self) -> dict[str, int]:
        """The 429 answers per judge the workers reported since this was last asked."""
        taken, self._rate_limited = self._rate_limited, {}
        return taken

    def _deliver(self, message: Reply | progress.Judged) -> None:
        if isinstance(message, progress.Judged):
            progress.emit(message)
            return
        for judge, answers in message.rate_limited.items():
            self._rate_limited[judge] = self._rate_limited.get(judge, 0) + answers
        waiting = self._waiting.get(message.request_id)
        if waiting is None or waiting.done():
            return
        if message.error is not None:
            # A journal a worker cannot write (a full disk) stops the run as it does in the
            # flow's own process: by its type, which says what to fix.
            failed = (
                JournalWriteError
                if message.error.startswith(f"{JournalWriteError.__name__}:")
                else RuntimeError
            )
            waiting.set_exception(failed(f"a judge worker failed: {message.error}"))
        else:
            waiting.set_result(message.chunks)

    def _worker_ended(self, future: PrefectFuture[int]) -> None:
        if self._closing or self._loop is None:
            return
        reason = _end_reason(future)
        failure = (
            f"a judge worker process ended before the run did ({reason}); what the run "
            f"judged is kept, continue it with: {self._resume_hint}"
        )
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._fail_waiting, failure)

    def _fail_waiting(self, failure: str) -> None:
        if self._failure is None:
            # The command line says what happened in one line; Prefect's reports of the
            # crashed worker and the failed flow would add tracebacks to it.
            quiet_stopped_run()
        self._failure = failure
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(RuntimeError(failure))


def _this_api_for_workers() -> contextlib.AbstractContextManager[Any]:
    """Point the workers at this process's Prefect API.

    The settings travel to the workers with the task's context. With no API URL set, each
    worker would start an ephemeral server of its own (seconds and ~250 MB each); the URL of
    this process's ephemeral server goes with them instead.
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    if get_current_settings().api.url:
        return contextlib.nullcontext()
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer._instances.get(None)
    if server is None or not server.running:
        return contextlib.nullcontext()
    return temporary_settings(updates={PREFECT_API_URL: server.api_url})


def _end_reason(future: PrefectFuture[int]) -> str:
    """Why a worker's task ended, from its final state (the process pool's own future holds
    it before Prefect's future does)."""
    wrapped = getattr(future, "wrapped_future", None)
    state: Any = None
    if wrapped is not None and wrapped.done() and wrapped.exception() is None:
        state = wrapped.result()
    elif wrapped is not None and wrapped.done():
        return f"{type(wrapped.exception()).__name__}: {wrapped.exception()}"
    state = state if state is not None else future.state
    return str(getattr(state, "message", None) or getattr(state, "name", "ended"))
