"""The `evaluate` flow: every item through every judge, consensus per item, all into DuckDB."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.futures import PrefectFuture
from prefect.runtime import flow_run

from flows import progress
from flows.run_setup import RunPlan, plan_run
from flows.tasks import JudgedChunk, close_judges, judge_chunk, judge_for
from judges.consensus import item_consensus
from judges.panel import JudgeSpec
from judges.records import Item, Judgment
from storage.datasets import DEFAULT_MAX_CHARS, RowError, count_rows, read_items
from storage.journal import Journal, journal_path


def _chunks(rows: Iterable[Item | RowError], size: int) -> Iterator[list[Item | RowError]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


class ChunkRunner:
    """Judges chunks of one run; only this object, in the flow process, writes to the store."""

    def __init__(self, plan: RunPlan, distributed: bool) -> None:
        self.plan = plan
        self.distributed = distributed
        self.journal = Journal(journal_path(plan.store.path, plan.run_id))
        # DuckDB takes one writer at a time; writes run on a thread so that model calls
        # keep flowing on the event loop meanwhile.
        self.write_lock = asyncio.Lock()
        self.done_pairs: set[tuple[str, str]] = set()
        self.done_consensus: set[str] = set()
        self.stored: dict[str, list[Judgment]] = {}
        self.replayed: dict[str, list[Judgment]] = {}
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
        for judgment in store.load_judgments(run_id):
            self.stored.setdefault(judgment.item_id, []).append(judgment)
        stored_pairs = store.judged_pairs(run_id)
        for judgment in self.journal.replay():
            if (judgment.item_id, judgment.judge_id) not in stored_pairs:
                self.replayed.setdefault(judgment.item_id, []).append(judgment)
        self.done_pairs = stored_pairs | {
            (j.item_id, j.judge_id) for js in self.replayed.values() for j in js
        }
        self.done_consensus = store.consensus_item_ids(run_id)

    async def _cached(self, spec: JudgeSpec, items: list[Item]) -> list[Judgment]:
        judge = judge_for(spec, self.plan.panel.prices)
        key_of = getattr(judge, "cache_key", None)
        if not self.plan.use_cache or key_of is None or not items:
            return []
        keys = {item.item_id: key_of(item) for item in items}
        found = await asyncio.to_thread(self.plan.store.cached_judgments, list(keys.values()))
        return [
            dataclasses.replace(
                found[key],
                item_id=item_id,
                judge_id=spec.id,
                cached=True,
                verdict_threshold=getattr(judge, "verdict_threshold", found[key].verdict_threshold),
            )
            for item_id, key in keys.items()
            if key in found
        ]

    async def _judge(self, spec: JudgeSpec, items: list[Item], index: int) -> list[Judgment]:
        todo = [i for i in items if (i.item_id, spec.id) not in self.done_pairs]
        cached = await self._cached(spec, todo)
        hit = {j.item_id for j in cached}
        todo = [i for i in todo if i.item_id not in hit]
        fresh: list[Judgment] = []
        if todo:
            prices = self.plan.panel.prices
            journal = str(self.journal.path)
            if self.distributed:
                # An async task's future resolves to its result, not to a coroutine.
                future = cast(
                    "PrefectFuture[JudgedChunk]",
                    judge_chunk.submit(spec, prices, todo, index, journal),
                )
                fresh = list((await asyncio.to_thread(future.result)).judgments)
            else:
                fresh = list((await judge_chunk(spec, prices, todo, index, journal)).judgments)
        new = cached + fresh
        progress.report("judged", len(new))
        return new

    async def run_chunk(self, items: list[Item], index: int) -> int:
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
        consensus = [
            item_consensus(
                item.item_id,
                by_item[item.item_id],
                n_judges=len(self.plan.panel.judges),
                text=item.text(text_variable),
                quorum=self.plan.quorum,
                rule=self.chunk_rule,
            )
            for item in items
            if item.item_id not in self.done_consensus
        ]
        async with self.write_lock:
            await asyncio.to_thread(
                self.plan.store.write_chunk, self.plan.run_id, items, new, consensus
            )
        progress.report("items_done", len(items))
        return len(items)


async def judge_dataset(plan: RunPlan, distributed: bool, chunks_in_flight: int) -> list[RowError]:
    runner = ChunkRunner(plan, distributed)
    total = count_rows(plan.dataset)
    if total is not None:
        progress.report("total", total)
    rows = read_items(plan.dataset, plan.needed_variables, plan.mapping, plan.max_chars)
    # Bounding the chunks in flight bounds memory: the dataset is read only as fast as
    # chunks finish, whatever its size.
    slots = asyncio.Semaphore(chunks_in_flight)
    errors: list[RowError] = []
    pending: set[asyncio.Task[int]] = set()

    async def guarded(items: list[Item], index: int) -> int:
        try:
            return await runner.run_chunk(items, index)
        finally:
            slots.release()

    for index, batch in enumerate(_chunks(rows, plan.chunk_size)):
        items = [row for row in batch if isinstance(row, Item)]
        errors.extend(row for row in batch if isinstance(row, RowError))
        await slots.acquire()
        pending.add(asyncio.create_task(guarded(items, index)))
        finished = {t for t in pending if t.done()}
        for task in finished:
            task.result()
        pending -= finished
    await asyncio.gather(*pending)
    if plan.rule.needs_fit:
        from flows.reaggregate import refit_run_consensus

        await asyncio.to_thread(refit_run_consensus, plan.store, plan.run_id, plan.rule)
    plan.store.insert_row_errors(plan.run_id, errors)
    runner.journal.remove()
    return errors


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
) -> dict[str, Any]:
    """Judge DATASET with PANEL (default: the bundled sample and the offline panel)."""
    logger = get_run_logger()
    plan = plan_run(
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
        flow_run_id=str(flow_run.get_id() or "") or None,
        calibration=calibration,
    )
    logger.info("run %s: %s with panel %s", plan.run_id, plan.dataset, plan.panel.name)
    try:
        await judge_dataset(plan, distributed, chunks_in_flight)
    except BaseException as error:
        await close_judges()
        plan.store.finish_run(plan.run_id, "failed", f"{type(error).__name__}: {error}")
        raise
    await close_judges()
    plan.store.finish_run(plan.run_id, "completed")
    from flows.analysis import record_reliability  # the store holds what the report shows

    await asyncio.to_thread(record_reliability, plan.store, plan.run_id)
    summary = plan.store.run_summary(plan.run_id)
    summary.update(
        run_id=plan.run_id,
        db=str(plan.store.path),
        dataset=str(plan.dataset),
        rejected=[
            {"row": e.row_number, "item_id": e.item_id, "error": e.error}
            for e in plan.store.row_errors(plan.run_id)
        ],
    )
    from flows.artifacts import publish_run_artifacts  # never fails the run

    await publish_run_artifacts(plan.store, plan.run_id)
    return summary
