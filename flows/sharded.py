"""The `evaluate-sharded` flow: one evaluation split into N shard flow runs on a work pool.

A thin coordinator: it picks the run id, starts the shards (flow runs of the per-shard
deployment, ``evaluate/evaluate-shard``), waits for them and finishes the run. The shards
themselves do all the work, through the ``evaluate`` flow's ``shard``/``run_id``.

Cancelling the coordinator cancels the shard flow runs it started on the pool (they carry
its tag, :func:`coordinator_tag`): each stops like any cancelled ``evaluate`` run, storing
what it judged and releasing its claim, so the coordinator started again with the same
``run_id`` resumes the run. Without this the shards would go on judging (and paying for
API calls) for a run nobody waits for.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeAlias, cast
from uuid import UUID

import httpx
from prefect import Flow, flow, get_run_logger
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
    FlowRunFilterTags,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.client.schemas.responses import SetStateStatus
from prefect.context import FlowRunContext
from prefect.deployments import arun_deployment
from prefect.exceptions import ObjectNotFound, PrefectException
from prefect.logging.loggers import flow_run_logger
from prefect.states import Cancelled, Cancelling, State

from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.storage.connection import DB_ENV, StoreError, resolve_target
from juryflow.storage.lake.attach import LakeTarget
from juryflow.storage.shards import (
    MAX_SHARDS,
    ShardError,
    check_run_id,
    finish_sharded_run,
)
from juryflow.storage.store import Store, new_run_id

SHARD_DEPLOYMENT = "evaluate/evaluate-shard"
# How often a waiting coordinator asks the server about its shards (Prefect's default: 5 s).
POLL_SECONDS = 2.0
# Set by the coordinator for every shard; `options` may not override them.
_OWN_PARAMETERS = frozenset(
    {"dataset", "panel", "db", "data_path", "shard", "run_id", "resume", "take_over"}
)
# A shard flow run in one of these has not ended, so a cancelled coordinator stops it.
_UNFINISHED = [StateType.SCHEDULED, StateType.PENDING, StateType.RUNNING, StateType.PAUSED]
_Logger: TypeAlias = logging.Logger | logging.LoggerAdapter[logging.Logger]


@dataclass(frozen=True, slots=True)
class ShardOutcome:
    """One shard's flow run as it ended."""

    shard: str
    flow_run_id: str
    state: str
    completed: bool

    def line(self) -> str:
        return f"shard {self.shard}: flow run {self.flow_run_id} {self.state}"


def _checked(
    db: str | None, data_path: str | None, shards: int, run_id: str | None, options: dict[str, Any]
) -> tuple[str, str]:
    """The lake's ``--db`` value and the run id; ShardError (one line) for anything wrong."""
    if not 1 <= shards <= MAX_SHARDS:
        raise ShardError(f"shards={shards}: give 1 to {MAX_SHARDS} shards")
    chosen = db or os.environ.get(DB_ENV) or ""
    try:
        target = resolve_target(chosen or None, data_path)
    except StoreError as error:
        raise ShardError(str(error)) from None
    if not isinstance(target, LakeTarget):
        raise ShardError(
            f"evaluate-sharded needs a DuckLake store, not the DuckDB file {target}: a file takes "
            "writers from one machine only; pass db='ducklake:postgres:dbname=... host=...'"
        )
    unknown = sorted(set(options) - set(RunRequest.model_fields))
    reserved = sorted(set(options) & _OWN_PARAMETERS)
    if unknown or reserved:
        raise ShardError(
            f"options {unknown + reserved} cannot be passed to the shards: give the settings "
            "of a run (RunRequest: chunk_size, limit, sample, seed, suite, ...), not those "
            "evaluate-sharded sets itself"
        )
    try:
        RunRequest.of(**options)
    except ValueError as error:
        raise ShardError(f"options: {error}") from None
    return chosen, check_run_id(run_id) if run_id else new_run_id()


async def _deployment_exists(name: str) -> None:
    async with get_client() as client:
        try:
            await client.read_deployment_by_name(name)
        except ObjectNotFound:
            raise ShardError(
                f"no deployment {name!r} on the Prefect server: run `prefect deploy --all` "
                "from the juryflow repository first"
            ) from None


def coordinator_tag(flow_run_id: UUID | str) -> str:
    """The tag of every shard flow run a coordinator starts on the pool: its cancellation
    finds them by it (and so can anyone, with the UI's tag filter)."""
    return f"juryflow-coordinator:{flow_run_id}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


