"""The chunks of one `evaluate` run kept in flight: each a Prefect task (one judge over one
chunk of items), their judgments gathered, journaled and written with each item's consensus
the moment its last judge answers, and a spending limit or a stop honoured between chunks."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TypeVar, cast

from prefect import get_run_logger
from prefect.futures import PrefectFuture
from prefect.utilities.annotations import quote

from juryflow.flows.batching import BatchRounds, check_answered, stored_to_resume
from juryflow.flows.runtime import progress
from juryflow.flows.runtime.allocator import release_free_heap
from juryflow.flows.runtime.prefect_env import quiet_stopped_run
from juryflow.flows.sampling import cached_answers, left_for_workers
from juryflow.flows.tasks import JudgedChunk, judge_chunk
from juryflow.flows.workers import WorkerPool
from juryflow.judges.batches.resend import resendable
from juryflow.judges.breaker import StoppedJudge, forget_run
from juryflow.judges.budget import Budget
from juryflow.judges.panel import JudgeSpec
from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import Consensus, Item, Judgment
from juryflow.planning.early_stop_plan import EarlyStopPlan, early_stop_plan, in_panel_order
from juryflow.planning.run_setup import RunPlan
from juryflow.storage.datasets import RowError, count_rows, read_items, select_items
from juryflow.storage.failures import store_failure
from juryflow.storage.journal import Journal, journal_path
from juryflow.storage.shards import ShardLost
from juryflow.storage.store.liveness import hold

T = TypeVar("T")
ByItem = dict[str, list[Judgment]]
"""Each item's judgments so far, by item id."""


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
        batch_wait: float | None = None,
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
        # Judged by the run's own rule: one fitted at the run's end is refused.
        self.early, self.early_refused = early_stop_plan(
            plan.panel, plan.rule, plan.quorum, plan.seed
        )
        self.skipped: dict[str, set[str]] = {}
        """Judges an earlier invocation left out of an item as decided (early stopping)."""
        if plan.shard is None and isinstance(plan.store.path, Path):
            # Released when the run's end is recorded; if that cannot be written (the store
            # failed under it), the process's exit releases it and `juryflow runs` says so.
            hold(plan.store.path, plan.run_id)
        if plan.resumed:
            self._load_previous_work()
        self.batches = BatchRounds.of(plan, self.journal.path, budget, batch_wait, self.done_pairs)

    def _load_previous_work(self) -> None:
        """What a killed run had stored, and what it had judged but not yet stored.

        Journal entries are written with their chunk (items, judgments and consensus in one
        transaction), so a completed call is never paid for twice.
        """
        store, run_id = self.plan.store, self.plan.run_id
        # Only items still without consensus need their stored judgments (to combine them
        # with the judges still to answer); the rest are done.
        for judgment in stored_to_resume(store, run_id):  # less requests to send again
            self.stored.setdefault(judgment.item_id, []).append(judgment)
        stored_pairs = store.judged_pairs(run_id)
        for judgment in self.journal.replay(keep=lambda i, j: (i, j) not in stored_pairs):
            if not resendable(judgment):
                self.replayed.setdefault(judgment.item_id, []).append(judgment)
        self.done_pairs = stored_pairs | {
            (j.item_id, j.judge_id) for js in self.replayed.values() for j in js
        }
        self.done_consensus = store.consensus_item_ids(run_id)
        for item_id, judge_id in store.skipped_pairs(run_id):
            self.skipped.setdefault(item_id, set()).add(judge_id)
            self.done_pairs.add((item_id, judge_id))

    async def _cached(self, spec: JudgeSpec, items: list[Item]) -> list[Judgment]:
        # Partly cached samples are left for a judge here, or with --workers (which get
        # them with the items), and for batches (sent from here); Dask's workers get none.
        here = not self.distributed or bool(self.batches and self.batches.takes(spec))
        return await cached_answers(self.plan, spec, items, local=here)

    async def todo(self, spec: JudgeSpec, items: list[Item]) -> tuple[list[Judgment], list[Item]]:
        """This judge's answers found in the cache, and the items it must still be asked."""
        todo = [i for i in items if (i.item_id, spec.id) not in self.done_pairs]
        if len(todo) < len(items):  # judged before a --resume: done, and not paid again now
            progress.emit(progress.Judged(len(items) - len(todo), earlier=True))
        cached = await self._cached(spec, todo)
        hit = {j.item_id for j in cached}
        return cached, [i for i in todo if i.item_id not in hit]

    def note_stopped(self, spec: JudgeSpec, chunk: JudgedChunk) -> None:
        if chunk.stopped is not None and spec.id not in self.stopped:
            self.stopped[spec.id] = chunk.stopped
            # info: the command line prints it once, at the end; the Prefect UI shows it now
            get_run_logger().info(chunk.stopped.line())

    async def _judge(self, spec: JudgeSpec, items: list[Item], index: int) -> list[Judgment]:
        cached, todo = await self.todo(spec, items)
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
            self.note_stopped(spec, chunk)
        # A local chunk task reported its judgments one by one as they completed.
        progress.judged(cached + fresh if self.distributed else cached)
        return cached + fresh

    async def _judge_on_workers(
        self, pool: WorkerPool, work: list[tuple[JudgeSpec, list[Item]]]
    ) -> list[list[Judgment]]:
        """The answers of each judge on its items, from one request to the worker processes
        (which report each judgment as it completes)."""
        specs = [spec for spec, _ in work]
        prepared = await asyncio.gather(*(self.todo(spec, items) for spec, items in work))
        todo = {spec.id: todo for spec, (_, todo) in zip(specs, prepared, strict=True) if todo}
        samples = {
            key: found
            for spec in specs
            for key, found in left_for_workers(spec, todo.get(spec.id, [])).items()
        }
        chunks = await pool.judge(todo, samples) if todo else {}
        answers: list[list[Judgment]] = []
        for spec, (cached, _) in zip(specs, prepared, strict=True):
            progress.judged(cached)
            chunk = chunks.get(spec.id)
            if chunk is None:
                answers.append(cached)
                continue
            self.note_stopped(spec, chunk)
            answers.append(cached + list(chunk.judgments))
        return answers

    async def judge_work(
        self, work: list[tuple[JudgeSpec, list[Item]]], index: int, real_time: bool = False
    ) -> list[Judgment]:
        """Each judge's answers on its items (workers or local tasks; batches unless real_time)."""
        if self.batches is not None and not real_time:
            return await self.batches.judge_work(self, work, index)
        work = [(spec, items) for spec, items in work if items]
        if not work:
            return []
        if self.pool is not None:
            results = await self._judge_on_workers(self.pool, work)
        else:
            results = await asyncio.gather(
                *(self._judge(spec, items, index) for spec, items in work)
            )
        return [judgment for judgments in results for judgment in judgments]

    async def _judge_in_rounds(
        self,
        items: list[Item],
        index: int,
        by_item: ByItem,
        early: EarlyStopPlan,
    ) -> list[Judgment]:
        """Exact early stopping: the first judges on every item (every judge on the audit
        sample), then one more judge at a time on the items still open."""
        audit = {i.item_id for i in items if early.in_audit(i.item_id)}
        work = [
            (spec, items if n < early.first else [i for i in items if i.item_id in audit])
            for n, spec in enumerate(early.order)
        ]
        fresh: list[Judgment] = []
        waiting = [i for i in items if i.item_id not in audit]
        for spec in (None, *early.order[early.first :]):
            if spec is not None:
                # Only the items this judge could still change; the order is fixed, so a
                # judge reached here is the next one each open item would call.
                open_items = [i for i in waiting if spec.id in self._open(i, by_item, early)]
                if not open_items:
                    continue
                work = [(spec, open_items)]
            answers = await self.judge_work(work, index)
            for judgment in answers:
                by_item[judgment.item_id].append(judgment)
            fresh += answers
        return fresh

    def _open(self, item: Item, by_item: ByItem, early: EarlyStopPlan) -> list[str]:
        known, text = by_item[item.item_id], item.text(self.plan.text_variable)
        return early.open_judges(item.item_id, text, known, self.skipped.get(item.item_id, ()))

    def _stop_reason(self, item: Item, by_item: ByItem, early: EarlyStopPlan) -> str | None:
        known, text = by_item[item.item_id], item.text(self.plan.text_variable)
        return early.stop_reason(item.item_id, text, known, self.skipped.get(item.item_id, ()))

    def _panel_order(self, judgments: list[Judgment]) -> list[Judgment]:
        # As an early-stopped run orders them, so that both combine alike to the last bit.
        return in_panel_order(judgments, [spec.id for spec in self.plan.panel.judges])

    async def run_chunk(self, items: list[Item], index: int) -> int:
        self.in_flight[index] = items
        by_item: ByItem = {i.item_id: list(self.stored.pop(i.item_id, [])) for i in items}
        new = [j for item in items for j in self.replayed.pop(item.item_id, [])]
        for judgment in new:
            by_item[judgment.item_id].append(judgment)
        early = self.early
        if early is None:
            fresh = await self.judge_work([(spec, items) for spec in self.plan.panel.judges], index)
            for judgment in fresh:
                by_item[judgment.item_id].append(judgment)
        else:
            fresh = await self._judge_in_rounds(items, index, by_item, early)
        new += fresh
        # Off the event loop: a chunk's consensus held it for ~50 ms, with every call in
        # flight waiting for its answer to be read.
        consensus, skipped, audit = await asyncio.to_thread(self._consensus, items, by_item)
        if skipped:
            progress.emit(progress.Skipped(len(skipped)))
        async with self.write_lock:
            if self.closed:
                return 0  # the run has ended: its status row is final, nothing lands after it
            await _finish_even_if_cancelled(
                asyncio.to_thread(self._write_chunk, items, new, consensus, skipped, audit)
            )
            del self.in_flight[index]
        progress.report("items_done", len(items))
        return len(items)

    def _consensus(
        self, items: list[Item], by_item: ByItem
    ) -> tuple[list[Consensus], list[tuple[str, str, str]], list[str]]:
        """Consensus rows, early stopping's (item, judge, reason) skips and audit items."""
        early = self.early
        text_variable = self.plan.text_variable
        n_judges = len(self.plan.panel.judges)
        consensus: list[Consensus] = []
        skipped: list[tuple[str, str, str]] = []
        audit: list[str] = []
        unanswered = self.batches.unanswered if self.batches is not None else {}  # --resume's
        for item in items:
            if item.item_id in self.done_consensus or item.item_id in unanswered:
                continue
            judged = {j.judge_id for j in by_item[item.item_id]}
            if len(judged) < n_judges:
                # An item a judge left for lack of budget gets its consensus when --resume
                # has all its judgments (as for an interrupted chunk), unless early stopping
                # closed it (exactly, or lossily on close agreement).
                if early is None or (why := self._stop_reason(item, by_item, early)) is None:
                    continue
                earlier = self.skipped.get(item.item_id, set()) | judged
                skipped += [(item.item_id, s.id, why) for s in early.order if s.id not in earlier]
            if early is not None and early.in_audit(item.item_id):
                audit.append(item.item_id)
            consensus.append(
                item_consensus(
                    item.item_id,
                    self._panel_order(by_item[item.item_id]),
                    n_judges=n_judges,
                    text=item.text(text_variable),
                    quorum=self.plan.quorum,
                    rule=self.chunk_rule,
                )
            )
        return consensus, skipped, audit

    def _write_chunk(
        self,
        items: list[Item],
        judgments: list[Judgment],
        consensus: list[Consensus],
        skipped: list[tuple[str, str, str]],
        audit: list[str],
    ) -> None:
        self.check_lease()
        self.plan.store.write_chunk(
            self.plan.run_id, items, judgments, consensus, skipped=skipped, audit=audit
        )
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


