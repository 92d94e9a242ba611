"""The one Prefect task of a judging run: one judge over one chunk of items.

Inside, calls run concurrently under the judge's own limiters; Prefect's retry is only the
outer safety net for a task that dies as a whole (a worker lost, say). A retry never pays
for an answer twice: it judges only the items the journal does not hold, and a chunk that
stopped because the journal cannot be written is not retried at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.runtime import task_run as current_task_run
from prefect.states import State

from juryflow.flows.runtime import progress
from juryflow.flows.runtime.prefect_env import quiet_stopped_run
from juryflow.judges.base import Judge
from juryflow.judges.breaker import StoppedJudge, breaker_for
from juryflow.judges.budget import BudgetReached, budget_of
from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import SDKClient
from juryflow.judges.providers.price import Price
from juryflow.maths.records import Item, Judgment, unscored
from juryflow.storage.journal import Journal, JournalWriteError

# Judges hold HTTP clients and limiters bound to an event loop, so one is built per loop:
# tasks awaited in the flow's loop share it (and its per-provider limits); tasks on other
# workers or threads get their own.
_judges_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Judge]] = (
    weakref.WeakKeyDictionary()
)


def judge_for(spec: JudgeSpec, prices: dict[str, Price]) -> Judge:
    loop = asyncio.get_running_loop()
    judges = _judges_by_loop.setdefault(loop, {})
    key = spec.model_dump_json() + json.dumps({k: v.model_dump() for k, v in prices.items()})
    if key not in judges:
        judges[key] = build_judge(spec, prices)
    return judges[key]


async def close_judges() -> None:
    """Close the HTTP clients of this loop's judges (the loop is about to end)."""
    judges = _judges_by_loop.pop(asyncio.get_running_loop(), {})
    for judge in judges.values():
        aclose = getattr(judge, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass(frozen=True, slots=True)
class JudgedChunk:
    """A task's result, wrapped.

    Prefect links a state to every top-level element of a task's return value and keeps
    those links for the whole flow run; returned bare, each judgment would leave one behind
    (memory growing with the dataset). Wrapped, a chunk leaves two.
    """

    judgments: tuple[Judgment, ...]
    stopped: StoppedJudge | None = None
    """Set when the judge was stopped (bad key, unknown model): its remaining items were
    not called, and the flow must tell the user what to fix."""
    unjudged: tuple[str, ...] = ()
    """Items left without a judgment because the run's budget was spent (``--max-cost``):
    neither stored nor journaled, so that ``--resume`` judges them."""


def _retry_unless_unkept(_task: object, _run: TaskRun, state: State[object]) -> bool:
    """Prefect's retry condition: any failure but a journal that cannot be written.

    That chunk's calls went out and were paid for; run again it would pay for them a
    second time with still nowhere to keep the answers (issue 44: on a full disk every
    prompt of the chunk reached the provider twice, 5 s apart).
    """
    return not isinstance(state.data, JournalWriteError)


@task(
    name="judge-chunk",
    task_run_name="{spec.id}/chunk-{chunk_index}",
    cache_policy=NO_CACHE,
    retries=1,
    retry_delay_seconds=5,
    retry_condition_fn=_retry_unless_unkept,
)
async def judge_chunk(
    spec: JudgeSpec,
    prices: dict[str, Price],
    items: list[Item],
    chunk_index: int,
    journal: str | None = None,
    run_id: str | None = None,
) -> JudgedChunk:
    if journal is None or current_task_run.run_count <= 1:
        return await judge_items(spec, prices, items, journal, run_id)
    # Prefect runs the chunk again (its first run died as a whole): what that run journaled
    # is kept and paid for, so only the rest is judged now.
    wanted = {item.item_id for item in items}
    kept = Journal(Path(journal)).replay(keep=lambda i, j: j == spec.id and i in wanted)
    kept_ids = {judgment.item_id for judgment in kept}
    left = [item for item in items if item.item_id not in kept_ids]
    chunk = await judge_items(spec, prices, left, journal, run_id)
    return replace(chunk, judgments=(*kept, *chunk.judgments))


ADMITTED_PER_PERMIT = 2
"""Items of a judge started at once in a process, per permit of its concurrency: enough for
a prepared item to wait behind every call in flight, without rendering every queued item's
prompt at a chunk's start."""

_gates_by_loop: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]
] = weakref.WeakKeyDictionary()


def admission_for(spec: JudgeSpec) -> asyncio.Semaphore:
    """The gate an LLM judge's items pass, in arrival order, before their prompt is rendered
    and their call waits for a permit; shared by every chunk of the judge in this loop.

    One coroutine per item (every item of every chunk in flight) would each render its
    prompt at once and then wait for a permit: a chunk's start held the event loop for all
    its renderings (before the first call went out, and again at each chunk during the
    run). Behind this gate an item is rendered when it is nearly its turn, and a semaphore's
    waiters leave in order, so the chunks still finish one after the other (none drains
    the pipeline by ending at the same time as the rest).
    """
    gates = _gates_by_loop.setdefault(asyncio.get_running_loop(), {})
    key = (spec.id, spec.max_concurrency)
    gate = gates.get(key)
    if gate is None:
        gate = gates[key] = asyncio.Semaphore(ADMITTED_PER_PERMIT * spec.max_concurrency)
    return gate


