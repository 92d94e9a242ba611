"""The one Prefect task of a judging run: one judge over one chunk of items.

Inside, calls run concurrently under the judge's own limiters; Prefect's retry is only the
outer safety net for a task that dies as a whole (a worker lost, say).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from dataclasses import dataclass
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from juryflow.flows.runtime import progress
from juryflow.flows.runtime.prefect_env import quiet_stopped_run
from juryflow.judges.base import Judge
from juryflow.judges.breaker import StoppedJudge, breaker_for
from juryflow.judges.budget import BudgetReached, budget_of
from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec, Price
from juryflow.judges.providers.base import SDKClient
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


@task(
    name="judge-chunk",
    task_run_name="{spec.id}/chunk-{chunk_index}",
    cache_policy=NO_CACHE,
    retries=1,
    retry_delay_seconds=5,
)
async def judge_chunk(
    spec: JudgeSpec,
    prices: dict[str, Price],
    items: list[Item],
    chunk_index: int,
    journal: str | None = None,
    run_id: str | None = None,
) -> JudgedChunk:
    return await judge_items(spec, prices, items, journal, run_id)


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

    unwritable: list[JournalWriteError] = []
    # Only an LLM judge's items queue for calls; an offline judge computes in this loop.
    gate: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
    if isinstance(judge, LLMJudge):
        gate = admission_for(spec)
        if isinstance(judge.client, SDKClient):
            judge.client.warm(spec.timeout)

    async def judge_one(item: Item) -> Judgment:
        if unwritable:  # no more calls whose answers could not be kept
            raise unwritable[0]
        async with gate:
            if isinstance(judge, LLMJudge):
                judgment = await judge.judge(item, breaker, budget)
            else:
                judgment = await judge.judge(item)
        if log is not None:
            try:
                log.append(judgment)
            except JournalWriteError as error:
                unwritable.append(error)
                raise
        progress.judged((judgment,))
        return judgment

    try:
        results = await asyncio.gather(*(judge_one(item) for item in items), return_exceptions=True)
    finally:
        if log is not None:
            log.close()
    judgments: list[Judgment] = []
    unjudged: list[str] = []
    for item, result in zip(items, results, strict=True):
        if isinstance(result, Judgment):
            judgments.append(result)
        elif isinstance(result, BudgetReached):
            unjudged.append(item.item_id)
        elif isinstance(result, JournalWriteError):
            # The run stops: a judgment it cannot keep is no judgment. It says so in one
            # line; Prefect's report of this task failing would only repeat it.
            quiet_stopped_run()
            raise result
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
