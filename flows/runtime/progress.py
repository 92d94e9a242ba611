"""A process-wide progress hook: the CLI listens, the flow reports. Never part of results.

Events are emitted where the work happens (a judgment completes inside the chunk task), so
listeners must be cheap: they run on the event loop between model calls. Tasks that run in
another process (Dask workers) emit nothing there; the flow reports their chunks whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from juryflow.maths.records import Judgment


@dataclass(frozen=True, slots=True)
class Started:
    """The run exists: what a user needs at once to find it again (``--resume``)."""

    run_id: str
    store: str
    flow_run_id: str | None
    flow_run_url: str | None
    workers: str | None = None
    """How many processes make the calls and why, when ``--workers auto`` chose it."""


@dataclass(frozen=True, slots=True)
class Total:
    """The dataset's row count (approximate for text formats) and the panel's size."""

    items: int
    judges: int


@dataclass(frozen=True, slots=True)
class Judged:
    """Judgments that completed: how many, what they cost, how many were unscored or cached."""

    count: int
    cost_usd: float = 0.0
    unscored: int = 0
    cached: int = 0
    earlier: bool = False
    """Judged before this invocation (the run is resumed): done, but not work done now."""


@dataclass(frozen=True, slots=True)
class ItemsDone:
    """Items whose chunk was written to the store."""

    count: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """Judges early stopping left out because the items were already decided: no call."""

    count: int


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """Where one of the run's provider batches stands (``--batch``), at each of its polls."""

    judge_id: str
    batch_id: str
    state: str
    """validating, in_progress, finalizing, canceling, or an end: completed, expired, ..."""
    done: int
    """Requests the provider has answered (or failed) so far."""
    total: int

    @property
    def ended(self) -> bool:
        return self.state in ("completed", "canceled", "expired", "failed")


Event = Started | Total | Judged | ItemsDone | Skipped | BatchStatus
Listener = Callable[[Event], None]

_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def emit(event: Event) -> None:
    for listener in list(_listeners):
        listener(event)


def judged(judgments: Iterable[Judgment]) -> None:
    """Report completed judgments (one, or a chunk's worth)."""
    if not _listeners:  # the common case outside the command line: no work at all
        return
    count = unscored = cached = 0
    cost = 0.0
    for judgment in judgments:
        count += 1
        unscored += judgment.score is None
        if judgment.cached:
            cached += 1
        elif judgment.usage.cost_usd is not None:
            # a judgment reused from the cache cost nothing in this run
            cost += judgment.usage.cost_usd
    if count:
        emit(Judged(count, cost, unscored, cached))


def report(event: str, count: int) -> None:
    """The older two-argument form: ``'total'`` (items), ``'judged'``, ``'items_done'``."""
    if event == "total":
        emit(Total(count, 1))
    elif event == "judged":
        emit(Judged(count))
    elif event == "items_done":
        emit(ItemsDone(count))


def started(run_id: str, store: str, flow_run_id: str | None, workers: str | None = None) -> None:
    """Report the run's start, with the flow run's page in the Prefect UI when there is one."""
    if _listeners:
        emit(Started(run_id, store, flow_run_id, _flow_run_url(flow_run_id), workers))


def _flow_run_url(flow_run_id: str | None) -> str | None:
    if flow_run_id is None:
        return None
    from prefect.utilities.urls import url_for

    # None without a UI URL (juryflow's own ephemeral server serves no UI): the id it is
    return url_for("flow-run", obj_id=flow_run_id)
