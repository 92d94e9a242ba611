"""Run the `evaluate` flow from the command line, with a progress bar."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import Progress
from rich.text import Text

from juryflow.flows.runtime import interrupts, progress
from juryflow.terminal.progress_view import (
    PlainTicker,
    Tally,
    live_bar,
    progress_seconds,
    started_line,
)

if TYPE_CHECKING:
    from juryflow.planning.run_request import RunRequest


def _with_task_runner(dask: str | None) -> Any:
    from juryflow.flows.evaluate import evaluate

    if dask is None:
        return evaluate
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as missing:  # the extra is optional; the quick start does without it
        raise RuntimeError(
            f"--dask needs prefect-dask and distributed ({missing.name or 'prefect_dask'} is "
            "not installed): pip install 'juryflow[dask]', or run without --dask"
        ) from None

    runner: Any = DaskTaskRunner() if dask == "local" else DaskTaskRunner(address=dask)
    return evaluate.with_options(task_runner=runner)


def run_evaluation(
    console: Console, request: RunRequest, origin: str | None = None
) -> dict[str, Any]:
    """Run the flow; raises :class:`interrupts.RunInterrupted` when it was stopped.

    ``origin``: where the run's settings came from when the user did not name them (the
    folder's ``panel.yaml``), said in the start line."""
    if threading.current_thread() is not threading.main_thread():
        return _run_evaluation(console, request, origin)
    # Until the flow's own handlers take over (and after), SIGTERM ends juryflow as Ctrl-C
    # does: by unwinding, so that the Prefect server it started is stopped too.
    previous = signal.signal(signal.SIGTERM, interrupts.raise_on_sigterm)
    previous_sigint = signal.getsignal(signal.SIGINT)
    if not interrupts.sigint_handled():
        signal.signal(signal.SIGINT, interrupts.raise_on_sigint)
    try:
        return _run_evaluation(console, request, origin)
    except KeyboardInterrupt:
        raise _interrupted(signal.SIGINT) from None
    except SystemExit as leaving:
        if leaving.code == interrupts.EXIT_CODES[signal.SIGTERM]:
            raise _interrupted(signal.SIGTERM) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interrupted(signum: signal.Signals) -> interrupts.RunInterrupted:
    stopped = interrupts.take()
    if stopped is not None:
        return interrupts.RunInterrupted(stopped.message, stopped.interruption.exit_code)
    # Raised before the flow began (no run row yet) or after its end (the row is final).
    return interrupts.RunInterrupted(
        f"juryflow: interrupted ({signum.name}) outside the judging; `juryflow runs` shows "
        "where each run stands, and `juryflow run --resume RUN` continues one",
        interrupts.EXIT_CODES[signum],
    )


def _run_evaluation(console: Console, request: RunRequest, origin: str | None) -> dict[str, Any]:
    from prefect.exceptions import CancelledRun

    from juryflow.flows.runtime.prefect_server import start_owned_server

    flow = _with_task_runner(request.dask)
    start_owned_server()
    tally = Tally()
    if console.is_terminal:
        # On a terminal, stderr lines (a wait for the store, say) print above the bar; when
        # stderr is a file or a pipe they must stay in it, not move to stdout.
        bar: Progress | None = live_bar(console, tally, redirect_stderr=sys.stderr.isatty())
        ticker = None
    else:
        bar = None
        ticker = PlainTicker(tally, sys.stderr, progress_seconds(sys.stderr))
    listen = _listener(tally, bar, ticker, origin)
    progress.add_listener(listen)
    try:
        with bar if bar is not None else contextlib.nullcontext():
            before = signal.getsignal(signal.SIGINT) if _main_thread() else None
            interrupts.defer_sigint()
            try:
                result: dict[str, Any] = asyncio.run(flow(request))
            finally:
                if before is not None:
                    signal.signal(signal.SIGINT, before)
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
        if ticker is not None:
            ticker.close()
    return result


def _listener(
    tally: Tally, bar: Progress | None, ticker: PlainTicker | None, origin: str | None = None
) -> progress.Listener:
    task = bar.add_task("judgments", total=None) if bar is not None else None

    def listen(event: progress.Event) -> None:
        tally.take(event)
        if isinstance(event, progress.Started):
            line = started_line(event, origin)
            if bar is not None:
                bar.console.print(Text(line), soft_wrap=True)
            if ticker is not None:
                ticker.write(line)
                ticker.start()
        elif bar is not None and task is not None:
            bar.update(task, completed=tally.judged, total=tally.judgments)

    return listen
