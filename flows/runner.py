"""Run the `evaluate` flow from the command line, with a progress bar."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flows import progress


def _with_task_runner(dask: str | None) -> Any:
    from flows.evaluate import evaluate

    if dask is None:
        return evaluate
    from prefect_dask import DaskTaskRunner

    runner: Any = DaskTaskRunner() if dask == "local" else DaskTaskRunner(address=dask)
    return evaluate.with_options(task_runner=runner)


def run_evaluation(
    console: Console, parameters: dict[str, Any], dask: str | None
) -> dict[str, Any]:
    flow = _with_task_runner(dask)
    bar = Progress(
        TextColumn("[bold]judging"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("items · {task.fields[judged]} judgments"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    task = bar.add_task("items", total=None, judged=0)

    def listen(event: str, count: int) -> None:
        if event == "total":
            bar.update(task, total=count)
        elif event == "items_done":
            bar.advance(task, count)
        elif event == "judged":
            judged = bar.tasks[0].fields["judged"] + count
            bar.update(task, judged=judged)

    progress.add_listener(listen)
    try:
        with bar:
            result: dict[str, Any] = asyncio.run(flow(**parameters, distributed=dask is not None))
    finally:
        progress.remove_listener(listen)
    return result