def _spent(runner: ChunkRunner) -> bool:
    held = runner.batches is not None and runner.batches.held_back  # a batch it could not pay
    return runner.budget is not None and (runner.budget.reached or held)


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
            if _spent(runner):
                # No chunk starts once the money is spent: the rest is for --resume.
                slots.release()
                break
            pending.add(asyncio.create_task(guarded(items, index)))
            finished = {t for t in pending if t.done()}
            pending -= finished
            for task in finished:
                task.result()
        await asyncio.gather(*pending)
        if _spent(runner):
            # Counting the items not reached reads the rest of the file, but judges none.
            seen += sum(isinstance(row, Item) for batch in chunks for row in batch)
            judged = await asyncio.to_thread(plan.store.consensus_item_ids, plan.run_id)
            if len(judged) < seen:
                assert runner.budget is not None
                state = runner.budget.state()
                return BudgetStop(state.spent_usd, state.max_usd, seen - len(judged), seen)
    except BaseException as error:
        # Stopped or failed: no chunk may go on calling models (or writing) behind the
        # run's back once its status is set, so every one is cancelled and awaited here.
        if store_failure(error, plan.store.path) is not None:
            quiet_stopped_run()  # the run ends in one line; these cancellations are on purpose
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        raise
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    check_answered(runner.batches)  # BatchStop: requests a batch left, for --resume to send
    if plan.rule.needs_fit:
        from juryflow.flows.reaggregate import refit_run_consensus

        await asyncio.to_thread(refit_run_consensus, plan.store, plan.run_id, plan.rule)
    if plan.shard is None or plan.shard.index == 1:
        # every shard reads every row; the first one records the rows that were refused
        await asyncio.to_thread(runner.check_lease)
        await asyncio.to_thread(plan.store.insert_row_errors, plan.run_id, errors)
    runner.journal.remove()
    return None