async def cancel_shard_runs(coordinator_id: UUID | str, reason: str, logger: _Logger) -> int:
    """Stop every unfinished shard flow run the coordinator started; returns how many.

    A running shard is set to Cancelling, as ``prefect flow-run cancel`` does: its worker
    stops it, and the ``evaluate`` flow stores what it judged and releases its shard. One no
    worker has picked up yet is set to Cancelled (no process would ever finish it). Called
    from hooks, so the API failing is logged in one line and never raised.
    """
    unfinished = FlowRunFilter(
        tags=FlowRunFilterTags(all_=[coordinator_tag(coordinator_id)]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=_UNFINISHED)),
    )
    stopped = 0
    try:
        async with get_client() as client:
            for run in await client.read_flow_runs(flow_run_filter=unfinished):
                waiting = run.state is not None and run.state.is_scheduled()
                state: State[Any] = (
                    Cancelled(message=reason) if waiting else Cancelling(message=reason)
                )
                result = await client.set_flow_run_state(run.id, state)
                request = run.parameters.get("request")
                shard = request.get("shard", "?") if isinstance(request, dict) else "?"
                if result.status == SetStateStatus.ACCEPT:
                    stopped += 1
                    logger.info("cancelling shard %s: flow run %s (%s)", shard, run.id, run.name)
                else:  # it ended meanwhile
                    why = getattr(result.details, "reason", None) or result.status.value
                    logger.info("shard %s: flow run %s not cancelled: %s", shard, run.id, why)
    except (httpx.HTTPError, PrefectException) as error:
        logger.warning(
            "could not cancel the shard flow runs tagged %s: %s; cancel them with "
            "`prefect flow-run cancel ID`",
            coordinator_tag(coordinator_id),
            _first_line(error),
        )
    return stopped


async def _stop_shards(flow: Flow[Any, Any], flow_run: FlowRun, state: State[Any]) -> None:
    """The coordinator's on_cancellation and on_crashed hook: its shards end with it.

    Prefect runs it once the coordinator's process is gone (in its worker, or in the process
    itself when the engine handles the state), so it relies on nothing the flow started.
    """
    reason = f"the coordinator flow run {flow_run.name} ({flow_run.id}) is {state.name}"
    await cancel_shard_runs(flow_run.id, reason, flow_run_logger(flow_run, flow))


async def _stop_shards_when_cancelled(coordinator_id: UUID, logger: _Logger) -> bool:
    """Wait for this coordinator's own flow run to be cancelled, then cancel its shards;
    True once it did (the task is cancelled when the shards end first).

    The hook alone would act late: the worker sends SIGTERM, which shard 1 (judged in this
    process) takes to stop gracefully, and this process would then wait for the pool's
    shards until the worker's SIGKILL 30 s later, the pool's shards judging all along.
    """
    async with get_client() as client:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                state = (await client.read_flow_run(coordinator_id)).state
            except (httpx.HTTPError, PrefectException):
                continue  # the server is busy or restarting: look again next time
            if state is not None and (state.is_cancelling() or state.is_cancelled()):
                reason = f"the coordinator flow run {coordinator_id} was cancelled"
                await cancel_shard_runs(coordinator_id, reason, logger)
                return True


async def _on_pool(
    deployment: str, shard: str, parameters: dict[str, Any], tags: list[str]
) -> ShardOutcome:
    try:
        run = await arun_deployment(
            deployment,
            parameters={"request": parameters},
            flow_run_name=f"{parameters['run_id']}-shard-{shard.replace('/', '-of-')}",
            timeout=None,
            poll_interval=POLL_SECONDS,
            tags=tags,
        )
    except httpx.HTTPError as error:
        # The other shards go on; this one is reported with the rest once they end.
        reason = _first_line(error)
        return ShardOutcome(shard, "(none)", f"not started or lost by the API: {reason}", False)
    state = run.state
    return ShardOutcome(
        shard,
        str(run.id),
        (state.name or state.type.value) if state else "unknown",
        bool(state and state.is_completed()),
    )


