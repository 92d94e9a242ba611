"""A chunk judges its items ``width`` at a time (flows/tasks.py ``_in_order``): the same
results as ``gather(..., return_exceptions=True)``, in item order, never more than ``width``
items started and not done, and a cancellation goes up."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.flows.tasks import _in_order
from juryflow.maths.records import Item, Judgment

# Generous budgets: these run on a loaded 2-core machine beside Prefect servers.
PROPERTY = settings(deadline=None, max_examples=60)


class Boom(Exception):
    pass


@PROPERTY
@given(
    outcomes=st.lists(st.tuples(st.booleans(), st.integers(0, 3)), max_size=40),
    width=st.integers(1, 12),
)
def test_results_are_gathers_in_item_order_width_at_a_time(
    outcomes: list[tuple[bool, int]], width: int
) -> None:
    items = [Item(f"i{n}", {}) for n in range(len(outcomes))]
    fails = {item.item_id: ok for item, (ok, _) in zip(items, outcomes, strict=True)}
    waits = {item.item_id: w for item, (_, w) in zip(items, outcomes, strict=True)}
    started: list[str] = []
    open_now = 0
    most_open = 0

    async def judge_one(item: Item) -> Judgment:
        nonlocal open_now, most_open
        started.append(item.item_id)
        open_now += 1
        most_open = max(most_open, open_now)
        try:
            for _ in range(waits[item.item_id]):
                await asyncio.sleep(0)
            if not fails[item.item_id]:
                raise Boom(item.item_id)
            return Judgment(item.item_id, "j", "score", 0.5)
        finally:
            open_now -= 1

    async def both() -> tuple[list[object], list[object]]:
        ours = await _in_order(judge_one, items, width)
        theirs = await asyncio.gather(*(judge_one(i) for i in items), return_exceptions=True)
        return list(ours), list(theirs)

    ours, theirs = asyncio.run(both())
    assert [_shown(r) for r in ours] == [_shown(r) for r in theirs]
    assert most_open <= max(width, len(items))  # gather's run opens them all
    assert started[: len(items)] == [i.item_id for i in items]  # taken in item order


def test_never_more_than_width_items_are_started_and_not_done() -> None:
    items = [Item(f"i{n}", {}) for n in range(50)]
    open_now = most_open = 0

    async def judge_one(item: Item) -> Judgment:
        nonlocal open_now, most_open
        open_now += 1
        most_open = max(most_open, open_now)
        await asyncio.sleep(0)
        open_now -= 1
        return Judgment(item.item_id, "j", "score", 0.0)

    results = asyncio.run(_in_order(judge_one, items, 7))
    assert most_open == 7
    assert [r.item_id for r in results if isinstance(r, Judgment)] == [i.item_id for i in items]


def test_a_cancellation_goes_up_and_stops_the_rest() -> None:
    items = [Item(f"i{n}", {}) for n in range(20)]
    started: list[str] = []

    async def judge_one(item: Item) -> Judgment:
        started.append(item.item_id)
        await asyncio.sleep(3600)
        raise AssertionError("never answered")

    async def run() -> None:
        task = asyncio.ensure_future(_in_order(judge_one, items, 4))
        while len(started) < 4:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert len(started) == 4  # no item taken after the cancellation


def _shown(result: object) -> object:
    if isinstance(result, Judgment):
        return ("judgment", result.item_id)
    return (type(result).__name__, str(result))
