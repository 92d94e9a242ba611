"""A judge's answers from the judgment cache; a sampled judge's (``samples: N > 1``) each
sample by its own key.

An item whose N samples are all cached is reduced here and called no more; one with some of
them cached leaves those for the judge (:mod:`juryflow.judges.sampling.known`), which calls
only the others; with ``--workers`` they travel to the worker with the items
(:func:`left_for_workers`). Sample 0's key is the key of a judge asked once, so earlier
caches count.
"""

from __future__ import annotations

import asyncio
import dataclasses

from juryflow.judges.llm_judge import CacheKeys
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.sampling import known
from juryflow.judges.sampling.keys import sample_cache_key
from juryflow.judges.sampling.sampled_judge import from_cache, reduced
from juryflow.maths.records import Item, Judgment
from juryflow.planning.run_setup import RunPlan
from juryflow.storage.store import Store


async def cached_answers(
    plan: RunPlan, spec: JudgeSpec, items: list[Item], local: bool
) -> list[Judgment]:
    """``spec``'s answers to ``items`` found in the cache (none when the run uses none);
    ``local``: the judges run in this process or its ``--workers`` (see
    :func:`cached_sampled`)."""
    # Keys without a judge: with --workers this process makes no call (nor imports SDKs).
    keyer = CacheKeys.of(spec)
    if not plan.use_cache or keyer is None or not items:
        return []
    if spec.samples > 1:
        return await cached_sampled(plan.store, spec, keyer, items, local)
    keys = {item.item_id: keyer.cache_key(item) for item in items}
    found = await asyncio.to_thread(plan.store.cached_judgments, list(keys.values()))
    answers = [
        dataclasses.replace(
            found[key],
            item_id=item_id,
            judge_id=spec.id,
            cached=True,
            verdict_threshold=keyer.verdict_threshold,
        )
        for item_id, key in keys.items()
        if key in found
    ]
    # The first sample of a sampled judge's run answered this very call.
    missing = [item for item in items if keys[item.item_id] not in found]
    if missing:
        first = await asyncio.to_thread(
            plan.store.cached_samples, [keys[i.item_id] for i in missing]
        )
        answers += [
            from_cache(spec, keyer, item, first[keys[item.item_id]])
            for item in missing
            if keys[item.item_id] in first
        ]
    return answers


async def cached_sampled(
    store: Store, spec: JudgeSpec, keyer: CacheKeys, items: list[Item], local: bool
) -> list[Judgment]:
    """The reduced judgments of the items whose every sample is cached; ``local``: the
    judge runs in this process (or gets them from :func:`left_for_workers`), so the partly
    cached items' samples are left for it."""
    bases = {item.item_id: keyer.cache_key(item) for item in items}
    keys = [sample_cache_key(base, k) for base in bases.values() for k in range(spec.samples)]
    found = await asyncio.to_thread(store.cached_samples, keys)
    complete: list[Judgment] = []
    for item in items:
        base = bases[item.item_id]
        samples = {
            k: from_cache(spec, keyer, item, found[key])
            for k in range(spec.samples)
            if (key := sample_cache_key(base, k)) in found
        }
        if len(samples) == spec.samples:
            complete.append(reduced(spec, keyer, item, base, samples))
        elif local:
            known.offer(base, samples)
    return complete


def left_for_workers(spec: JudgeSpec, items: list[Item]) -> dict[str, dict[int, Judgment]]:
    """The cached samples left for ``items`` (by their single-call cache key), taken from
    this process to go with the items to a ``--workers`` process, which offers them to its
    own judge: a partly cached item costs only its missing samples there too."""
    keyer = CacheKeys.of(spec)
    if spec.samples <= 1 or keyer is None:
        return {}
    taken = {key: known.take(key) for key in (keyer.cache_key(item) for item in items)}
    return {key: samples for key, samples in taken.items() if samples}
