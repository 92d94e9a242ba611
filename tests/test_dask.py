"""Chunk tasks on a local Dask cluster; only the flow process writes to DuckDB."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from juryflow.planning.run_request import RunRequest
from tests.conftest import SAMPLE

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.mark.slow
def test_chunk_tasks_run_on_a_local_dask_cluster(db_path: Path, tmp_path: Path) -> None:
    prefect_dask = pytest.importorskip("prefect_dask")
    from juryflow.flows.evaluate import evaluate

    subset = tmp_path / "subset.jsonl"
    subset.write_text(
        "".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:24]),
        encoding="utf-8",
    )
    runner: Any = prefect_dask.DaskTaskRunner(
        cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": True}
    )
    flow = evaluate.with_options(task_runner=runner)
    summary = asyncio.run(
        # dask: the chunk tasks go to the task runner's workers (this one, a local cluster)
        flow(RunRequest(dataset=str(subset), db=str(db_path), chunk_size=8, dask="local"))
    )
    assert summary["items"] == 24 and summary["judgments"] == 72
    local = asyncio.run(evaluate(RunRequest(dataset=str(subset), db=str(db_path), chunk_size=8)))
    from juryflow.storage.store import Store

    _, rows = Store(db_path).query(
        "SELECT a.item_id, a.judge_id, a.score = b.score, "
        "a.raw_output IS NOT DISTINCT FROM b.raw_output FROM judgments a JOIN judgments b "
        "USING (item_id, judge_id) WHERE a.run_id = ? AND b.run_id = ?",
        [summary["run_id"], local["run_id"]],
    )
    assert len(rows) == 72 and all(r[2] and r[3] for r in rows)
