"""The 429 answers of a run's LLM judges: counted where the calls were made (the breakers of
this process, the replies of ``--workers`` processes) and kept in the store at the end of
every invocation, so that a resumed run's summary counts every invocation's."""

from __future__ import annotations

from juryflow.flows.chunks import ChunkRunner
from juryflow.judges.breaker import breaker_for
from juryflow.planning.run_setup import RunPlan

RateLimited = dict[str, int] | None
"""429 answers per LLM judge; None when Dask workers made the calls (their counts stay there)."""


async def close_counting(plan: RunPlan, runner: ChunkRunner, cancel: bool = True) -> RateLimited:
    """``runner.close(cancel)``, and the 429 answers per LLM judge since the last count.

    Counted once: the breakers are read before ``close()`` forgets them (a later count
    meets new ones, at zero) and the workers' reports are taken from their pool.
    """
    judges = [spec for spec in plan.panel.judges if spec.provider != "offline"]
    counts = {spec.id: breaker_for(plan.run_id, spec).rate_limited for spec in judges}
    await runner.close(cancel=cancel)
    if runner.distributed:
        return None
    if runner.pool is not None:
        for judge, answers in runner.pool.take_rate_limited().items():
            if judge in counts:
                counts[judge] += answers
    return counts


def keep(plan: RunPlan, counts: RateLimited) -> None:
    """Add this invocation's counts to the run's (or shard's) in the store."""
    if counts:
        plan.store.add_rate_limited(plan.run_id, counts)


def run_total(plan: RunPlan, counts: RateLimited) -> RateLimited:
    """What the summary shows: every invocation's 429 answers, per LLM judge in panel order;
    None when this invocation's were not counted (Dask)."""
    if counts is None:
        return None
    stored = plan.store.rate_limited(plan.run_id)
    return {judge: stored.get(judge, 0) for judge in counts}
