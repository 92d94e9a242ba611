"""Run the `evaluate` flow from the command line, with a progress bar."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flows import interrupts, progress


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
    """Run the flow; raises :class:`interrupts.RunInterrupted` when it was stopped."""
    if threading.current_thread() is not threading.main_thread():
        return _run_evaluation(console, parameters, dask)
    # Until the flow's own handlers take over (and after), SIGTERM ends juryflow as Ctrl-C
    # does: by unwinding, so that the Prefect server it started is stopped too.
    previous = signal.signal(signal.SIGTERM, interrupts.raise_on_sigterm)
    try:
        return _run_evaluation(console, parameters, dask)
    except KeyboardInterrupt:
        raise _interrupted(signal.SIGINT) from None
    except SystemExit as leaving:
        if leaving.code == interrupts.EXIT_CODES[signal.SIGTERM]:
            raise _interrupted(signal.SIGTERM) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(signum: signal.Signals) -> interrupts.RunInterrupted:
    stopped = interrupts.take()
    if stopped is not None:
        return interrupts.RunInterrupted(stopped.message, stopped.interruption.exit_code)
    return interrupts.RunInterrupted(
        f"juryflow: interrupted ({signum.name}) outside the judging; a run it had started "
        'shows in `juryflow sql "SELECT run_id, status FROM runs"`, and continues with '
        "`juryflow run --resume RUN`",
        interrupts.EXIT_CODES[signum],
    )


def _run_evaluation(
    console: Console, parameters: dict[str, Any], dask: str | None
) -> dict[str, Any]:
    from prefect.exceptions import CancelledRun

    from flows.prefect_server import start_owned_server

    flow = _with_task_runner(dask)
    start_owned_server()
    bar = Progress(
        TextColumn("[bold]judging"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("items · {task.fields[judged]} judgments"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        # On a terminal, stderr lines (a wait for the store, say) print above the bar; when
        # stderr is a file or a pipe they must stay in it, not move to stdout.
        redirect_stderr=sys.stderr.isatty(),
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
    except CancelledRun as cancelled:
        stopped = interrupts.take()
        if stopped is None:  # cancelled in Prefect before the run's watch began
            raise interrupts.RunInterrupted(
                f"juryflow: the flow run was cancelled: {cancelled}",
                interrupts.PREFECT_CANCEL_EXIT_CODE,
            ) from None
        raise interrupts.RunInterrupted(stopped.message, stopped.interruption.exit_code) from None
    finally:
        progress.remove_listener(listen)
    return result
