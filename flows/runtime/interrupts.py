"""Stopping a run on request: Ctrl-C, SIGTERM, or a cancellation in Prefect.

Any of the three sets one flag that the flow acts on: it stops issuing calls, lets the
writes in progress finish, stores what completed, marks the run ``interrupted`` and says
how to resume. A second Ctrl-C or SIGTERM leaves at once: the journal holds every completed
judgment, and ``--resume`` stores it.

Prefect installs its own SIGTERM handler for a flow run; it raises wherever the main thread
happens to be, which tears the event loop down mid-write. While the run is judging, this
module's handlers (on the event loop, so they only set the flag) take its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar
from uuid import UUID

T = TypeVar("T")

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
PREFECT_CANCEL_EXIT_CODE = 143
"""A cancellation in Prefect ends like the SIGTERM a Prefect worker sends to cancel."""
CANCEL_POLL_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Interruption:
    cause: str
    """"SIGINT", "SIGTERM" or "cancelled in Prefect"."""
    exit_code: int


@dataclass(frozen=True, slots=True)
class InterruptedRun:
    """What the command line reports about a run that was stopped on request."""

    run_id: str | None
    interruption: Interruption
    message: str


class RunInterrupted(Exception):
    """Raised to the command line: print the message, exit with the code (130, 143)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


_outcomes: list[InterruptedRun] = []


def record(outcome: InterruptedRun) -> None:
    """Leave the outcome for the command line (the flow's return value is Prefect's)."""
    _outcomes.append(outcome)


def take() -> InterruptedRun | None:
    """The last interrupted run of this process, once."""
    found = _outcomes[-1] if _outcomes else None
    _outcomes.clear()
    return found


@functools.cache
def juryflow_command(absolute: bool = False) -> str:
    """How the user calls this juryflow again from here: ``juryflow`` when the shell finds
    this installation's script, else that script's path (a virtualenv that was never
    activated: ``.venv/bin/juryflow``, which a bare ``juryflow`` would not find; in full
    with ``absolute``, for a command that changes directory first), else this interpreter
    with ``-m juryflow``."""
    script = Path(sys.executable).parent / "juryflow"  # the venv's bin, not its target
    found = shutil.which("juryflow")
    if found is not None and Path(found).resolve() == script.resolve():
        return "juryflow"
    if script.is_file():
        shown = str(script) if absolute else os.path.relpath(script)
        return shlex.quote(shown if not shown.startswith("..") else str(script))
    return f"{shlex.quote(sys.executable)} -m juryflow"


def resume_hint(run_id: str, db: str) -> str:
    return f"juryflow run --resume {run_id} --db {shlex.quote(db)}"


_Handler = Any  # what signal.getsignal returns: a callable, an int, or None


class InterruptWatch:
    """Watches for the three requests to stop while a run judges; ``triggered`` is the flag.

    Use as ``async with InterruptWatch(flow_run_id) as watch``; ``await watch.run(work)``
    runs the work until it ends or a stop is requested (then it is cancelled, and awaited).
    """

    def __init__(
        self,
        flow_run_id: str | None,
        on_trigger: Callable[[], None] | None = None,
        poll_seconds: float = CANCEL_POLL_SECONDS,
    ) -> None:
        self.flow_run_id = flow_run_id
        self.on_trigger = on_trigger
        """Called once, at the first request (e.g. to end the run's waits for the store)."""
        self.poll_seconds = poll_seconds
        self.triggered = asyncio.Event()
        self.interruption: Interruption | None = None
        self.force_message = "juryflow: stopping at once"
        self._saved: dict[signal.Signals, _Handler] = {}
        self._poller: asyncio.Task[None] | None = None

    async def __aenter__(self) -> InterruptWatch:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for signum in EXIT_CODES:
                self._saved[signum] = signal.getsignal(signum)
                loop.add_signal_handler(signum, self._on_signal, signum)
        if self.flow_run_id:
            self._poller = asyncio.create_task(self._watch_prefect(UUID(self.flow_run_id)))
        early = pending()
        if early is not None:  # Ctrl-C as the run started: nothing is judged
            self.trigger(early)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.wait({self._poller})
            if not self._poller.cancelled() and self._poller.exception() is not None:
                # Watching Prefect is a courtesy: losing it must not fail a finished run.
                logging.getLogger(__name__).debug(
                    "the watch for cancellation in Prefect ended", exc_info=self._poller.exception()
                )
        loop = asyncio.get_running_loop()
        for signum, previous in self._saved.items():
            loop.remove_signal_handler(signum)
            if previous is not None:
                signal.signal(signum, previous)
        self._saved.clear()

    def trigger(self, interruption: Interruption) -> None:
        if self.interruption is None:
            self.interruption = interruption
            self.triggered.set()
            if self.on_trigger is not None:
                self.on_trigger()

    def _on_signal(self, signum: signal.Signals) -> None:
        if self.interruption is not None:
            # A second request: the user wants out now. Every completed judgment is in the
            # journal already; the owned Prefect server dies with this process.
            # (not print(): in a flow with log_prints it would become a dropped log record)
            sys.stderr.write(self.force_message + "\n")
            sys.stderr.flush()
            os._exit(EXIT_CODES[signum])
        self.trigger(Interruption(signum.name, EXIT_CODES[signum]))

    async def _watch_prefect(self, flow_run_id: UUID) -> None:
        """Poll the flow run's state: a cancellation in the UI or API sets Cancelling."""
        import httpx
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        async with get_client() as client:
            while not self.triggered.is_set():
                await asyncio.sleep(self.poll_seconds)
                try:
                    state = (await client.read_flow_run(flow_run_id)).state
                except (httpx.HTTPError, ObjectNotFound):
                    continue  # the server is busy or restarting: look again next time
                if state is not None and (state.is_cancelling() or state.is_cancelled()):
                    self.trigger(Interruption("cancelled in Prefect", PREFECT_CANCEL_EXIT_CODE))

    async def run(self, work: Coroutine[Any, Any, T]) -> T | None:
        """The work's result, or None if a stop was requested first (the work is cancelled
        and awaited, so that nothing it started is still running)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.triggered.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not task.done():
                task.cancel()
                # The work's own cleanup (cancelling its chunks, finishing a write) runs
                # now; its CancelledError is the expected end.
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            return None
        return task.result()


LEAVE_AFTER_SECONDS = 1.5
"""How long the command line lets a Ctrl-C before the flow unwind before it leaves anyway."""


_SIGINT_SEEN = threading.Event()


def sigint_seen() -> bool:
    """Has a Ctrl-C reached juryflow's handlers? A library may wrap the KeyboardInterrupt it
    raised in an error of its own (pydantic's serializer, in Prefect creating the flow
    run), which would otherwise read as a failure instead of the user's Ctrl-C."""
    return _SIGINT_SEEN.is_set()


