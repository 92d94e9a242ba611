"""How much a judge agrees with itself: agreement between its own repeated samples of an item.

A judge with ``samples: N`` answers every item N times; this is its *intra-judge*
reliability, measured between those answers exactly as agreement between judges is
(:mod:`juryflow.maths.agreement`), with each sample in the place of a judge:

- **scores**: Krippendorff's α, interval level, samples as coders;
- **verdicts**: Fleiss' κ over the items every sample answered (a count table of N ratings
  per item; α nominal would keep items with fewer, but κ is what the panel's verdicts get
  too), and the *pairwise disagreement*, the share of an item's sample pairs whose verdicts
  differ, averaged over the items with two samples or more (``1 - percent agreement``). A
  judge right on the verdict but for a flip with chance F disagrees with itself on
  ``2F(1-F)`` of its pairs, whatever the labels;
- **spans**: the mean, over pairs of samples, of the micro character F1 between their span
  sets (over the items both answered with spans);
- **beside the others**: the share of (sample, other judge) pairs whose verdicts differ, per
  item then averaged, and its paired difference from the self-disagreement. When the
  others' figure is not clearly above the judge's own, the judge disagrees with itself
  about as much as with the other judges: its dissent is its own noise.

Every figure has a percentile interval (``LEVEL``) from a cluster bootstrap that resamples
whole sources (:func:`juryflow.maths.group_bootstrap.group_draws`), the same draws for all
figures (so the difference is paired). The point values come from
:mod:`juryflow.maths.agreement` itself; the resamples use the same formulas written over
per-item sufficient statistics with item weights (a source drawn twice counts twice), which
with whole-number weights equal the point formulas on the duplicated items (the tests check
it), summed per source before the draws weigh them (:class:`Draws`), so that 400 resamples
cost a few small matrix products, not 400 calls.

Seeded: the same inputs give the same intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from juryflow.maths import agreement as ag
from juryflow.maths.bias import Effect
from juryflow.maths.group_bootstrap import LEVEL, group_draws

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Draws",
    "SelfAgreement",
    "fleiss_kappa_weighted",
    "interval_alpha_weighted",
    "others_disagreement_per_item",
    "pair_disagreement_per_item",
    "self_agreement",
    "span_f1_weighted",
]

_NAN = float("nan")


@dataclass(frozen=True, slots=True, eq=False)
class Draws:
    """Resampling weights by group: ``weights[b, g]`` counts group g in resample b, and
    ``index[u]`` is item u's group. Every figure here is a ratio of weighted sums over
    items, so each sum is taken per group first: the (b, items) weight matrix is never
    built (a run of 100,000 items in a few thousand sources needs a few MB, not 320)."""

    weights: FloatArray
    index: npt.NDArray[np.intp]

    @classmethod
    def of(cls, weights: npt.ArrayLike | Draws) -> Draws:
        """``weights`` as they are, or (b, n_items) item weights (each item its own group)."""
        if isinstance(weights, Draws):
            return weights
        w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        return cls(w, np.arange(w.shape[1], dtype=np.intp))

    def sum(self, per_item: npt.ArrayLike) -> FloatArray:
        """Per resample, the weighted sum of ``per_item`` (finite values, one per item)."""
        by_group = np.bincount(
            self.index,
            weights=np.asarray(per_item, dtype=np.float64),
            minlength=self.weights.shape[1],
        )
        return np.asarray(self.weights @ by_group)


@dataclass(frozen=True, slots=True)
class SelfAgreement:
    """One judge's agreement with itself over its samples, each figure with its interval.

    ``n`` of each :class:`~juryflow.maths.bias.Effect` is the items it rests on (NaN value
    where it is undefined: fewer than two samples anywhere, every rating the same, no span
    flagged). ``others`` and ``excess`` (others minus self, paired) are NaN without other
    judges' verdicts.
    """

    n_items: int
    """Items with two or more scored samples."""
    n_samples: int
    """The most scored samples of one item."""
    score_alpha: Effect
    verdict_kappa: Effect
    verdict_disagreement: Effect
    span_f1: Effect
    others_disagreement: Effect
    excess: Effect

    @property
    def as_noisy_as_others(self) -> bool | None:
        """Its disagreement with the others is not clearly above its disagreement with
        itself (the paired interval of others - self reaches 0); None when not measured."""
        if not self.excess.measured:
            return None
        if np.isnan(self.excess.low):
            return bool(self.excess.value <= 0)
        return bool(self.excess.low <= 0)


# -- per-item statistics --------------------------------------------------------------------


def _matrix(values: npt.ArrayLike) -> FloatArray:
    m = np.asarray(values, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"samples must be 2-d (n_samples, n_items), got shape {m.shape}")
    return m


def pair_disagreement_per_item(verdicts: npt.ArrayLike) -> FloatArray:
    """Per item, the share of its pairs of 0/1 verdicts that differ (NaN below two).

    With k flags among m verdicts: ``k (m - k) / (m (m - 1) / 2)``.

    >>> pair_disagreement_per_item([[1, 0, 1], [1, 1, float("nan")], [0, 1, 1]]).tolist()
    [0.6666666666666666, 0.6666666666666666, 0.0]
    """
    v = _matrix(verdicts)
    m = (~np.isnan(v)).sum(axis=0).astype(np.float64)
    k = np.nansum(v, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(m >= 2, 2 * k * (m - k) / (m * (m - 1)), np.nan))


def others_disagreement_per_item(verdicts: npt.ArrayLike, others: npt.ArrayLike) -> FloatArray:
    """Per item, the share of (sample, other judge) verdict pairs that differ (NaN where
    there is no such pair).

    >>> others_disagreement_per_item([[1, 0], [0, 0]], [[1, float("nan")]]).tolist()
    [0.5, nan]
    """
    v, o = _matrix(verdicts), _matrix(others)
    ms, ks = (~np.isnan(v)).sum(axis=0), np.nansum(v, axis=0)
    mo, ko = (~np.isnan(o)).sum(axis=0), np.nansum(o, axis=0)
    pairs = (ms * mo).astype(np.float64)
    split = ks * (mo - ko) + (ms - ks) * ko
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(pairs > 0, split / pairs, np.nan))


# -- the point formulas over item weights (rows of ``weights``: resamples) ------------------


def interval_alpha_weighted(scores: npt.ArrayLike, weights: npt.ArrayLike | Draws) -> FloatArray:
    """Krippendorff's α (interval) of ``scores`` (n_samples, n_items) once per row of
    ``weights`` (b, n_items): item u counted ``weights[., u]`` times. With a row of ones it is
    :func:`juryflow.maths.agreement.krippendorff_alpha`; NaN where it is.

    ``alpha = 1 - (n - 1) sum_u w_u m_u SS_u / (m_u - 1) / (n SS)``, with ``n = sum_u w_u
    m_u`` pairable values and ``SS`` their total sum of squared deviations, from each item's
    count, sum and sum of squares.
    """
    r = _matrix(scores)
    w = Draws.of(weights)
    present = ~np.isnan(r)
    m = present.sum(axis=0).astype(np.float64)
    pairable = m >= 2
    x = np.where(present, r, 0.0)
    s1, s2 = x.sum(axis=0), (x * x).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        within = np.where(pairable, m * (s2 - s1 * s1 / m) / (m - 1), 0.0)
    keep = np.where(pairable, 1.0, 0.0)
    n = w.sum(keep * m)
    squares = w.sum(keep * s2)
    total = squares - w.sum(keep * s1) ** 2 / np.maximum(n, 1e-300)
    # Exact zero when every value is the same; guard float residue of identical values.
    scale = np.maximum(squares, 1e-300)
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = 1.0 - (n - 1) * w.sum(within) / (n * total)
    return np.asarray(np.where((n > 0) & (total > 1e-12 * scale), alpha, np.nan))


def fleiss_kappa_weighted(verdicts: npt.ArrayLike, weights: npt.ArrayLike | Draws) -> FloatArray:
    """Fleiss' κ of 0/1 ``verdicts`` (n_samples, n_items) over the items every active sample
    rated (:func:`juryflow.maths.agreement.verdict_table`), once per row of ``weights``."""
    v = _matrix(verdicts)
    w = Draws.of(weights)
    active = ~np.isnan(v).all(axis=1)
    complete = ~np.isnan(v[active]).any(axis=0) if active.any() else np.zeros(v.shape[1], bool)
    k = float(active.sum())
    if k < 2 or not complete.any():
        return np.full(w.weights.shape[0], np.nan)
    flags = np.where(complete, np.nansum(v[active], axis=0), 0.0)
    keep = complete.astype(np.float64)
    agree = np.where(complete, (flags * (flags - 1) + (k - flags) * (k - flags - 1)), 0.0)
    items = w.sum(keep)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_bar = w.sum(agree) / (items * k * (k - 1))
        p_one = w.sum(flags) / (items * k)
        chance = p_one * p_one + (1 - p_one) * (1 - p_one)
        kappa = (p_bar - chance) / (1 - chance)
    return np.asarray(np.where((items > 0) & (chance < 1), kappa, np.nan))


def span_f1_weighted(lines: Sequence[ag.SpanLine], weights: npt.ArrayLike | Draws) -> FloatArray:
    """Mean over pairs of samples of their micro character F1 (over the items both answered
    with spans; a pair where neither flagged a character is left out), once per row of
    ``weights``. With a row of ones it is the mean of the upper triangle of
    :func:`juryflow.maths.agreement.pairwise_line_f1`."""
    w = Draws.of(weights)
    f1s = []
    for a in range(len(lines)):
        for b in range(a + 1, len(lines)):
            both = (lines[a].answered & lines[b].answered).astype(np.float64)
            counts = ag.item_counts(lines[a], lines[b]) * both
            overlap, chars = w.sum(counts[0]), w.sum(counts[1] + counts[2])
            with np.errstate(invalid="ignore", divide="ignore"):
                f1s.append(np.where(chars > 0, 2 * overlap / chars, np.nan))
    if not f1s:
        return np.full(w.weights.shape[0], np.nan)
    stacked = np.stack(f1s)
    counted = (~np.isnan(stacked)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(counted > 0, np.nansum(stacked, axis=0) / counted, np.nan))


def _weighted_mean(per_item: FloatArray, weights: npt.ArrayLike | Draws) -> FloatArray:
    w = Draws.of(weights)
    defined = ~np.isnan(per_item)
    total = w.sum(defined.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(
            np.where(total > 0, w.sum(np.where(defined, per_item, 0.0)) / total, np.nan)
        )


# -- one judge ----------------------------------------------------------------------------


def _interval(values: FloatArray) -> tuple[float, float]:
    finite = values[~np.isnan(values)]
    if not finite.size:
        return _NAN, _NAN
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _effect(point: float, draws: FloatArray | None, n: int) -> Effect:
    if np.isnan(point):
        return Effect(_NAN, _NAN, _NAN, n)
    if draws is None:
        return Effect(float(point), _NAN, _NAN, n)
    low, high = _interval(draws)
    return Effect(float(point), low, high, n)


def self_agreement(
    scores: npt.ArrayLike,
    verdicts: npt.ArrayLike,
    groups: npt.ArrayLike,
    spans: Sequence[ag.ItemSpans] | None = None,
    others: npt.ArrayLike | None = None,
    seed: int = 0,
) -> SelfAgreement:
    """A judge's agreement with itself, from its samples of each item.

    ``scores`` and ``verdicts`` are (n_samples, n_items), NaN where a sample is unscored or
    missing; ``groups`` names each item's source (the unit the bootstrap resamples);
    ``spans``, one set per sample (not answered where that sample gave no span answer), for
    a span judge; ``others`` (n_other_judges, n_items) the other judges' 0/1 verdicts.

    A judge that flips a fair coin on every verdict splits half its pairs (κ about 0):

    >>> rng = np.random.default_rng(0)
    >>> coin = (rng.random((3, 400)) < 0.5).astype(float)
    >>> found = self_agreement(coin, coin, [str(i) for i in range(400)])
    >>> round(found.verdict_disagreement.value, 1), abs(found.verdict_kappa.value) < 0.05
    (0.5, True)
    """
    s, v = _matrix(scores), _matrix(verdicts)
    if s.shape != v.shape:
        raise ValueError(f"scores {s.shape} and verdicts {v.shape} differ in shape")
    n_items = s.shape[1]
    present = ~np.isnan(s)
    pairable = present.sum(axis=0) >= 2
    n_groups = np.asarray(groups, dtype=object).reshape(-1).size
    if n_groups != n_items:
        raise ValueError(f"groups has {n_groups} entries, expected one per item ({n_items})")
    found = group_draws(groups, seed=seed) if n_items else None
    draws = None if found is None else Draws(found[0], found[1].astype(np.intp))

    n_pairable = int(pairable.sum())
    alpha_point = ag.krippendorff_alpha(s, "interval") if n_pairable else _NAN
    alpha = _effect(
        alpha_point, None if draws is None else interval_alpha_weighted(s, draws), n_pairable
    )

    table = ag.verdict_table(v) if v.size else np.zeros((0, 2), dtype=np.int64)
    kappa_point = ag.fleiss_kappa(table) if table.shape[0] and table.sum(axis=1)[0] >= 2 else _NAN
    kappa = _effect(
        kappa_point, None if draws is None else fleiss_kappa_weighted(v, draws), table.shape[0]
    )

    own = pair_disagreement_per_item(v)
    ones = np.ones((1, n_items))
    n_own = int((~np.isnan(own)).sum())
    own_draws = None if draws is None else _weighted_mean(own, draws)
    disagreement = _effect(float(_weighted_mean(own, ones)[0]), own_draws, n_own)

    span_effect = Effect(_NAN, _NAN, _NAN, 0)
    if spans is not None and len(spans) >= 2:
        stride = ag.span_stride(*spans)
        lines = [ag.SpanLine.of(sample, stride) for sample in spans]
        f1 = ag.pairwise_line_f1(lines)
        upper = f1[np.triu_indices(len(lines), 1)]
        point = float(np.nanmean(upper)) if (~np.isnan(upper)).any() else _NAN
        answered = np.stack([line.answered for line in lines]).sum(axis=0) >= 2
        span_effect = _effect(
            point, None if draws is None else span_f1_weighted(lines, draws), int(answered.sum())
        )

    missing = Effect(_NAN, _NAN, _NAN, 0)
    with_others, excess = missing, missing
    if others is not None and _matrix(others).shape[0]:
        theirs = others_disagreement_per_item(v, others)
        n_theirs = int((~np.isnan(theirs)).sum())
        with_others = _effect(
            float(_weighted_mean(theirs, ones)[0]),
            None if draws is None else _weighted_mean(theirs, draws),
            n_theirs,
        )
        # Paired: over the items with both figures, by the same draws.
        both = ~np.isnan(own) & ~np.isnan(theirs)
        gap = np.where(both, theirs - own, np.nan)
        excess = _effect(
            float(_weighted_mean(gap, ones)[0]),
            None if draws is None else _weighted_mean(gap, draws),
            int(both.sum()),
        )

    return SelfAgreement(
        n_items=n_pairable,
        n_samples=int(present.sum(axis=0).max()) if n_items else 0,
        score_alpha=alpha,
        verdict_kappa=kappa,
        verdict_disagreement=disagreement,
        span_f1=span_effect,
        others_disagreement=with_others,
        excess=excess,
    )
