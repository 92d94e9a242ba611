"""An LLM judge asked N times per item: each sample one call, the answer their reduction."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace

from juryflow.judges.breaker import CircuitBreaker
from juryflow.judges.budget import Budget
from juryflow.judges.llm_judge import CacheKeys, LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.sampling import known
from juryflow.judges.sampling.keys import reduced_cache_key, sample_cache_key
from juryflow.maths.records import Item, Judgment
from juryflow.maths.samples.reducers import reduce_samples, resolve_sample_reducer


def sample_reducer_of(spec: JudgeSpec, keys: CacheKeys) -> str:
    """The reducer of ``spec``'s samples: its ``sample_reducer``, or its kind's default."""
    return resolve_sample_reducer(spec.sample_reducer, keys.template.output_kind)


def from_cache(spec: JudgeSpec, keys: CacheKeys, item: Item, found: Judgment) -> Judgment:
    """A cached answer as a sample of ``spec`` on ``item`` (its own key kept)."""
    return replace(
        found,
        item_id=item.item_id,
        judge_id=spec.id,
        cached=True,
        provider=spec.provider,
        model=spec.model,
        prompt_name=keys.template.ref,
        prompt_hash=keys.template.sha256,
        verdict_threshold=keys.verdict_threshold,
        samples=(),
    )


def reduced(
    spec: JudgeSpec, keys: CacheKeys, item: Item, base_key: str, samples: Mapping[int, Judgment]
) -> Judgment:
    """The judge's judgment of ``item`` from its samples 0..N-1."""
    reducer = sample_reducer_of(spec, keys)
    ordered = [samples[index] for index in range(spec.samples)]
    text = item.text(keys.template.span_variable or "")
    key = reduced_cache_key(base_key, spec.samples, reducer)
    return reduce_samples(ordered, reducer, text, cache_key=key)


class SampledJudge(LLMJudge):
    """An :class:`LLMJudge` whose ``judge`` asks the model ``spec.samples`` times, calling
    only the samples the flow did not find in the cache (:mod:`.known`)."""

    async def judge(
        self,
        item: Item,
        breaker: CircuitBreaker | None = None,
        budget: Budget | None = None,
    ) -> Judgment:
        call = self.prepare(item)
        if isinstance(call, Judgment):
            return call  # the prompt cannot be rendered: no call, one unscored row
        base = str(call.common["cache_key"])
        samples = self.known_samples(item, base)
        missing = [index for index in range(self.spec.samples) if index not in samples]
        answers = await asyncio.gather(
            *(self.ask(item, index, breaker, budget) for index in missing),
            return_exceptions=True,
        )
        for index, answer in zip(missing, answers, strict=True):
            if isinstance(answer, BaseException):
                # BudgetReached included: the item is left whole for --resume, as an
                # unsampled judge's is (the samples answered are in no cache yet).
                raise answer
            samples[index] = self.sample(answer, index, base)
        return reduced(self.spec, self.keys, item, base, samples)

    def known_samples(self, item: Item, base_key: str) -> dict[int, Judgment]:
        """The samples of ``item`` the flow found in the cache (:mod:`.known`), taken."""
        return {
            index: from_cache(self.spec, self.keys, item, found)
            for index, found in known.take(base_key).items()
        }

    async def ask(
        self,
        item: Item,
        index: int,
        breaker: CircuitBreaker | None,
        budget: Budget | None,
    ) -> Judgment:
        """Sample ``index`` of ``item``: one call, of the item as that sample shows it (its
        answer as given: :meth:`sample` reads it back)."""
        return await LLMJudge.judge(self, self.shown(item, index), breaker, budget)

    def shown(self, item: Item, index: int) -> Item:
        """``item`` as sample ``index`` asks it (every sample the same prompt here)."""
        return item

    def read_back(self, answer: Judgment, index: int) -> Judgment:
        """Sample ``index``'s answer in the terms of ``item`` as it is (the same here)."""
        return answer

    def sample(self, answer: Judgment, index: int, base_key: str) -> Judgment:
        """The answer to sample ``index``'s call as the sample stored: read back, under its
        own cache key (``base_key``: the item's single-call key)."""
        return replace(self.read_back(answer, index), cache_key=sample_cache_key(base_key, index))
