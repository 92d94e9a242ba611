"""The `evaluate-sharded` flow: one evaluation split into N shard flow runs on a work pool.

A thin coordinator: it picks the run id, starts the shards (flow runs of the per-shard
deployment, ``evaluate/evaluate-shard``), waits for them and finishes the run. The shards
themselves do all the work, through the ``evaluate`` flow's ``shard``/``run_id``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import httpx
from prefect import flow, get_run_logger
from prefect.client.orchestration import get_client
from prefect.deployments import arun_deployment
from prefect.exceptions import ObjectNotFound
from prefect.states import State

from juryflow.evaluate import evaluate
from juryflow.storage.connection import DB_ENV, StoreError, resolve_target
from juryflow.storage.lake import LakeTarget
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
    unknown = sorted(set(options) - set(evaluate.parameters.properties))
    reserved = sorted(set(options) & _OWN_PARAMETERS)
    if unknown or reserved:
        raise ShardError(
            f"options {unknown + reserved} cannot be passed to the shards: give the evaluate "
            "flow's own parameters (chunk_size, limit, sample, seed, suite, ...), not those "
            "evaluate-sharded sets itself"
        )
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


async def _on_pool(deployment: str, shard: str, parameters: dict[str, Any]) -> ShardOutcome:
    try:
        run = await arun_deployment(
            deployment,
            parameters=parameters,
            flow_run_name=f"{parameters['run_id']}-shard-{shard.replace('/', '-of-')}",
            timeout=None,
            poll_interval=POLL_SECONDS,
        )
    except httpx.HTTPError as error:
        # The other shards go on; this one is reported with the rest once they end.
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
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
        **parameters, return_state=True
    )
    flow_run_id = str(state.state_details.flow_run_id or "")
    return ShardOutcome(shard, flow_run_id, state.name or state.type.value, state.is_completed())


@flow(name="evaluate-sharded", log_prints=True)
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
    skipped. ``options``: other ``evaluate`` parameters for every shard (``chunk_size``,
    ``limit``, ...). Fails naming the shards whose flow runs did not complete; else
    checks every (item, judge) is stored once, marks the run completed and returns it.
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
    starts: list[Awaitable[ShardOutcome]] = []
    for index in range(1, shards + 1):
        shard = f"{index}/{shards}"
        parameters = {**common, "shard": shard}
        here = judge_here and index == 1
        starts.append(_here(shard, parameters) if here else _on_pool(deployment, shard, parameters))
    outcomes = await asyncio.gather(*starts)
    failed = [outcome for outcome in outcomes if not outcome.completed]
    for outcome in outcomes:
        logger.info(outcome.line())
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


__all__ = ["SHARD_DEPLOYMENT", "ShardOutcome", "evaluate_sharded"]
