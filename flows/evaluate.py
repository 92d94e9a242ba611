"""The `evaluate` flow: every item through every judge, consensus per item, all into DuckDB."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import threading
import time
from typing import Any, cast

import duckdb
from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import Cancelled

from juryflow.analysis.run_figures import run_figures
from juryflow.analysis.run_health import health
from juryflow.flows import rate_limits
from juryflow.flows.batching import BatchStop
from juryflow.flows.chunks import BudgetStop, ChunkRunner, judge_dataset
from juryflow.flows.rate_limits import RateLimited, close_counting
from juryflow.flows.runtime import progress
from juryflow.flows.runtime.collector import start_up_objects_frozen
from juryflow.flows.runtime.interrupts import (
    EXIT_CODES,
    InterruptedRun,
    Interruption,
    InterruptWatch,
    on_pending,
    pending,
    record,
    resume_hint,
    stop_if_pending,
)
from juryflow.flows.runtime.prefect_env import quiet_stopped_run
from juryflow.flows.tasks import close_judges
from juryflow.flows.workers import WorkerPool
from juryflow.judges.budget import BUDGET_EXIT_CODE, Budget, set_budget
from juryflow.planning.run_request import RunRequest
from juryflow.planning.run_setup import RunPlan, check_budget, plan_run
from juryflow.planning.worker_count import auto_workers, default_workers
from juryflow.storage.connection import (
    Patience,
    StoreError,
    StoreLockedError,
    patient_waits,
    resolve_target,
)
from juryflow.storage.failures import StoreFailure, store_failure
from juryflow.storage.journal import journal_path
from juryflow.storage.shards import ShardLost, finish_shard, release_shard

FLUSH_WAIT_SECONDS = 10.0
"""How long an interrupted run waits for a store another process holds before leaving its
last judgments to the journal (and ``--resume``): the user asked it to stop."""


def _on_stop(patience: Patience) -> None:
    """At the first request to stop: end the run's waits for the store, quiet Prefect's
    reports of the tasks about to be cancelled on purpose."""
    patience.stop.set()
    quiet_stopped_run()


def _stop_before_planning() -> None:
    """A Ctrl-C as the flow started: stop before the run has a row or made a call."""
    early = pending()
    if early is not None:
        message = (
            f"juryflow: interrupted ({early.cause}) before the run started; nothing was judged"
        )
        record(InterruptedRun(None, early, message))
        quiet_stopped_run()  # the command line's one line says it; Prefect's "crash" would not
        raise KeyboardInterrupt


def _resume_hint(plan: RunPlan) -> str:
    """How to continue the run; a shard continues by being run again as it was started."""
    if plan.shard is None:
        return resume_hint(plan.run_id, str(plan.store.path))
    return (
        f"juryflow run {shlex.quote(str(plan.dataset))} --shard {plan.shard} --run-id "
        f"{plan.run_id} --db {shlex.quote(str(plan.store.path))} (with the panel and options "
        "the shard was started with)"
    )


def _record_end(plan: RunPlan, status: str, message: str, rate_limited: RateLimited = None) -> None:
    """The run (or its shard) stopped before its end: ``status`` and why, and the 429s."""
    rate_limits.keep(plan, rate_limited)
    if plan.shard is None:
        plan.store.finish_run(plan.run_id, status, message)
    else:
        release_shard(plan.store, plan.run_id, plan.shard, status, message)


def _record_completion(plan: RunPlan, rate_limited: RateLimited) -> bool:
    """The run (or its shard) judged everything; True when the run is now completed (a
    shard completes it when it is the last one)."""
    rate_limits.keep(plan, rate_limited)
    if plan.shard is None:
        plan.store.finish_run(plan.run_id, "completed")
        return True
    return finish_shard(plan.store, plan.run_id, plan.shard)


async def _mark_ended(
    plan: RunPlan,
    runner: ChunkRunner | None,
    patience: Patience,
    status: str,
    error: BaseException,
) -> None:
    """The run ended by an error (``failed``) or a signal Prefect raised (``interrupted``);
    ``runner`` is None when it ended before its judging began."""
    counts = await close_counting(plan, runner) if runner is not None else None
    await close_judges()
    # The message may quote a URL, header or key (SDK and HTTP errors do); runs.error is kept.
    from juryflow.judges.redact import redact_text

    message = redact_text(f"{type(error).__name__}: {error}")
    patience.stop.clear()  # an interruption may have ended the waits; this one must land
    _record_end(plan, status, message, counts)
    if status == "interrupted":
        # Prefect raised it (its SIGTERM bridge), or juryflow's own handlers did before the
        # watch began (SystemExit for SIGTERM, KeyboardInterrupt for Ctrl-C)
        by_sigterm = type(error).__name__ == "TerminationSignal" or (
            isinstance(error, SystemExit) and error.code == EXIT_CODES[signal.SIGTERM]
        )
        signum = signal.SIGTERM if by_sigterm else signal.SIGINT
        hint = _resume_hint(plan)
        record(
            InterruptedRun(
                plan.run_id,
                Interruption(signum.name, EXIT_CODES[signum]),
                f"juryflow: run {plan.run_id} interrupted ({signum.name}). Continue it with: "
                f"{hint}",
            )
        )


async def _store_failed(
    plan: RunPlan,
    runner: ChunkRunner,
    patience: Patience,
    failure: StoreFailure,
    error: Exception,
) -> StoreError:
    """The store itself failed the run (deleted, disk full, no longer writable): record the
    end if the store still takes it, and say in one line what to fix and how to resume."""
    quiet_stopped_run()  # the one line says it all; Prefect's traceback would not help
    # The same failure may refuse this too: the resume sets the row right then.
    with contextlib.suppress(StoreError, duckdb.Error, OSError):
        await _mark_ended(plan, runner, patience, "failed", error)
    fix = f"{failure.fix}, then continue" if failure.fix else "continue"
    rebuilt = "" if failure.fix else " (it rebuilds the store from the journal)"
    return StoreError(
        f"run {plan.run_id} stopped: {failure.what}. Every judgment made is in its journal "
        f"{journal_path(plan.store.path, plan.journal_key)}; {fix} it with: "
        f"{_resume_hint(plan)}{rebuilt}"
    )


async def _stop_for_budget(plan: RunPlan, runner: ChunkRunner, stop: BudgetStop) -> InterruptedRun:
    """Mark the run interrupted by its budget (every chunk that started is stored) and
    say how to resume it."""
    counts = await close_counting(plan, runner)
    await close_judges()
    reason = (
        f"budget reached: ${stop.spent_usd:.4f} spent of --max-cost ${stop.max_usd:g}; "
        f"{stop.items_left} of {stop.items} items left to judge"
    )
    await asyncio.to_thread(_record_end, plan, "interrupted", reason, counts)
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
    counts = await close_counting(plan, runner)
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
                _record_end, plan, "interrupted", f"interrupted by {interruption.cause}", counts
            )
            judged = await asyncio.to_thread(plan.store.judged_pairs, plan.run_id)
    except StoreError as error:
        message = (
            f"juryflow: run {plan.run_id} was interrupted ({interruption.cause}) but could not "
            f"be marked so: {error}. Its completed judgments are in its journal; "
            f"continue it with: {hint}"
        )
    else:
        # --batch: what becomes of the batches still running, said in the same line
        batches = runner.batches.left_running() if runner.batches is not None else ""
        message = (
            f"juryflow: run {plan.run_id} interrupted ({interruption.cause}): "
            f"{len(judged)} judgments stored ({flushed} of them from unfinished chunks). "
            f"{batches}Continue it with: {hint}"
        )
    finally:
        timer.cancel()
    return InterruptedRun(plan.run_id, interruption, message)


@flow(name="evaluate", log_prints=True)
async def evaluate(request: RunRequest | None = None, chunks_in_flight: int = 4) -> dict[str, Any]:
    """Judge the request's dataset with its panel (default: the bundled sample and the
    offline panel); every setting is a field of :class:`RunRequest`.

    ``chunks_in_flight``: chunk tasks judged at once by this process (not a setting of the
    run: how the flow runs it, for benchmarks and tests).
    """
    began = time.monotonic()
    request = request or RunRequest()
    flow_run_id = str(flow_run.get_id() or "") or None
    if request.max_cost is not None:
        check_budget(request)  # before a run row exists
    # Explicit workers start now, importing what they need while the run is planned.
    workers = request.workers
    pool = None
    if (
        isinstance(workers, int)
        and workers > 1
        and request.dask is None
        and request.max_cost is None
    ):
        pool = WorkerPool(workers, chunks_in_flight)
        pool.start()
    try:
        return await _plan_and_judge(pool, request, flow_run_id, chunks_in_flight, began)
    finally:
        if pool is not None:
            await pool.close(cancel=True)  # a no-op when the run closed it


async def _plan_and_judge(
    pool: WorkerPool | None,
    request: RunRequest,
    flow_run_id: str | None,
    chunks_in_flight: int,
    began: float,
) -> dict[str, Any]:
    distributed, max_cost = request.dask is not None, request.max_cost
    logger = get_run_logger()
    # The run's own store waits have no deadline (a long reader must not fail it); an
    # interruption ends them.
    patience = Patience()
    with patient_waits(patience), on_pending(patience.stop.set):
        _stop_before_planning()
        try:
            plan = plan_run(request, flow_run_id)
        except StoreLockedError:
            _stop_before_planning()  # a Ctrl-C ended the wait for the store
            raise
        except (OSError, duckdb.Error, StoreError) as error:
            # a str: a store not there yet was not "deleted during the run"
            failure = store_failure(error, str(resolve_target(request.db)))
            if failure is None:
                raise
            quiet_stopped_run()  # the one line says it; Prefect's traceback would not help
            fix = failure.fix or "check the store"
            raise StoreError(
                f"the run could not start: {failure.what}; {fix}, then run it again"
            ) from None
        try:
            stop_if_pending()
            logger.info("run %s: %s with panel %s", plan.run_id, plan.dataset, plan.panel.name)
            count, workers_note = 1, None
            if pool is None and request.auto_workers and not distributed:
                choice = auto_workers(plan.panel, max_cost=max_cost)
                count, workers_note = choice.count, choice.describe()
            elif pool is None and request.workers is None and not distributed and max_cost is None:
                # Dask spreads the chunks itself; a budget is kept by one process.
                count = default_workers(plan.panel)
            progress.started(plan.run_id, str(plan.store.path), flow_run_id, workers_note)
            budget = Budget(max_cost) if max_cost is not None else None
            set_budget(plan.run_id, budget)
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
            runner = ChunkRunner(plan, distributed, budget, pool, request.batch_wait)
        except BaseException as error:
            # The run's row exists but its judging never began (Ctrl-C or SIGTERM as it
            # starts, or an error): the row says how it ended, never `running`.
            set_budget(plan.run_id, None)
            if pool is not None:
                await pool.close(cancel=True)
            status = "failed" if isinstance(error, Exception) else "interrupted"
            if status == "interrupted":
                quiet_stopped_run()
            await _mark_ended(plan, None, patience, status, error)
            raise
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
            with start_up_objects_frozen():
                budget_stop = await watch.run(judge_dataset(runner, chunks_in_flight))
        except BatchStop as stop:
            # --batch-wait passed, or requests for --resume to send: stopped as on request
            watch.trigger(Interruption(stop.reason, BUDGET_EXIT_CODE))
        except Exception as error:
            if watch.interruption is None:
                if isinstance(error, ShardLost):
                    # Expected on many machines, and said in one line by the command line;
                    # Prefect's traceback of it would say nothing more.
                    quiet_stopped_run()
                failure = store_failure(error, plan.store.path)
                if failure is not None:
                    raise await _store_failed(plan, runner, patience, failure, error) from None
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
        rate_limited = await close_counting(plan, runner, cancel=False)
        await close_judges()
        completed = _record_completion(plan, rate_limited)
    from juryflow.analysis.agreement_report import (
        record_reliability,  # the store holds what the report shows
    )

    if completed:  # a shard's share alone would give the run a partial reliability
        await asyncio.to_thread(record_reliability, plan.store, plan.run_id)
    seconds = time.monotonic() - began
    with plan.store.reading():  # a dozen reads through one connection
        summary = plan.store.run_summary(plan.run_id)
        summary.update(run_figures(plan.store, plan.run_id, seconds, len(runner.done_pairs)))
        summary.update(
            run_id=plan.run_id,
            db=str(plan.store.path),
            dataset=str(plan.dataset),
            rejected=[
                {"row": e.row_number, "item_id": e.item_id, "error": e.error}
                for e in plan.store.row_errors(plan.run_id)
            ],
            rate_limited=rate_limits.run_total(plan, rate_limited),
            warnings=list(runner.batches.fallback.values()) if runner.batches is not None else [],
        )
        # Stopped judges and quorum misses: the command line exits 1 on them.
        summary.update(health(plan.store, plan.run_id, summary, runner.stopped.values()))
    from juryflow.flows.artifacts import publish_run_artifacts  # never fails the run

    await publish_run_artifacts(plan.store, plan.run_id)
    return summary
