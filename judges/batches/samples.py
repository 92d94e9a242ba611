"""A judge's requests of one batch round: one per (item, sample), and its judgment of an
item once every sample's answer is read.

A judge asked once sends one request per item, and each answer is its judgment. A sampled
judge (``samples: N``; a pairwise judge's two orders) sends one request per sample, each
shown the item as that sample asks it (the answers swapped for a pairwise judge's second
order), and its judgment is their reduction, made as in real time once all N are read.
Samples found in the cache (:mod:`juryflow.judges.sampling.known`) are not sent again.

Only the reduction is journaled: a run stopped before an item's last sample was read reads
the item's batches again on ``--resume`` (a read costs nothing), so a sample is never paid
twice. A sample a batch left unanswered makes the reduction unscored with its reason, which
marks the item to be sent again; the samples answered go with it, so the store (and the
cache) keeps them and ``--resume`` sends only the missing one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from juryflow.judges.batches.records import RequestKey
from juryflow.judges.batches.resend import resendable
from juryflow.judges.llm_judge import LLMJudge, PreparedCall
from juryflow.judges.sampling.sampled_judge import SampledJudge, from_cache, reduced
from juryflow.maths.records import Item, Judgment


@dataclass(slots=True)
class RoundRequests:
    """One judge's requests of a round, by (item, sample), and the samples read so far."""

    judge: LLMJudge
    answered: dict[tuple[str, str], dict[int, Judgment]] = field(default_factory=dict)
    """Samples this run had read before ``--resume``, by (item, judge): taken, not sent."""
    calls: dict[RequestKey, PreparedCall] = field(default_factory=dict)
    _items: dict[str, tuple[Item, str]] = field(default_factory=dict)
    """A sampled judge's items, each with its single-call cache key."""
    _read: dict[str, dict[int, Judgment]] = field(default_factory=dict)

    def add(self, item: Item) -> Judgment | None:
        """Add ``item``'s requests; its judgment when none is needed (the prompt cannot be
        rendered, or every sample was found in the cache), else None."""
        judge = self.judge
        call = judge.prepare(item)
        if isinstance(call, Judgment):
            return call  # no prompt, no call
        if not isinstance(judge, SampledJudge):
            self.calls[(item.item_id, 0)] = call
            return None
        base = str(call.common["cache_key"])
        self._items[item.item_id] = (item, base)
        earlier = self.answered.pop((item.item_id, judge.spec.id), {})
        read = judge.known_samples(item, base) | {
            index: replace(from_cache(judge.spec, judge.keys, item, sample), cached=sample.cached)
            for index, sample in earlier.items()
        }
        self._read[item.item_id] = read
        for index in range(judge.spec.samples):
            if index in read:
                continue
            shown = call if index == 0 else judge.prepare(judge.shown(item, index))
            if isinstance(shown, Judgment):  # the same variables: rendered as sample 0 was
                read[index] = shown
            else:
                self.calls[(item.item_id, index)] = shown
        return self._reduced(item.item_id) if len(read) == judge.spec.samples else None

    def answer(self, key: RequestKey, judgment: Judgment) -> Judgment | None:
        """The judge's judgment of the item once ``judgment``, the answer to request
        ``key``, is its last sample read; None while some are still to read."""
        judge = self.judge
        if not isinstance(judge, SampledJudge):
            return judgment
        item_id, index = key
        _, base = self._items[item_id]
        read = self._read[item_id]
        read[index] = judge.sample(judgment, index, base)
        return self._reduced(item_id) if len(read) == judge.spec.samples else None

    def _reduced(self, item_id: str) -> Judgment:
        judge = self.judge
        assert isinstance(judge, SampledJudge)
        item, base = self._items[item_id]
        samples = self._read.pop(item_id)
        made = reduced(judge.spec, judge.keys, item, base, samples)
        batch_id = next((s.batch_id for s in made.samples if s.batch_id), None)
        again = [(i, s.unscored_reason) for i, s in sorted(samples.items()) if resendable(s)]
        if again:  # the item waits for --resume, which sends the missing sample only
            index, reason = again[0]
            made = replace(
                made,
                score=None,
                spans=(),
                reasoning=None,
                unscored_reason=f"sample {index}: {reason}",
            )
        return replace(made, batch_id=batch_id)