@dataclass(slots=True)
class _JournalCalls:
    """The calls of every chunk in this loop that journals to one file: the first that
    cannot write it stops them all, as no answer they get could be kept."""

    tasks: set[asyncio.Task[Judgment]] = field(default_factory=set)
    failure: JournalWriteError | None = None

    def fail(self, error: JournalWriteError) -> None:
        if self.failure is None:
            self.failure = error
        current = asyncio.current_task()
        # Calls queued for a permit are never sent; those in flight are paid already, but
        # their answers would only meet the same full disk.
        for other in self.tasks:
            if other is not current:
                other.cancel()


_journal_calls: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _JournalCalls]] = (
    weakref.WeakKeyDictionary()
)


def _calls_of(journal: str | None) -> _JournalCalls:
    """The shared record of ``journal``'s calls in this loop (a chunk of its own without)."""
    if journal is None:
        return _JournalCalls()
    by_journal = _journal_calls.setdefault(asyncio.get_running_loop(), {})
    return by_journal.setdefault(journal, _JournalCalls())


def _done_with(
    journal: str | None, calls: _JournalCalls, tasks: list[asyncio.Task[Judgment]]
) -> None:
    calls.tasks.difference_update(tasks)
    if journal is not None and not calls.tasks:
        # No chunk of the run is live here: a later one (a resume in this process) starts
        # afresh rather than inheriting a disk that may have been freed since.
        _journal_calls.get(asyncio.get_running_loop(), {}).pop(journal, None)


async def judge_items(
    spec: JudgeSpec,
    prices: dict[str, Price],
    items: list[Item],
    journal: str | None = None,
    run_id: str | None = None,
) -> JudgedChunk:
    """One judge over some items, concurrently under its limiters; every judgment is
    journaled and reported as it completes."""
    judge = judge_for(spec, prices)
    log = Journal(Path(journal)) if journal else None
    # Shared by every chunk of the run in this process, so a judge whose key is rejected
    # is stopped after a handful of calls in all, not a handful per chunk.
    breaker = breaker_for(run_id, spec) if run_id is not None else None
    # Registered by the flow in this process; a chunk on a Dask worker finds none (the
    # command line refuses --max-cost with --dask).
    budget = budget_of(run_id)

    calls = _calls_of(journal)
    # Only an LLM judge's items queue for calls; an offline judge computes in this loop.
    gate: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
    if isinstance(judge, LLMJudge):
        gate = admission_for(spec)
        if isinstance(judge.client, SDKClient):
            judge.client.warm(spec.timeout)

    async def judge_one(item: Item) -> Judgment:
        if calls.failure is not None:  # no more calls whose answers could not be kept
            raise calls.failure
        async with gate:
            if isinstance(judge, LLMJudge):
                judgment = await judge.judge(item, breaker, budget)
            else:
                judgment = await judge.judge(item)
        if log is not None:
            try:
                log.append(judgment)
            except JournalWriteError as error:
                calls.fail(error)
                raise
        progress.judged((judgment,))
        return judgment

    tasks = [asyncio.ensure_future(judge_one(item)) for item in items]
    calls.tasks.update(tasks)
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        _done_with(journal, calls, tasks)
        if log is not None:
            log.close()
    if calls.failure is not None:
        # The run stops: a judgment it cannot keep is no judgment, and this chunk's calls
        # were cancelled for it. It says so in one line; Prefect's report of this task
        # failing would only repeat it.
        quiet_stopped_run()
        raise calls.failure
    judgments: list[Judgment] = []
    unjudged: list[str] = []
    for item, result in zip(items, results, strict=True):
        if isinstance(result, Judgment):
            judgments.append(result)
        elif isinstance(result, BudgetReached):
            unjudged.append(item.item_id)
        elif isinstance(result, Exception):
            # A judge should return unscored rather than raise; if one raises anyway, only
            # that item is lost for that judge, and the row says why.
            judgments.append(
                unscored(
                    item.item_id,
                    spec.id,
                    judge.output_kind,
                    f"judge raised {type(result).__name__}: {result}",
                    provider=spec.provider,
                    model=spec.model,
                )
            )
        else:
            raise result
    # The rows made here for a judge that raised were not reported as they completed.
    reported = {id(r) for r in results if isinstance(r, Judgment)}
    progress.judged(j for j in judgments if id(j) not in reported)
    return JudgedChunk(
        tuple(judgments), breaker.stopped if breaker is not None else None, tuple(unjudged)
    )