def raise_on_sigint(signum: int, frame: FrameType | None) -> None:
    """Before the flow starts, Ctrl-C unwinds at once, wherever the main thread is."""
    _SIGINT_SEEN.set()
    raise KeyboardInterrupt


def _raise_and_leave_soon(signum: int, frame: FrameType | None) -> None:
    """The command line's Ctrl-C before the flow: unwind, and leave for sure.

    A KeyboardInterrupt raised wherever the main thread happens to be can be lost: in a
    finalizer it is only printed, and one that lands inside an import can leave the
    import's lock held, so that the next thread importing that module waits for good.
    If the process has not ended after ``LEAVE_AFTER_SECONDS``, it leaves at once (no call
    is made before the flow's watch begins, and completed judgments are journaled).
    """

    def leave() -> None:
        time.sleep(LEAVE_AFTER_SECONDS)
        sys.stderr.write("juryflow: interrupted (SIGINT); stopping at once\n")
        sys.stderr.flush()
        os._exit(EXIT_CODES[signal.SIGINT])

    _SIGINT_SEEN.set()
    threading.Thread(target=leave, name="juryflow-leave", daemon=True).start()
    raise KeyboardInterrupt


def honour_sigint() -> None:
    """The command line: Ctrl-C stops juryflow from now on, even where the shell started it
    with SIGINT ignored (a background job of a script); the judging's watch honours it too."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _raise_and_leave_soon)


def sigint_handled() -> bool:
    """Has juryflow put its own Ctrl-C handler in place (the command line has)?"""
    return signal.getsignal(signal.SIGINT) in (_raise_and_leave_soon, raise_on_sigint)


# A Ctrl-C between the start of the flow and the judging's watch. It cannot be raised
# where it lands: that is Prefect's engine creating the flow run, which absorbs a
# cancellation (``asyncio.run``'s own handler only cancels the flow's task, and the run
# went on to its end, every paid call made) and wraps a KeyboardInterrupt in its own
# errors. So it is recorded, the flow stops at its next step (before any call), and
# waits for the store end at once.
_pending: list[Interruption] = []
_pending_callbacks: list[Callable[[], None]] = []


def defer_sigint() -> None:
    """From now until the judging's watch takes over, record Ctrl-C instead of raising it."""
    _pending.clear()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _record_sigint)


def _record_sigint(signum: int, frame: FrameType | None) -> None:
    if _pending:  # a second Ctrl-C: the user wants out now, and no call has been made
        sys.stderr.write("juryflow: stopping at once\n")
        sys.stderr.flush()
        os._exit(EXIT_CODES[signal.SIGINT])
    _pending.append(Interruption("SIGINT", EXIT_CODES[signal.SIGINT]))
    for callback in list(_pending_callbacks):
        callback()


@contextlib.contextmanager
def on_pending(callback: Callable[[], None]) -> Iterator[None]:
    """Within the block, a recorded Ctrl-C also calls ``callback`` (to end a wait)."""
    _pending_callbacks.append(callback)
    try:
        yield
    finally:
        _pending_callbacks.remove(callback)


def pending() -> Interruption | None:
    """The Ctrl-C recorded before the judging's watch began, if any."""
    return _pending[0] if _pending else None


def stop_if_pending() -> None:
    """Stop the flow here (in its own code, not Prefect's) when a Ctrl-C was recorded."""
    if _pending:
        raise KeyboardInterrupt


def raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Outside the judging itself (Prefect starting or ending), SIGTERM ends like Ctrl-C."""
    raise SystemExit(EXIT_CODES[signal.SIGTERM])
