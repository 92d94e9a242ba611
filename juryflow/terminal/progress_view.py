"""What a running `juryflow run` shows: a live bar on a terminal, plain lines elsewhere.

Both read one :class:`Tally` that the progress events keep; the events arrive on the flow's
event loop for every judgment, so handling one is a few additions, and all drawing happens
on a timer (rich's refresh thread, or :class:`PlainTicker`).
"""

from __future__ import annotations

import os
import threading
import time
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from juryflow.flows.runtime import progress
from juryflow.terminal.output import safe_text

SECONDS_VARIABLE = "JURYFLOW_PROGRESS_SECONDS"
DEFAULT_SECONDS = 5.0


class Tally:
    """Running counts of one run, as the progress events report them (mutable on purpose:
    it changes with every judgment)."""

    __slots__ = (
        "batches",
        "began",
        "cached",
        "cost_usd",
        "earlier",
        "items",
        "items_done",
        "judged",
        "judges",
        "skipped",
        "unscored",
    )

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.items: int | None = None
        self.judges = 1
        self.items_done = 0
        self.judged = 0
        self.skipped = 0
        self.earlier = 0
        self.unscored = 0
        self.cached = 0
        self.cost_usd = 0.0
        self.batches: dict[str, progress.BatchStatus] = {}
        """The run's provider batches (``--batch``), each as its last poll found it."""

    def take(self, event: progress.Event) -> None:
        if isinstance(event, progress.Judged):
            self.judged += event.count
            self.unscored += event.unscored
            self.cached += event.cached
            self.cost_usd += event.cost_usd
            if event.earlier:
                self.earlier += event.count
        elif isinstance(event, progress.ItemsDone):
            self.items_done += event.count
        elif isinstance(event, progress.Skipped):
            self.skipped += event.count
        elif isinstance(event, progress.BatchStatus):
            self.batches[event.batch_id] = event
        elif isinstance(event, progress.Total):
            self.items, self.judges = event.items, max(event.judges, 1)
        elif isinstance(event, progress.Started):
            self.began = time.monotonic()  # the time before (Prefect, planning) is not judging

    @property
    def judgments(self) -> int | None:
        return None if self.items is None else self.items * self.judges

    def rate(self) -> float:
        """Judgments per second made by this invocation (a resume's earlier ones left out)."""
        elapsed = time.monotonic() - self.began
        return (self.judged - self.earlier) / elapsed if elapsed > 0 else 0.0

    def eta_seconds(self) -> float | None:
        total, rate = self.judgments, self.rate()
        if total is None or rate <= 0:
            return None
        return max(total - self.judged - self.skipped, 0) / rate

    def line(self) -> str:
        """``judged 1,234/6,000 · 41.2/s · ETA 1m55s · $0.12 · unscored 3 · items 617/3,000``"""
        total = self.judgments
        done = f"judged {self.judged:,}" + ("" if total is None else f"/{total:,}")
        eta = self.eta_seconds()
        parts = [
            done,
            f"{self.rate():,.1f}/s",
            "ETA " + ("?" if eta is None else duration(eta)),
            money(self.cost_usd),
            f"unscored {self.unscored:,}",
        ]
        if self.cached:
            parts.append(f"cached {self.cached:,}")
        if self.skipped:
            parts.append(f"decided early {self.skipped:,}")
        if self.batches:
            parts.append(self.batch_line())
        # items count once their chunk is stored: what a --resume would not judge again
        items = f"items {self.items_done:,}" + ("" if self.items is None else f"/{self.items:,}")
        parts.append(items)
        return " · ".join(parts)

    def batch_line(self) -> str:
        """``batches 1 validating, 2 in progress, 1 completed (1,200/4,000 requests done)``"""
        states: dict[str, int] = {}
        for status in self.batches.values():
            states[status.state] = states.get(status.state, 0) + 1
        order = ("validating", "in_progress", "finalizing", "canceling")
        named = sorted(states, key=lambda s: (order.index(s) if s in order else len(order), s))
        counts = ", ".join(f"{states[s]} {s.replace('_', ' ')}" for s in named)
        done = sum(s.done for s in self.batches.values())
        total = sum(s.total for s in self.batches.values())
        return f"batches {counts} ({done:,}/{total:,} requests done)"


def duration(seconds: float) -> str:
    """``4s``, ``1m55s``, ``2h03m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def money(usd: float | None) -> str:
    """Dollars with cents, or with four decimals for amounts under a cent (stub-sized runs)."""
    if usd is None:
        return "n/a"
    return f"${usd:.4f}" if 0 < usd < 0.01 else f"${usd:,.2f}"


def started_line(event: progress.Started, origin: str | None = None) -> str:
    """``run ID · store PATH · flow run ID``, with ``origin`` (say, the folder's panel file)
    after the run id when the user did not name it, and what ``--workers auto`` chose."""
    where = event.flow_run_url or (
        f"flow run {event.flow_run_id}" if event.flow_run_id else "no Prefect flow run"
    )
    named = f" · {origin}" if origin else ""
    workers = f" · {event.workers}" if event.workers else ""
    return safe_text(
        f"run {event.run_id}{named} · store {event.store}{workers} · {where}", one_line=True
    )


def progress_seconds(warn: IO[str]) -> float:
    """The plain-line interval: ``JURYFLOW_PROGRESS_SECONDS`` if set to a positive number."""
    raw = os.environ.get(SECONDS_VARIABLE)
    if raw is None:
        return DEFAULT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        warn.write(
            f"warning: {SECONDS_VARIABLE}={safe_text(raw, one_line=True)} is not a positive "
            f"number of seconds; progress lines come every {DEFAULT_SECONDS:g} s\n"
        )
        return DEFAULT_SECONDS
    return seconds


class _TallyColumn(ProgressColumn):
    def __init__(self, tally: Tally) -> None:
        super().__init__()
        self.tally = tally

    def render(self, task: Task) -> Text:
        return Text(self.tally.line())


def live_bar(console: Console, tally: Tally, redirect_stderr: bool) -> Progress:
    """The terminal's bar; its task's ``completed`` is the judgments done."""
    return Progress(
        TextColumn("[bold]judging"),
        BarColumn(bar_width=20),  # the figures beside it need the width more
        _TallyColumn(tally),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        redirect_stderr=redirect_stderr,
    )


class PlainTicker:
    """One progress line every few seconds on ``out``, from a thread, for logs and CI."""

    def __init__(self, tally: Tally, out: IO[str], seconds: float) -> None:
        self.tally = tally
        self.out = out
        self.seconds = seconds
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="juryflow-progress", daemon=True)
        self.started = False

    def start(self) -> None:
        """Lines begin once the run has started (its id printed); called from the listener."""
        if not self.started:
            self.started = True
            self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.seconds):
            self.write(self.tally.line())

    def write(self, line: str) -> None:
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) must not end the run
            self.stop.set()

    def close(self) -> None:
        """Stop the lines, ending with one for the final counts (a short run has no other)."""
        if not self.started:
            return
        stopped_already = self.stop.is_set()
        self.stop.set()
        self.thread.join(timeout=2 * self.seconds + 1)
        if not stopped_already:
            self.write(self.tally.line())