async def _here(shard: str, parameters: dict[str, Any]) -> ShardOutcome:
    """A shard judged in this process, as a subflow (so a worker slot is never idle)."""
    name = f"{parameters['run_id']}-shard-{shard.replace('/', '-of-')}"
    state: State[Any] = await evaluate.with_options(flow_run_name=name)(
        RunRequest(**parameters), return_state=True
    )
    flow_run_id = str(state.state_details.flow_run_id or "")
    return ShardOutcome(shard, flow_run_id, state.name or state.type.value, state.is_completed())


@flow(
    name="evaluate-sharded",
    log_prints=True,
    on_cancellation=[_stop_shards],
    on_crashed=[_stop_shards],
)
async def evaluate_sharded(
    dataset: str | None = None,
    panel: str | None = None,
    db: str | None = None,
    data_path: str | None = None,
    shards: int = 2,
    run_id: str | None = None,
    deployment: str = SHARD_DEPLOYMENT,
    judge_here: bool = True,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Judge DATASET with PANEL in ``shards`` shards of one run on a DuckLake store.

    Shards 1..N run as flow runs of ``deployment`` on its work pool, each on whichever
    worker takes it; with ``judge_here`` (the default) this flow judges shard 1 itself, so
    N workers started with ``--limit 1`` run N shards, the coordinator's slot included
    (without it, the coordinator waits in a slot of its own). ``run_id`` names the run
    (default: a new id); started again with the same ``run_id``, finished shards are
    skipped. ``options``: other settings of the run for every shard (fields of
    :class:`~juryflow.planning.run_request.RunRequest`: ``chunk_size``, ``limit``, ...).
    Fails naming the shards whose flow runs did not complete; else checks every (item,
    judge) is stored once, marks the run completed and returns it.

    Cancelled (``prefect flow-run cancel``, the UI), it cancels the shards' flow runs too
    and ends Cancelled; started again with the same ``run_id``, it resumes the run.
    """
    logger = get_run_logger()
    extra = dict(options or {})
    chosen_db, run = _checked(db, data_path, shards, run_id, extra)
    if shards > (1 if judge_here else 0):
        await _deployment_exists(deployment)
    # db and data_path as given: left out, each shard takes its own worker's JURYFLOW_DB
    # and JURYFLOW_DATA_PATH (the coordinator's would travel as a stored parameter).
    common = {**extra, "dataset": dataset, "panel": panel, "db": db}
    common |= {"data_path": data_path, "run_id": run}
    logger.info("run %s: %d shards on %s", run, shards, deployment)
    context = FlowRunContext.get()
    me = context.flow_run.id if context and context.flow_run else None
    tags = [coordinator_tag(me)] if me else []
    starts: list[Awaitable[ShardOutcome]] = []
    for index in range(1, shards + 1):
        shard = f"{index}/{shards}"
        parameters = {**common, "shard": shard}
        here = judge_here and index == 1
        starts.append(
            _here(shard, parameters) if here else _on_pool(deployment, shard, parameters, tags)
        )
    watch = asyncio.create_task(_stop_shards_when_cancelled(me, logger)) if me else None
    try:
        outcomes = await asyncio.gather(*starts)
    finally:
        if watch is not None:
            watch.cancel()
            await asyncio.wait({watch})
    failed = [outcome for outcome in outcomes if not outcome.completed]
    for outcome in outcomes:
        logger.info(outcome.line())
    if watch is not None and not watch.cancelled() and watch.result():
        # A State returned by a flow becomes its final state: Cancelled, as asked.
        message = (
            f"run {run}: cancelled with its shards; start evaluate-sharded again with "
            f"run_id={run!r} to resume it (finished shards are skipped)"
        )
        logger.info(message)
        return cast("dict[str, Any]", Cancelled(message=message))
    if failed:
        raise ShardError(
            f"run {run}: {'; '.join(o.line() for o in failed)}; start evaluate-sharded again "
            f"with run_id={run!r} (finished shards are skipped), then it finishes the run"
        )
    try:
        status = await asyncio.to_thread(finish_sharded_run, Store(chosen_db, data_path), run)
    except StoreError as error:
        raise ShardError(str(error)) from None
    summary = status.to_dict()
    summary["flow_runs"] = {outcome.shard: outcome.flow_run_id for outcome in outcomes}
    logger.info(
        "run %s %s: %d items, %d judgments", run, status.status, status.items, status.judgments
    )
    return summary


__all__ = [
    "SHARD_DEPLOYMENT",
    "ShardOutcome",
    "cancel_shard_runs",
    "coordinator_tag",
    "evaluate_sharded",
]
