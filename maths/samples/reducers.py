"""Sample reducers: how a judge's N samples of one item become that judge's one answer.

A judge with ``samples: N`` is asked N times; its answer for the consensus is a named
reducer over the samples, registered with :func:`sample_reducer` (as the consensus reducers
of :mod:`juryflow.maths.reducers` are) so that a panel file and the store can spell it:

- ``median`` (score judges' default): the median score, the lower of the two middle ones on
  an even count, so its verdict is always the samples' strict-majority verdict (an even
  split is never a majority, as for the panel's votes);
- ``mean`` (score judges): the mean score;
- ``majority`` (span judges' default): the majority verdict, with the characters a strict
  majority of the samples marked (the consensus' majority character-overlap code,
  :func:`juryflow.maths.consensus.consensus_spans`, snapped to words); the samples may
  agree that something is wrong yet not where, so the spans can be empty under a
  "hallucinated" verdict;
- ``union`` (span judges): any sample's verdict and every character any sample marked.

Unscored samples are filtered out before a reducer sees them; a judge whose samples are all
unscored is unscored, with a reason naming the samples' own. One scored sample is returned
as it is: the reducers apply from two.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from juryflow.maths.consensus import coverage, spans_from_flags
from juryflow.maths.names import did_you_mean
from juryflow.maths.records import Judgment, OutputKind, Span, Usage, unscored

ReduceFn = Callable[[Sequence[Judgment], str], "SampleAnswer"]


class SampleReducerError(ValueError):
    """A sample reducer that cannot be used, with a message naming the fix."""


@dataclass(frozen=True, slots=True)
class SampleAnswer:
    """What a reducer makes of the scored samples: a score and (span judges) spans."""

    score: float
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True, slots=True)
class _Entry:
    fn: ReduceFn
    kinds: frozenset[OutputKind]
    doc: str


_REGISTRY: dict[str, _Entry] = {}
DEFAULT_SAMPLE_REDUCER: dict[OutputKind, str] = {
    "score": "median",
    "spans": "majority",
    "preference": "both_orders",
}


def sample_reducer(name: str, *kinds: OutputKind) -> Callable[[ReduceFn], ReduceFn]:
    """Register ``fn(scored_samples, text) -> SampleAnswer`` as sample reducer ``name`` for
    judges of the given output kinds; ``text`` is the judged text the span offsets index."""

    def register(fn: ReduceFn) -> ReduceFn:
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _REGISTRY[name] = _Entry(fn, frozenset(kinds), doc)
        return fn

    return register


def sample_reducer_names(kind: OutputKind | None = None) -> list[str]:
    """The registered names (for one output kind).

    >>> sample_reducer_names("score"), sample_reducer_names("spans")
    (['mean', 'median'], ['majority', 'union'])
    """
    return sorted(n for n, e in _REGISTRY.items() if kind is None or kind in e.kinds)


def resolve_sample_reducer(name: str | None, kind: OutputKind) -> str:
    """The reducer a judge of ``kind`` uses: ``name``, or the kind's default; raises
    SampleReducerError for a name unknown or unfit for the kind."""
    if name is None:
        return DEFAULT_SAMPLE_REDUCER[kind]
    entry = _REGISTRY.get(name)
    if entry is None or kind not in entry.kinds:
        fits = ", ".join(sample_reducer_names(kind))
        what = "unknown sample reducer" if entry is None else f"a {kind} judge cannot use"
        hint = did_you_mean(name, sample_reducer_names(kind)) if entry is None else ""
        raise SampleReducerError(f"{what} {name!r}{hint}; for a {kind} judge use one of: {fits}")
    return name


def reduce_samples(
    samples: Sequence[Judgment], reducer: str, text: str, cache_key: str | None = None
) -> Judgment:
    """The judge's one judgment from its ``samples`` (in sample order, one judge, one item),
    carrying them in ``samples``. Usage, attempts and latency are the sums over the samples
    this run paid for (every one when all came from the cache: the judgment is then cached,
    and a run's spending leaves it out, as a cached judge asked once keeps its cost)."""
    if not samples:
        raise ValueError("reduce_samples needs at least one sample")
    first = samples[0]
    paid = [s for s in samples if not s.cached] or list(samples)
    entry = _REGISTRY[resolve_sample_reducer(reducer, first.output_kind)]
    scored = [s for s in samples if s.score is not None]
    n = len(samples)
    common = dict(
        prompt_name=first.prompt_name,
        prompt_hash=first.prompt_hash,
        provider=first.provider,
        model=first.model,
        usage=_summed(paid),
        attempts=sum(s.attempts for s in paid),
        latency_ms=sum(s.latency_ms for s in paid),
        cache_key=cache_key,
        cached=all(s.cached for s in samples),
        verdict_threshold=first.verdict_threshold,
        samples=tuple(samples),
    )
    if first.output_kind == "preference":
        return _both_orders(samples, common)
    if not scored:
        reasons = sorted({s.unscored_reason or "" for s in samples})
        reason = f"all {n} samples unscored: " + "; ".join(reasons)
        return unscored(first.item_id, first.judge_id, first.output_kind, reason, **common)
    answer = (
        SampleAnswer(scored[0].score or 0.0, scored[0].spans)
        if len(scored) == 1
        else entry.fn(scored, text)
    )
    dropped = n - len(scored)
    note = f"{reducer} of {len(scored)} scored samples of {n}"
    if len(scored) == 1:
        note = f"the one scored sample of {n}"
    return Judgment(
        item_id=first.item_id,
        judge_id=first.judge_id,
        output_kind=first.output_kind,
        score=answer.score,
        spans=answer.spans,
        reasoning=note + (f" ({dropped} unscored)" if dropped else ""),
        **common,  # type: ignore[arg-type]
    )


def _summed(samples: Sequence[Judgment]) -> Usage:
    def total(name: str) -> int | None:
        values = [getattr(s.usage, name) for s in samples]
        return None if all(v is None for v in values) else sum(v or 0 for v in values)

    costs = [s.usage.cost_usd for s in samples]
    return Usage(
        input_tokens=total("input_tokens"),
        output_tokens=total("output_tokens"),
        cost_usd=None if all(c is None for c in costs) else math.fsum(c or 0.0 for c in costs),
        cache_write_tokens=total("cache_write_tokens"),
        cache_read_tokens=total("cache_read_tokens"),
    )


def _majority(scored: Sequence[Judgment]) -> bool:
    return sum(bool(s.verdict) for s in scored) * 2 > len(scored)


def _runs(judgment: Judgment) -> list[tuple[int, int]]:
    return [
        (s.char_start, s.char_end)
        for s in judgment.voting_spans
        if s.char_start is not None and s.char_end is not None
    ]


def _flagged_spans(scored: Sequence[Judgment], text: str, votes_needed: int) -> tuple[Span, ...]:
    covered = coverage([_runs(s) for s in scored], len(text))
    votes = covered.sum(axis=0, dtype=np.int64)
    spans = spans_from_flags(votes >= votes_needed, votes, text)
    return tuple(Span(s.char_start, s.char_end, s.text, "exact", requested=s.text) for s in spans)


ORDER_NAMES = ("A first", "B first")
"""A pairwise judge's two samples: the answers shown in the order A, B, then B, A."""
INCONSISTENT = "inconsistent"
"""The start of the unscored reason of a pairwise judge whose two orders disagree."""


def _both_orders(samples: Sequence[Judgment], common: dict[str, Any]) -> Judgment:
    """A pairwise judge's item verdict from its two orders (each already in A/B labels):
    the verdict both give, else unscored. Disagreeing orders are ``inconsistent``, a state
    of their own that is counted, never made a tie; a missing order leaves no verdict."""
    first = samples[0]
    if len(samples) != 2:
        raise ValueError(f"a pairwise judge has 2 samples (its orders), not {len(samples)}")
    missing = [
        f"{ORDER_NAMES[k]}: {s.unscored_reason}" for k, s in enumerate(samples) if s.score is None
    ]
    if missing:
        reason = "order unanswered (" + "; ".join(missing) + ")"
        return unscored(first.item_id, first.judge_id, "preference", reason, **common)
    a_first, b_first = (float(s.score or 0.0) for s in samples)
    if a_first != b_first:
        names = {0.0: "A", 0.5: "tie", 1.0: "B"}
        reason = (
            f"{INCONSISTENT}: {names.get(a_first, a_first)} with A shown first, "
            f"{names.get(b_first, b_first)} with B shown first"
        )
        return unscored(first.item_id, first.judge_id, "preference", reason, **common)
    return Judgment(
        item_id=first.item_id,
        judge_id=first.judge_id,
        output_kind="preference",
        score=a_first,
        reasoning=first.reasoning,
        **common,
    )


@sample_reducer("both_orders", "preference")
def _both_orders_registered(scored: Sequence[Judgment], text: str) -> SampleAnswer:
    """A pairwise judge's two orders: the verdict both give (unscored when they disagree);
    applied by :func:`reduce_samples` itself, which sees the unscored orders too."""
    raise AssertionError("reduce_samples reduces a pairwise judge's orders itself")


@sample_reducer("median", "score")
def _median(scored: Sequence[Judgment], text: str) -> SampleAnswer:
    """The median score (the lower middle one on an even count: the majority's verdict).

    >>> from juryflow.maths.records import Judgment
    >>> _median([Judgment("i", "j", "score", s) for s in (0.9, 0.0, 0.6, 0.3)], "").score
    0.3
    """
    values = sorted(s.score or 0.0 for s in scored)
    return SampleAnswer(values[(len(values) - 1) // 2])


@sample_reducer("mean", "score")
def _mean(scored: Sequence[Judgment], text: str) -> SampleAnswer:
    """The mean score (its verdict can differ from the majority's)."""
    values = sorted(s.score or 0.0 for s in scored)
    # fsum is exact whatever the order; the division can still land a hair outside the
    # samples' range (three 0.1s), which a mean never is.
    return SampleAnswer(min(max(math.fsum(values) / len(values), values[0]), values[-1]))


@sample_reducer("majority", "spans")
def _majority_spans(scored: Sequence[Judgment], text: str) -> SampleAnswer:
    """The majority verdict, with the characters a strict majority of samples marked."""
    spans = _flagged_spans(scored, text, len(scored) // 2 + 1)
    return SampleAnswer(1.0 if _majority(scored) else 0.0, spans)


@sample_reducer("union", "spans")
def _union_spans(scored: Sequence[Judgment], text: str) -> SampleAnswer:
    """Hallucinated if any sample says so, with every character any sample marked."""
    flagged = any(bool(s.verdict) for s in scored)
    return SampleAnswer(1.0 if flagged else 0.0, _flagged_spans(scored, text, 1))


def with_index(sample: Judgment, cache_key: str | None) -> Judgment:
    """A sample as stored: its own cache key, no samples of its own."""
    return replace(sample, cache_key=cache_key, samples=())
