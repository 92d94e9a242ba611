"""A pairwise judge: answers A and B of one item, asked once in each order.

LLM judges favour a position, so a preference is only the judge's view of the *content* when
it survives the swap. Sample 0 shows the item as it is (A first); sample 1 shows it with
``response_a`` and ``response_b`` (and ``model_a`` / ``model_b``, when present) swapped,
and its answer is mapped back to the original labels before it is stored, so both samples
speak of the same A and B (the model's raw text, kept in ``raw_output``, still names the
answer it saw first "A"). The two become the judge's item verdict by the ``both_orders``
sample reducer (:mod:`juryflow.maths.samples.reducers`): the verdict both give, or unscored
``inconsistent``. Caching, budgets and retries are the sampled judge's: each order has its
own cache key, and the second order is never skipped (it is the measurement).
"""

from __future__ import annotations

from dataclasses import replace

from juryflow.judges.sampling.sampled_judge import SampledJudge
from juryflow.maths.records import Item, Judgment

SWAPPED = (("response_a", "response_b"), ("model_a", "model_b"))
"""The item variables exchanged to show B first."""


def swapped(item: Item) -> Item:
    """``item`` with its two answers (and their models' names) exchanged."""
    values = dict(item.variables)
    for a, b in SWAPPED:
        if a in values and b in values:
            values[a], values[b] = values[b], values[a]
    return replace(item, variables=values)


def mapped_back(answer: Judgment) -> Judgment:
    """An answer given with B shown first, in the original labels: B's share of the win is
    one minus the first-shown answer's."""
    if answer.score is None:
        return answer
    return replace(answer, score=1.0 - answer.score)


class PairwiseJudge(SampledJudge):
    """A :class:`SampledJudge` of two samples whose second shows the answers swapped."""

    def shown(self, item: Item, index: int) -> Item:
        return item if index == 0 else swapped(item)

    def read_back(self, answer: Judgment, index: int) -> Judgment:
        return answer if index == 0 else mapped_back(answer)
