"""A batch run cancelled in Prefect (issue 24, point 1): the flow run set to Cancelling
through the Prefect API while its batches are in flight stops the run in one line that
says the batches are left to finish at the provider, and `--resume` reads them, paying for
no request twice. `juryflow run --batch` as a real subprocess, the stand-in's batch APIs
over real HTTP with both SDKs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.states import Cancelling

from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.store import Store
from tests.test_batch_interrupts import (
    ITEMS,
    JUDGES,
    batch_stats,
    resume,
    start_run,
    wait_until,
)

pytestmark = [pytest.mark.usefixtures("prefect_harness")]


async def _cancel(flow_run_id: str) -> None:
    async with get_client() as client:
        await client.set_flow_run_state(UUID(flow_run_id), Cancelling(), force=True)


def test_a_cancellation_in_prefect_leaves_the_batches_for_resume(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.duckdb")
    with running_stub_server(StubConfig(batch_never_finishes=True)) as stub:
        child = start_run(tmp_path, stub.base_url, poll_seconds="0.05")
        wait_until(child, lambda: batch_stats(stub.base_url)["polls"] >= 2 * JUDGES)
        run_id = store.latest_run_id()
        assert run_id is not None
        run = store.get_run(run_id)
        assert run is not None and run.flow_run_id
        asyncio.run(_cancel(run.flow_run_id))
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 143, stderr
        lines = [line for line in stderr.strip().splitlines() if line.startswith("juryflow:")]
        assert len(lines) == 1, stderr
        [line] = lines
        assert line.startswith(f"juryflow: run {run_id} interrupted ("), line
        assert "0 judgments stored" in line
        assert (
            f"{JUDGES} batches are left running at the provider (not cancelled); --resume reads "
            f"their answers and pays for no request twice. Continue it with: juryflow run "
            f"--resume {run_id}" in line
        ), line
        assert "Traceback" not in stderr
        stats = batch_stats(stub.base_url)
        assert stats["batches_created"] == JUDGES and stats["cancels"] == 0
        assert stats["batch_requests"] == 0
        assert store.get_run(run_id).status == "interrupted"  # type: ignore[union-attr]

        stub.server.config.batch_never_finishes = False  # the provider gets to them
        resumed = resume(tmp_path, run_id)
        assert resumed.returncode == 0, resumed.stderr
        stats = batch_stats(stub.base_url)
    assert stats["batches_created"] == JUDGES  # no batch sent again
    assert stats["batch_requests"] == ITEMS * JUDGES  # each request answered once
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    assert len(store.judged_pairs(run_id)) == ITEMS * JUDGES
