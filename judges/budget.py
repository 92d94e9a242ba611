"""A run's spending limit (``--max-cost USD``): pure accounting, no I/O.

A model call starts only if the money spent, the expected cost of the calls in flight and
its own expected cost fit under the limit (a reservation, released with the call's real
cost when it returns); otherwise no new call starts, and the items not yet judged are left
for ``--resume`` (never stored as unscored). Without reservations the calls in flight when
the limit was reached all finished past it: a 60-item run with ``--max-cost 0.05`` spent
$0.0919 (issue 43). Now the overshoot is only what the calls in flight cost beyond their
estimates (a call's estimate: its prompt at ~4 characters a token and its judge's mean
output so far), or one call alone past it when even one call's estimate does not fit.

Thread-safe rather than asyncio-only, like the limiters: a process may judge on several
event loops. The budget is per process: Dask workers would each keep their own tally, so
``--max-cost`` is refused with ``--dask``.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from juryflow.judges.panel import PanelSpec
from juryflow.judges.pricing import price_for
from juryflow.judges.providers.price import Price

ADMIT_POLL_SECONDS = 0.02
"""How often a call waiting for the calls in flight to return looks again (only near the
end of a budget: before then every call fits at once)."""

EXPECTED_OUTPUT_TOKENS = 300
"""Output tokens of a call whose judge has not answered yet: a guess at a JSON answer with
short reasoning and a few spans (the dry run's guess too)."""

BUDGET_EXIT_CODE = 3
"""The command line's exit code for a run stopped by ``--max-cost`` (resumable)."""


class BudgetError(ValueError):
    """``--max-cost`` cannot be enforced as asked; the message names the fix."""


class BudgetReached(Exception):
    """Raised instead of starting a call once the budget is spent: the item stays unjudged."""


@dataclass(frozen=True, slots=True)
class BudgetState:
    max_usd: float
    spent_usd: float
    calls: int
    """Calls that were let start (retries included)."""
    refused: int
    """Calls that were not started because the budget was spent."""
    in_flight: int
    in_flight_at_reach: int | None
    """Calls still running when the spending first reached the limit (their cost is the
    overshoot); None while it has not."""
    largest_call_usd: float
    reserved_usd: float = 0.0
    """The expected cost of the calls in flight."""

    @property
    def reached(self) -> bool:
        """The money is spent, or a call was refused as it would not have fitted."""
        return self.spent_usd >= self.max_usd or self.refused > 0


class Budget:
    """``start()`` before a call (raises :class:`BudgetReached`), ``finish(cost)`` after it."""

    def __init__(self, max_usd: float) -> None:
        check_max_cost(max_usd)
        self.max_usd = float(max_usd)
        self._lock = threading.Lock()
        self._spent = 0.0
        self._calls = 0
        self._refused = 0
        self._in_flight = 0
        self._in_flight_at_reach: int | None = None
        self._largest = 0.0
        self._reserved = 0.0

    @property
    def reached(self) -> bool:
        """The money is spent, or a call was refused as it would not have fitted: the run
        stops either way, and a call refused now is not followed by a cheaper one."""
        with self._lock:
            return self._spent >= self.max_usd or self._refused > 0

    def start(self, estimate_usd: float = 0.0) -> None:
        """Let a call expected to cost ``estimate_usd`` start, reserving that much, or raise
        :class:`BudgetReached` when it would not fit beside what is spent and reserved."""
        if not self._try_start(estimate_usd, wait=False):
            raise BudgetReached(f"budget of ${self.max_usd:g} reached")

    async def admit(self, estimate_usd: float) -> None:
        """:meth:`start` for a call that may wait: while calls in flight hold reservations
        it would not fit beside, it waits for them to return (their real cost is usually
        below their estimate), so that the run spends up to the limit, not stops short of
        it. Alone in flight, it starts while money is left; refused (:class:`BudgetReached`)
        once the money is spent."""
        while not self._try_start(estimate_usd, wait=True):
            await asyncio.sleep(ADMIT_POLL_SECONDS)

    def _try_start(self, estimate_usd: float, *, wait: bool) -> bool:
        """True when the call starts; False when it should wait; raises when refused."""
        estimate = max(estimate_usd, 0.0)
        with self._lock:
            # Alone, a call may start while money is left even if its estimate passes the
            # limit (a budget under one call's guess would otherwise judge nothing): the
            # run then ends at most one call past the limit.
            fits = (
                self._spent + self._reserved + estimate <= self.max_usd
                or estimate == 0
                or self._in_flight == 0
            )
            if self._spent < self.max_usd and fits:
                self._calls += 1
                self._in_flight += 1
                self._reserved += estimate
                return True
            if wait and self._spent < self.max_usd and self._in_flight > 0:
                return False
            self._refused += 1
        raise BudgetReached(f"budget of ${self.max_usd:g} reached")

    def finish(self, cost_usd: float, estimate_usd: float = 0.0) -> None:
        """The call that ``start`` let through (reserving ``estimate_usd``) ended and cost
        ``cost_usd`` (0 if it failed)."""
        with self._lock:
            self._in_flight -= 1
            self._reserved = max(self._reserved - max(estimate_usd, 0.0), 0.0)
            was_below = self._spent < self.max_usd
            self._spent += max(cost_usd, 0.0)
            self._largest = max(self._largest, cost_usd)
            if was_below and self._spent >= self.max_usd:
                self._in_flight_at_reach = self._in_flight

    def state(self) -> BudgetState:
        with self._lock:
            return BudgetState(
                max_usd=self.max_usd,
                spent_usd=self._spent,
                calls=self._calls,
                refused=self._refused,
                in_flight=self._in_flight,
                in_flight_at_reach=self._in_flight_at_reach,
                largest_call_usd=self._largest,
                reserved_usd=self._reserved,
            )


def check_max_cost(max_usd: float) -> None:
    if not math.isfinite(max_usd) or max_usd <= 0:
        raise BudgetError(f"--max-cost {max_usd}: give a positive amount of US dollars")


def check_enforceable(
    panel: PanelSpec, max_usd: float, *, distributed: bool, resumed: bool = False
) -> None:
    """Refuse a budget that could not be kept: no price for a model, or spread over Dask."""
    check_max_cost(max_usd)
    if distributed:
        raise BudgetError(
            "--max-cost cannot be kept across Dask workers (each process would count only "
            "its own calls): drop --dask or --max-cost"
        )
    missing = unpriced_models(panel, panel.prices)
    if missing:
        judge_id, model = missing[0]
        fix = (
            "resume without --max-cost (the run keeps the panel it started with)"
            if resumed
            else f"add it to the panel file: prices: {{{model}: {{input: USD, output: USD}}}} "
            "(per million tokens)"
        )
        raise BudgetError(
            f"--max-cost needs a price for every model, and judge {judge_id!r}'s model "
            f"{model!r} has none: {fix}"
        )


def unpriced_models(panel: PanelSpec, prices: Mapping[str, Price]) -> list[tuple[str, str]]:
    """(judge id, model) of every model judge whose price is unknown."""
    return [
        (spec.id, spec.model)
        for spec in panel.judges
        if spec.provider != "offline"
        and spec.model is not None
        and price_for(spec.model, prices) is None
    ]


_registry_lock = threading.Lock()
_registry: dict[str, Budget] = {}


def set_budget(run_id: str, budget: Budget | None) -> None:
    """The budget of ``run_id`` in this process (None: no limit), seen by every chunk."""
    with _registry_lock:
        if budget is None:
            _registry.pop(run_id, None)
        else:
            _registry[run_id] = budget


def budget_of(run_id: str | None) -> Budget | None:
    if run_id is None:
        return None
    with _registry_lock:
        return _registry.get(run_id)
