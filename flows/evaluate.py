"""The `evaluate` flow: every item through every judge, consensus per item, all into DuckDB."""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
import signal
import threading
import time
from collections.abc import Awaitable, Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar, cast

from prefect import flow, get_run_logger
from prefect.futures import PrefectFuture
from prefect.runtime import flow_run
from prefect.states import Cancelled
from prefect.utilities.annotations import quote

from juryflow.analysis.run_figures import run_figures
from juryflow.analysis.run_health import health
from juryflow.flows.runtime import progress
from juryflow.flows.runtime.allocator import release_free_heap
from juryflow.flows.runtime.interrupts import (
    EXIT_CODES,
    InterruptedRun,
    Interruption,
    InterruptWatch,
    record,
    resume_hint,
)
from juryflow.flows.runtime.prefect_env import quiet_stopped_run
from juryflow.flows.tasks import JudgedChunk, close_judges, judge_chunk
from juryflow.flows.workers import WorkerPool, default_workers
from juryflow.judges.breaker import StoppedJudge, forget_run
from juryflow.judges.budget import BUDGET_EXIT_CODE, Budget, set_budget
from juryflow.judges.llm_judge import CacheKeys
from juryflow.judges.panel import JudgeSpec
from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import Consensus, Item, Judgment
from juryflow.planning.run_setup import RunPlan, plan_run
from juryflow.storage.connection import Patience, StoreError, patient_waits
from juryflow.storage.datasets import (
    DEFAULT_MAX_CHARS,
    RowError,
    count_rows,
    read_items,
    select_items,
)
from juryflow.storage.journal import Journal, journal_path
from juryflow.storage.shards import ShardLost, finish_shard, release_shard

T = TypeVar("T")

FLUSH_WAIT_SECONDS = 10.0
"""How long an interrupted run waits for a store another process holds before leaving its
last judgments to the journal (and ``--resume``): the user asked it to stop."""


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetStop:
    """The run's ``--max-cost`` was spent before every item was judged."""

    spent_usd: float
    max_usd: float
    items_left: int
    """Selected items without their consensus: some judges' answers (or all) missing."""
    items: int


