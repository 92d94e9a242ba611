"""An LLM judge's items pass one gate per judge and event loop before their prompt is
rendered (flows/tasks.py ``admission_for``): twice the judge's concurrency at a time, in
arrival order across chunks, so chunks finish one after the other."""

from __future__ import annotations

import asyncio

from juryflow.flows.tasks import ADMITTED_PER_PERMIT, admission_for
from juryflow.judges.panel import JudgeSpec


def _spec(concurrency: int) -> JudgeSpec:
    return JudgeSpec(
        id="j", provider="openai", model="m", prompt="data2txt_spans", max_concurrency=concurrency
    )


def test_one_gate_per_judge_and_loop_twice_its_concurrency_wide() -> None:
    async def gates() -> tuple[asyncio.Semaphore, asyncio.Semaphore, asyncio.Semaphore, int]:
        first = admission_for(_spec(4))
        width = 0
        while not first.locked():
            await first.acquire()
            width += 1
        for _ in range(width):
            first.release()
        return first, admission_for(_spec(4)), admission_for(_spec(5)), width

    first, again, other, width = asyncio.run(gates())
    assert first is again and first is not other
    assert width == ADMITTED_PER_PERMIT * 4
    later = asyncio.run(gates())[0]
    assert later is not first  # another loop, another gate


def test_chunks_queued_at_the_gate_are_admitted_in_arrival_order() -> None:
    """Two chunks of 10 items behind a gate of 4: every item of the first chunk is admitted
    before any of the second, so the first chunk ends first (the flow's pipeline never
    waits for several chunks ending together)."""
    admitted: list[str] = []

    async def run() -> None:
        gate = admission_for(_spec(2))

        async def item(name: str) -> None:
            async with gate:
                admitted.append(name)
                await asyncio.sleep(0)

        first = asyncio.gather(*(item(f"a{n}") for n in range(10)))
        second = asyncio.gather(*(item(f"b{n}") for n in range(10)))
        await asyncio.gather(first, second)

    asyncio.run(run())
    assert admitted == [f"a{n}" for n in range(10)] + [f"b{n}" for n in range(10)]