def _chunks(rows: Iterable[Item | RowError], size: int) -> Iterator[list[Item | RowError]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


def _opaque(items: list[Item]) -> list[Item]:
    """Items as a task parameter Prefect passes on without walking through: it visits
    every element of a parameter (looking for futures), ~0.7 ms per call in all. (Not for
    Dask: the wrapper would reach its workers unopened.)"""
    return cast("list[Item]", quote(items))


async def _finish_even_if_cancelled(work: Awaitable[T]) -> T:
    """Await a write running in a thread to its end, even when cancelled meanwhile.

    A thread cannot be stopped; were its task to give up waiting, the run could be marked
    finished while the write still lands. The cancellation is passed on afterwards.
    """
    future = asyncio.ensure_future(work)
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled():
                raise
            cancelled = True
    result = future.result()
    if cancelled:
        raise asyncio.CancelledError
    return result


class ChunkRunner:
    """Judges chunks of one run; only this object, in the flow process, writes to the store."""

    def __init__(
        self,
        plan: RunPlan,
        distributed: bool,
        budget: Budget | None = None,
        pool: WorkerPool | None = None,
    ) -> None:
        self.plan = plan
        self.distributed = distributed
        self.pool = pool
        """Worker processes that judge the chunks (``--workers N``); None: this process."""
        self.budget = budget
        """This invocation's spending limit (``--max-cost``), None for none."""
        self.journal = Journal(journal_path(plan.store.path, plan.journal_key))
        # DuckDB takes one writer at a time; writes run on a thread so that model calls
        # keep flowing on the event loop meanwhile.
        self.write_lock = asyncio.Lock()
        self.done_pairs: set[tuple[str, str]] = set()
        self.done_consensus: set[str] = set()
        self.in_flight: dict[int, list[Item]] = {}
        self.closed = False
        self.stored: dict[str, list[Judgment]] = {}
        self.replayed: dict[str, list[Judgment]] = {}
        self.stopped: dict[str, StoppedJudge] = {}
        # A rule that weighs judges by a reliability fitted over the whole run cannot be
        # applied chunk by chunk: chunks get the default rule, and the run's end refits.
        self.chunk_rule = plan.rule.provisional()
        if plan.resumed:
            self._load_previous_work()

    def _load_previous_work(self) -> None:
        """What a killed run had stored, and what it had judged but not yet stored.

        Journal entries are written with their chunk (items, judgments and consensus in one
        transaction), so a completed call is never paid for twice.
        """
        store, run_id = self.plan.store, self.plan.run_id
        # Only items still without consensus need their stored judgments (to combine them
        # with the judges still to answer); the rest are done.
        for judgment in store.load_judgments(run_id, without_consensus=True):
            self.stored.setdefault(judgment.item_id, []).append(judgment)
        stored_pairs = store.judged_pairs(run_id)
        for judgment in self.journal.replay(keep=lambda i, j: (i, j) not in stored_pairs):
            self.replayed.setdefault(judgment.item_id, []).append(judgment)
        self.done_pairs = stored_pairs | {
            (j.item_id, j.judge_id) for js in self.replayed.values() for j in js
        }
        self.done_consensus = store.consensus_item_ids(run_id)

    async def _cached(self, spec: JudgeSpec, items: list[Item]) -> list[Judgment]:
        # Keys without a judge: with --workers this process makes no call (nor imports SDKs).
        keyer = CacheKeys.of(spec)
        if not self.plan.use_cache or keyer is None or not items:
            return []
        keys = {item.item_id: keyer.cache_key(item) for item in items}
        found = await asyncio.to_thread(self.plan.store.cached_judgments, list(keys.values()))
        return [
            dataclasses.replace(
                found[key],
                item_id=item_id,
                judge_id=spec.id,
                cached=True,
                verdict_threshold=keyer.verdict_threshold,
            )
            for item_id, key in keys.items()
            if key in found
        ]

    async def _todo(self, spec: JudgeSpec, items: list[Item]) -> tuple[list[Judgment], list[Item]]:
        """This judge's answers found in the cache, and the items it must still be asked."""
        todo = [i for i in items if (i.item_id, spec.id) not in self.done_pairs]
        if len(todo) < len(items):  # judged before a --resume: done, and not paid again now
            progress.emit(progress.Judged(len(items) - len(todo), earlier=True))
        cached = await self._cached(spec, todo)
        hit = {j.item_id for j in cached}
        return cached, [i for i in todo if i.item_id not in hit]

    def _note_stopped(self, spec: JudgeSpec, chunk: JudgedChunk) -> None:
        if chunk.stopped is not None and spec.id not in self.stopped:
            self.stopped[spec.id] = chunk.stopped
            # info: the command line prints it once, at the end; the Prefect UI shows it now
            get_run_logger().info(chunk.stopped.line())

    async def _judge(self, spec: JudgeSpec, items: list[Item], index: int) -> list[Judgment]:
        cached, todo = await self._todo(spec, items)
        fresh: list[Judgment] = []
        if todo:
            prices = self.plan.panel.prices
            journal = str(self.journal.path)
            run_id = self.plan.run_id
            if self.distributed:
                # An async task's future resolves to its result, not to a coroutine.
                future = cast(
                    "PrefectFuture[JudgedChunk]",
                    judge_chunk.submit(spec, prices, todo, index, journal, run_id),
                )
                try:
                    chunk = await asyncio.to_thread(future.result)
                except asyncio.CancelledError:
                    # The run is stopping: the chunk must not go on calling on its worker.
                    cancel = getattr(getattr(future, "wrapped_future", None), "cancel", None)
                    if cancel is not None:
                        cancel()
                    raise
            else:
                chunk = await judge_chunk(spec, prices, _opaque(todo), index, journal, run_id)
            fresh = list(chunk.judgments)
            self._note_stopped(spec, chunk)
        # A local chunk task reported its judgments one by one as they completed.
        progress.judged(cached + fresh if self.distributed else cached)
        return cached + fresh

    async def _judge_on_workers(self, pool: WorkerPool, items: list[Item]) -> list[list[Judgment]]:
        """Every judge's answers for a chunk, from one request to the worker processes
        (which report each judgment as it completes)."""
        specs = self.plan.panel.judges
        prepared = await asyncio.gather(*(self._todo(spec, items) for spec in specs))
        work = {spec.id: todo for spec, (_, todo) in zip(specs, prepared, strict=True) if todo}
        chunks = await pool.judge(work) if work else {}
        answers: list[list[Judgment]] = []
        for spec, (cached, _) in zip(specs, prepared, strict=True):
            progress.judged(cached)
            chunk = chunks.get(spec.id)
            if chunk is None:
                answers.append(cached)
                continue
            self._note_stopped(spec, chunk)
            answers.append(cached + list(chunk.judgments))
        return answers

    async def run_chunk(self, items: list[Item], index: int) -> int:
        self.in_flight[index] = items
        if self.pool is not None:
            results = await self._judge_on_workers(self.pool, items)
        else:
            results = await asyncio.gather(
                *(self._judge(spec, items, index) for spec in self.plan.panel.judges)
            )
        new = [j for item in items for j in self.replayed.pop(item.item_id, [])]
        new += [judgment for judgments in results for judgment in judgments]
        by_item: dict[str, list[Judgment]] = {
            i.item_id: list(self.stored.pop(i.item_id, [])) for i in items
        }
        for judgment in new:
            by_item[judgment.item_id].append(judgment)
        text_variable = self.plan.text_variable
        n_judges = len(self.plan.panel.judges)
        consensus = [
            item_consensus(
                item.item_id,
                by_item[item.item_id],
                n_judges=n_judges,
                text=item.text(text_variable),
                quorum=self.plan.quorum,
                rule=self.chunk_rule,
            )
            for item in items
            if item.item_id not in self.done_consensus
            # An item a judge left for lack of budget gets its consensus when --resume has
            # all its judgments (as for an interrupted chunk).
            and len({j.judge_id for j in by_item[item.item_id]}) == n_judges
        ]
        async with self.write_lock:
            if self.closed:
                return 0  # the run has ended: its status row is final, nothing lands after it
            await _finish_even_if_cancelled(
                asyncio.to_thread(self._write_chunk, items, new, consensus)
            )
            del self.in_flight[index]
        progress.report("items_done", len(items))
        return len(items)

    def _write_chunk(
        self, items: list[Item], judgments: list[Judgment], consensus: list[Consensus]
    ) -> None:
        self.check_lease()
        self.plan.store.write_chunk(self.plan.run_id, items, judgments, consensus)
        # The write's Arrow tables and DuckDB's checkpoint are the run's largest short-lived
        # allocations; handing their pages back keeps the next chunk's peak where this one's was.
        release_free_heap()

    def check_lease(self) -> None:
        """Before a shard's write: its claim is still this process's (ShardLost if not)."""
        if self.plan.lease is not None:
            self.plan.lease.renew_if_due()

    @property
    def shard_lost(self) -> bool:
        return self.plan.lease is not None and self.plan.lease.lost_to is not None

    async def keep_lease(self) -> None:
        """Renew a shard's claim while its chunks are judged, however long a chunk takes,
        so that no other machine takes over a live shard. A lost shard is only recorded
        here: the next write or chunk raises it."""
        lease = self.plan.lease
        if lease is None:
            return
        while not self.closed:
            await asyncio.sleep(lease.seconds / 6)
            async with self.write_lock:
                if self.closed or not lease.due:
                    continue
                try:
                    await asyncio.to_thread(lease.renew)
                except ShardLost:
                    return

    async def close(self, cancel: bool = True) -> None:
        """No chunk writes after this returns (a write in progress finishes first), and no
        worker process judges any more (``cancel``: its chunks in flight are dropped)."""
        if self.pool is not None:
            await self.pool.close(cancel=cancel)
        async with self.write_lock:
            self.closed = True
        forget_run(self.plan.run_id)

    def flush_completed(self) -> int:
        """Store what the chunks in flight had completed when the run stopped.

        Their judgments are in the journal (every call is journaled as it completes); they
        go to the store with their items but without consensus, which ``--resume`` makes
        once the item has all its judgments. Returns the judgments stored.
        """
        items = {item.item_id: item for chunk in self.in_flight.values() for item in chunk}
        if not items:
            return 0
        stored = self.plan.store.judged_pairs(self.plan.run_id)
        completed = self.journal.replay(keep=lambda i, j: i in items and (i, j) not in stored)
        if completed:
            judged = {j.item_id for j in completed}
            self.check_lease()
            self.plan.store.write_chunk(
                self.plan.run_id, [i for i in items.values() if i.item_id in judged], completed, []
            )
        return len(completed)


def _spent(budget: Budget | None) -> bool:
    return budget is not None and budget.reached


async def judge_dataset(runner: ChunkRunner, chunks_in_flight: int) -> BudgetStop | None:
    """Judge every selected item; a BudgetStop when ``--max-cost`` was spent first (the
    items not judged are left, the run is not finished), else None."""
    plan = runner.plan
    # A shard's share of the rows is known only as they are read.
    total = count_rows(plan.dataset) if plan.shard is None else None
    if total is not None and (plan.limit or plan.sample):
        total = min(total, plan.limit or plan.sample or total)
    if total is not None:
        progress.emit(progress.Total(total, len(plan.panel.judges)))
    rows = select_items(
        read_items(plan.dataset, plan.needed_variables, plan.mapping, plan.max_chars),
        plan.limit,
        plan.sample,
        plan.seed,
    )
    if plan.shard is not None:
        # After the selection, which every shard makes alike; each keeps its own items.
        rows = (row for row in rows if not isinstance(row, Item) or plan.holds(row.item_id))
    # Bounding the chunks in flight bounds memory: the dataset is read only as fast as
    # chunks finish, whatever its size.
    slots = asyncio.Semaphore(chunks_in_flight)
    errors: list[RowError] = []
    pending: set[asyncio.Task[int]] = set()
    seen = 0

    async def guarded(items: list[Item], index: int) -> int:
        try:
            return await runner.run_chunk(items, index)
        finally:
            slots.release()

    chunks = _chunks(rows, plan.chunk_size)
    keeper = asyncio.create_task(runner.keep_lease())
    try:
        for index, batch in enumerate(chunks):
            items = [row for row in batch if isinstance(row, Item)]
            errors.extend(row for row in batch if isinstance(row, RowError))
            seen += len(items)
            await slots.acquire()
            if runner.shard_lost:
                slots.release()
                runner.check_lease()  # raises: no chunk starts for a shard this run lost
            if _spent(runner.budget):
                # No chunk starts once the money is spent: the rest is for --resume.
                slots.release()
                break
            pending.add(asyncio.create_task(guarded(items, index)))
            finished = {t for t in pending if t.done()}
            pending -= finished
            for task in finished:
                task.result()
        await asyncio.gather(*pending)
        if _spent(runner.budget):
            # Counting the items not reached reads the rest of the file, but judges none.
            seen += sum(isinstance(row, Item) for batch in chunks for row in batch)
            judged = await asyncio.to_thread(plan.store.consensus_item_ids, plan.run_id)
            if len(judged) < seen:
                assert runner.budget is not None
                state = runner.budget.state()
                return BudgetStop(state.spent_usd, state.max_usd, seen - len(judged), seen)
    except BaseException:
        # Stopped or failed: no chunk may go on calling models (or writing) behind the
        # run's back once its status is set, so every one is cancelled and awaited here.
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        raise
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    if plan.rule.needs_fit:
        from juryflow.flows.reaggregate import refit_run_consensus

        await asyncio.to_thread(refit_run_consensus, plan.store, plan.run_id, plan.rule)
    if plan.shard is None or plan.shard.index == 1:
        # every shard reads every row; the first one records the rows that were refused
        await asyncio.to_thread(runner.check_lease)
        await asyncio.to_thread(plan.store.insert_row_errors, plan.run_id, errors)
    runner.journal.remove()
    return None


def _on_stop(patience: Patience) -> None:
    """At the first request to stop: end the run's waits for the store, quiet Prefect's
    reports of the tasks about to be cancelled on purpose."""
    patience.stop.set()
    quiet_stopped_run()


def _resume_hint(plan: RunPlan) -> str:
    """How to continue the run; a shard continues by being run again as it was started."""
    if plan.shard is None:
        return resume_hint(plan.run_id, str(plan.store.path))
    return (
        f"juryflow run {shlex.quote(str(plan.dataset))} --shard {plan.shard} --run-id "
        f"{plan.run_id} --db {shlex.quote(str(plan.store.path))} (with the panel and options "
        "the shard was started with)"
    )


def _record_end(plan: RunPlan, status: str, message: str) -> None:
    """The run (or its shard) stopped before its end: ``status`` and why."""
    if plan.shard is None:
        plan.store.finish_run(plan.run_id, status, message)
    else:
        release_shard(plan.store, plan.run_id, plan.shard, status, message)


def _record_completion(plan: RunPlan) -> bool:
    """The run (or its shard) judged everything; True when the run is now completed (a
    shard completes it when it is the last one)."""
    if plan.shard is None:
        plan.store.finish_run(plan.run_id, "completed")
        return True
    return finish_shard(plan.store, plan.run_id, plan.shard)


async def _mark_ended(
    plan: RunPlan,
    runner: ChunkRunner,
    patience: Patience,
    status: str,
    error: BaseException,
) -> None:
    """The run ended by an error (``failed``) or a signal Prefect raised (``interrupted``)."""
    await runner.close()
    await close_judges()
    # The message may quote a URL, header or key (SDK and HTTP errors do); runs.error is kept.
    from juryflow.judges.redact import redact_text

    message = redact_text(f"{type(error).__name__}: {error}")
    patience.stop.clear()  # an interruption may have ended the waits; this one must land
    _record_end(plan, status, message)
    if status == "interrupted":
        # Prefect raised it (its SIGTERM bridge) or asyncio did (Ctrl-C before the watch)
        signum = signal.SIGTERM if type(error).__name__ == "TerminationSignal" else signal.SIGINT
        hint = _resume_hint(plan)
        record(
            InterruptedRun(
                plan.run_id,
                Interruption(signum.name, EXIT_CODES[signum]),
                f"juryflow: run {plan.run_id} interrupted ({signum.name}). Continue it with: "
                f"{hint}",
            )
        )


async def _stop_for_budget(plan: RunPlan, runner: ChunkRunner, stop: BudgetStop) -> InterruptedRun:
    """Mark the run interrupted by its budget (every chunk that started is stored) and
    say how to resume it."""
    await runner.close()
    await close_judges()
    reason = (
        f"budget reached: ${stop.spent_usd:.4f} spent of --max-cost ${stop.max_usd:g}; "
        f"{stop.items_left} of {stop.items} items left to judge"
    )
    await asyncio.to_thread(_record_end, plan, "interrupted", reason)
    hint = _resume_hint(plan)
    message = (
        f"juryflow: run {plan.run_id} stopped, {reason}. Continue it with: {hint} "
        "(add --max-cost USD for a new budget)"
    )
    return InterruptedRun(plan.run_id, Interruption("budget", BUDGET_EXIT_CODE), message)


async def _stop_interrupted(
    plan: RunPlan, runner: ChunkRunner, interruption: Interruption
) -> InterruptedRun:
    """Store what completed, mark the run interrupted, and say how to resume."""
    await runner.close()
    await close_judges()
    hint = _resume_hint(plan)
    # The user asked to stop: a store another process holds gets a short wait, not an
    # endless one; what cannot be stored now is in the journal, for --resume.
    bounded = Patience(stop=threading.Event())
    timer = threading.Timer(FLUSH_WAIT_SECONDS, bounded.stop.set)
    timer.start()
    try:
        with patient_waits(bounded):
            flushed = await asyncio.to_thread(runner.flush_completed)
            await asyncio.to_thread(
                _record_end, plan, "interrupted", f"interrupted by {interruption.cause}"
            )
            judged = await asyncio.to_thread(plan.store.judged_pairs, plan.run_id)
    except StoreError as error:
        message = (
            f"juryflow: run {plan.run_id} was interrupted ({interruption.cause}) but could not "
            f"be marked so: {error}. Its completed judgments are in its journal; "
            f"continue it with: {hint}"
        )
    else:
        message = (
            f"juryflow: run {plan.run_id} interrupted ({interruption.cause}): "
            f"{len(judged)} judgments stored ({flushed} of them from unfinished chunks). "
            f"Continue it with: {hint}"
        )
    finally:
        timer.cancel()
    return InterruptedRun(plan.run_id, interruption, message)


@flow(name="evaluate", log_prints=True)
async def evaluate(
    dataset: str | None = None,
    panel: str | None = None,
    db: str | None = None,
    resume: str | None = None,
    suite: str | None = None,
    chunk_size: int = 200,
    quorum: int | None = None,
    mapping: dict[str, str] | None = None,
    use_cache: bool = True,
    max_chars: int = DEFAULT_MAX_CHARS,
    distributed: bool = False,
    chunks_in_flight: int = 4,
    calibration: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    max_cost: float | None = None,
    workers: int | None = None,
    shard: str | None = None,
    run_id: str | None = None,
    data_path: str | None = None,
    take_over: bool = False,
) -> dict[str, Any]:
    """Judge DATASET with PANEL (default: the bundled sample and the offline panel).

    ``shard`` ("I/N") with ``run_id``: judge only the items of shard I of N of run
    ``run_id`` (created by the first shard to start); the last shard to finish completes
    the run. ``take_over``: claim the shard even if another process on another machine
    holds it (one on this machine is checked). ``data_path``: where a new lake
    (``db="ducklake:..."``) keeps its files.

    ``max_cost`` (USD): no model call starts once this invocation's calls cost that much;
    the run then ends ``interrupted`` and ``--resume`` judges the rest.
    ``workers``: processes that make the model calls (default: what the panel's
    concurrency calls for, see ``workers.default_workers``; 1 with ``max_cost`` or Dask).
    """
    began = time.monotonic()
    flow_run_id = str(flow_run.get_id() or "") or None
    if max_cost is not None:
        from juryflow.planning.dry_run import check_budget  # before a run row exists

        check_budget(panel, db, resume, max_cost, distributed)
    # Explicit workers start now, importing what they need while the run is planned.
    early = workers is not None and workers > 1 and not distributed and max_cost is None
    pool = WorkerPool(workers, chunks_in_flight) if early and workers is not None else None
    if pool is not None:
        pool.start()
    try:
        return await _plan_and_judge(
            pool,
            dict(
                dataset=dataset,
                panel=panel,
                db=db,
                resume=resume,
                suite=suite,
                chunk_size=chunk_size,
                quorum=quorum,
                mapping=mapping,
                use_cache=use_cache,
                max_chars=max_chars,
                flow_run_id=flow_run_id,
                calibration=calibration,
                limit=limit,
                sample=sample,
                seed=seed,
                shard=shard,
                run_id=run_id,
                data_path=data_path,
                take_over=take_over,
            ),
            workers=workers,
            distributed=distributed,
            max_cost=max_cost,
            chunks_in_flight=chunks_in_flight,
            began=began,
        )
    finally:
        if pool is not None:
            await pool.close(cancel=True)  # a no-op when the run closed it


async def _plan_and_judge(
    pool: WorkerPool | None,
    plan_options: dict[str, Any],
    *,
    workers: int | None,
    distributed: bool,
    max_cost: float | None,
    chunks_in_flight: int,
    began: float,
) -> dict[str, Any]:
    logger = get_run_logger()
    flow_run_id = plan_options["flow_run_id"]
    # The run's own store waits have no deadline (a long reader must not fail it); an
    # interruption ends them.
    patience = Patience()
    with patient_waits(patience):
        plan = plan_run(**plan_options)
        logger.info("run %s: %s with panel %s", plan.run_id, plan.dataset, plan.panel.name)
        progress.started(plan.run_id, str(plan.store.path), flow_run_id)
        budget = Budget(max_cost) if max_cost is not None else None
        set_budget(plan.run_id, budget)
        if pool is None and workers is None and not distributed and max_cost is None:
            # Dask spreads the chunks itself; a budget is kept by one process.
            count = default_workers(plan.panel)
            if count > 1:
                pool = WorkerPool(count, chunks_in_flight)
                pool.start()
        if pool is not None:
            pool.configure(
                list(plan.panel.judges),
                plan.panel.prices,
                str(journal_path(plan.store.path, plan.journal_key)),
                plan.run_id,
                _resume_hint(plan),
            )
        runner = ChunkRunner(plan, distributed, budget, pool)
        try:
            return await _judge_run(plan, runner, patience, flow_run_id, chunks_in_flight, began)
        finally:
            set_budget(plan.run_id, None)
            if pool is not None:
                await pool.close(cancel=True)  # a no-op when the run closed it


async def _judge_run(
    plan: RunPlan,
    runner: ChunkRunner,
    patience: Patience,
    flow_run_id: str | None,
    chunks_in_flight: int,
    began: float,
) -> dict[str, Any]:
    logger = get_run_logger()
    async with InterruptWatch(flow_run_id, on_trigger=lambda: _on_stop(patience)) as watch:
        watch.force_message = (
            f"juryflow: stopping at once; run {plan.run_id}'s completed judgments are in "
            f"its journal: {_resume_hint(plan)}"
        )
        budget_stop: BudgetStop | None = None
        try:
            budget_stop = await watch.run(judge_dataset(runner, chunks_in_flight))
        except Exception as error:
            if watch.interruption is None:
                if isinstance(error, ShardLost):
                    # Expected on many machines, and said in one line by the command line;
                    # Prefect's traceback of it would say nothing more.
                    quiet_stopped_run()
                await _mark_ended(plan, runner, patience, "failed", error)
                raise
            # A stop was requested: what the work raised on its way out (a write that
            # stopped waiting for the store) is part of stopping.
        except BaseException as error:
            await _mark_ended(plan, runner, patience, "interrupted", error)
            raise
        if watch.interruption is not None:
            stopped = await _stop_interrupted(plan, runner, watch.interruption)
            logger.info(stopped.message)
            record(stopped)
            # A State returned by a flow becomes its final state: Cancelled, not Failed;
            # calling the flow then raises CancelledRun (the command line's cue).
            return cast("dict[str, Any]", Cancelled(message=stopped.message))
        if budget_stop is not None:
            stopped = await _stop_for_budget(plan, runner, budget_stop)
            logger.info(stopped.message)
            record(stopped)
            quiet_stopped_run()  # the command line's one line says it; Prefect's would repeat
            return cast("dict[str, Any]", Cancelled(message=stopped.message))
        await runner.close(cancel=False)
        await close_judges()
        completed = _record_completion(plan)
    from juryflow.analysis.agreement_report import (
        record_reliability,  # the store holds what the report shows
    )

    if completed:  # a shard's share alone would give the run a partial reliability
        await asyncio.to_thread(record_reliability, plan.store, plan.run_id)
    summary = plan.store.run_summary(plan.run_id)
    summary.update(
        run_figures(plan.store, plan.run_id, time.monotonic() - began, len(runner.done_pairs))
    )
    summary.update(
        run_id=plan.run_id,
        db=str(plan.store.path),
        dataset=str(plan.dataset),
        rejected=[
            {"row": e.row_number, "item_id": e.item_id, "error": e.error}
            for e in plan.store.row_errors(plan.run_id)
        ],
    )
    # Stopped judges and quorum misses: the command line exits 1 on them.
    summary.update(health(plan.store, plan.run_id, summary, runner.stopped.values()))
    from juryflow.flows.artifacts import publish_run_artifacts  # never fails the run

    await publish_run_artifacts(plan.store, plan.run_id)
    return summary
