"""Bias probes against human labels: does a judge's verdict follow something besides the truth?

Pure, vectorised maths (no I/O) behind ``juryflow agreement --bias``. Each probe is one
number with a percentile interval (``LEVEL``) from a cluster bootstrap that resamples whole
sources (:func:`juryflow.maths.group_bootstrap.group_draws`), since responses to one
source are not independent; items are summed per source before the draws weigh them, so
no array of draws by items is held.

- **Rate differences** (length, self-preference): the Mantel–Haenszel risk difference
  (Greenland & Robins 1985) of the judge's verdict between *exposed* items (long responses;
  responses written by the judge's own model family) and the others, within gold strata
  (gold hallucinated, gold clean), so that a difference the labels explain does not count::

      RD = sum_k (a_k n0_k - c_k n1_k) / N_k  /  sum_k n1_k n0_k / N_k

  with, in stratum k, ``a_k`` / ``c_k`` the flagged exposed / unexposed items, ``n1_k`` /
  ``n0_k`` their counts and ``N_k`` both. It is the weighted mean of the strata's
  differences in flag rate, each weighted by ``n1 n0 / N``; it equals the slope of a
  least-squares fit of the verdict on exposure with one intercept per stratum (a linear
  probability model with stratum fixed effects), which is how the tests check it.
- **Position** (span judges): the mean relative position (0 at the text's start, 1 at its
  end) of the characters a judge flags minus that of the gold characters, over the items
  where both flag something; characters are pooled over items (as RAGTruth's character
  metric pools them), each character counted once per set.

Seeded: the same inputs give the same intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import ItemSpans
from juryflow.maths.group_bootstrap import LEVEL, group_draws
from juryflow.maths.span_overlaps import disjoint

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

NO_GOLD = -1
"""The stratum of items without a human verdict."""
_RESIDUE = 1e-12


@dataclass(frozen=True, slots=True)
class Effect:
    """A measured bias: ``value`` with its interval; NaN where it cannot be measured (no
    item on one side), and an interval of NaN where there is nothing to resample (one
    source)."""

    value: float
    low: float
    high: float
    n: int
    """Items counted."""

    @property
    def measured(self) -> bool:
        return not np.isnan(self.value)

    @property
    def excludes_zero(self) -> bool:
        """The interval lies clear of 0 (beyond floating-point residue)."""
        return bool(self.low > _RESIDUE or self.high < -_RESIDUE)


def gold_strata(gold_hallucinated: npt.ArrayLike) -> IntArray:
    """0 gold clean, 1 gold hallucinated, ``NO_GOLD`` where there is no human verdict.

    >>> gold_strata([0.0, 1.0, float("nan")]).tolist()
    [0, 1, -1]
    """
    gold = np.asarray(gold_hallucinated, dtype=np.float64)
    strata = np.where(np.isnan(gold), NO_GOLD, gold > 0.5)
    return np.asarray(strata, dtype=np.int64)


def long_responses(lengths: npt.ArrayLike, strata: npt.ArrayLike) -> BoolArray:
    """Longer than the median length of its stratum (a length at the median is short).

    >>> long_responses([1, 2, 3, 10, 20, 30], [0, 0, 0, 1, 1, 1]).tolist()
    [False, False, True, False, False, True]
    """
    length = np.asarray(lengths, dtype=np.float64)
    stratum = np.asarray(strata, dtype=np.int64)
    keys, index = np.unique(stratum, return_inverse=True)
    medians = np.array([np.median(length[index == k]) for k in range(len(keys))])
    return np.asarray(length > medians[index] if length.size else np.zeros(0, dtype=bool))


def _percentile_interval(values: FloatArray) -> tuple[float, float]:
    finite = values[~np.isnan(values)]
    if not finite.size:
        return float("nan"), float("nan")
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _mh_tables(y: FloatArray, e: FloatArray, strata: npt.ArrayLike) -> FloatArray:
    """(4, m, K): each item's share of a, n1, c and n0 in its stratum (K strata)."""
    _, index = np.unique(np.asarray(strata, dtype=np.int64), return_inverse=True)
    one_hot = np.zeros((y.size, int(index.max()) + 1 if y.size else 0))
    one_hot[np.arange(y.size), index] = 1.0
    columns = np.stack([y * e, e, y * (1 - e), 1 - e])
    return np.asarray(columns[:, :, None] * one_hot[None, :, :])


def _mh(weights: FloatArray, tables: FloatArray) -> FloatArray:
    """The risk difference per row of (b, units) ``weights`` over (4, units, K) tables."""
    a, n1, c, n0 = (weights @ t for t in tables)
    total = np.maximum(n1 + n0, 1e-300)
    numerator = ((a * n0 - c * n1) / total).sum(axis=1)
    denominator = (n1 * n0 / total).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(denominator > 0, numerator / denominator, np.nan))


def _per_group(values: FloatArray, index: IntArray, n_groups: int) -> FloatArray:
    """``values`` (..., m, k) summed over the items of each group into (..., G, k): the
    bootstrap weighs a group's items alike, so its resampled sums are the group draws times
    these."""
    by_item = np.moveaxis(values, -2, -1)
    rows = by_item.reshape(-1, by_item.shape[-1])
    summed = np.stack([np.bincount(index, weights=r, minlength=n_groups) for r in rows])
    return np.asarray(np.moveaxis(summed.reshape(*by_item.shape[:-1], n_groups), -1, -2))


def mh_risk_difference(
    outcome: npt.ArrayLike,
    exposed: npt.ArrayLike,
    strata: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
) -> FloatArray:
    """The Mantel–Haenszel risk difference of 0/1 ``outcome`` between ``exposed`` items and
    the others within ``strata``, once per row of ``weights`` ((b, m) item weights, such as
    bootstrap draws; default one row of ones). NaN where no stratum has both sides.

    >>> float(mh_risk_difference([1, 0, 1, 1], [1, 0, 1, 0], [0, 0, 1, 1])[0])
    0.5
    """
    y = np.asarray(outcome, dtype=np.float64)
    e = np.asarray(exposed, dtype=np.float64)
    w = np.ones((1, y.size)) if weights is None else np.asarray(weights, dtype=np.float64)
    return _mh(w, _mh_tables(y, e, strata))


def rate_difference(
    verdicts: npt.ArrayLike,
    exposed: npt.ArrayLike,
    strata: npt.ArrayLike,
    groups: npt.ArrayLike,
    seed: int = 0,
) -> Effect:
    """How much more often a judge flags ``exposed`` items than others at equal stratum.

    ``verdicts`` 0/1 with NaN where the judge gave none (those items are left out);
    ``strata`` as :func:`gold_strata`: where any item has gold, items without it are left
    out, so the difference is measured at equal gold; ``groups`` names each item's source,
    the unit the bootstrap resamples.
    """
    v = np.asarray(verdicts, dtype=np.float64)
    x = np.asarray(exposed, dtype=bool)
    s = np.asarray(strata, dtype=np.int64)
    g = np.asarray([str(k) for k in np.asarray(groups, dtype=object).reshape(-1)])
    keep = ~np.isnan(v)
    if (s != NO_GOLD).any():
        keep &= s != NO_GOLD
    v, x, s, g = v[keep], x[keep], s[keep], g[keep]
    if not v.size:
        return Effect(float("nan"), float("nan"), float("nan"), 0)
    tables = _mh_tables(v, x.astype(np.float64), s)
    point = float(_mh(np.ones((1, v.size)), tables)[0])
    found = group_draws(g, seed=seed)
    if found is None or np.isnan(point):
        return Effect(point, float("nan"), float("nan"), int(v.size))
    draws, index = found
    low, high = _percentile_interval(_mh(draws, _per_group(tables, index, draws.shape[1])))
    return Effect(point, low, high, int(v.size))


def _position_sums(spans: ItemSpans, lengths: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per item: the summed relative positions of its flagged characters, and their count.

    Character ``c`` of a text of length ``L`` sits at ``(c + 0.5) / L``; the characters of
    ``[s, e)`` sum to ``(e^2 - s^2) / 2``, each character counted once per set.
    """
    n = spans.n_items
    merged = disjoint(spans.item, spans.start, spans.end)
    s = merged.starts.astype(np.float64)
    e = merged.ends.astype(np.float64)
    position = np.bincount(merged.owner, weights=(e * e - s * s) / 2, minlength=n)
    count = np.bincount(merged.owner, weights=e - s, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.where(lengths > 0, position / np.maximum(lengths, 1e-300), 0.0)
    return np.asarray(relative), np.asarray(count, dtype=np.float64)


def position_shift(
    flagged: ItemSpans,
    gold: ItemSpans,
    lengths: npt.ArrayLike,
    groups: npt.ArrayLike,
    seed: int = 0,
) -> Effect:
    """Mean relative position of ``flagged`` characters minus that of ``gold`` characters,
    over the items where both flag at least one character (positive: later in the text)."""
    length = np.asarray(lengths, dtype=np.float64)
    g = np.asarray([str(k) for k in np.asarray(groups, dtype=object).reshape(-1)])
    f_pos, f_count = _position_sums(flagged, length)
    g_pos, g_count = _position_sums(gold, length)
    keep = (f_count > 0) & (g_count > 0) & flagged.answered & gold.answered
    n = int(keep.sum())
    if not n:
        return Effect(float("nan"), float("nan"), float("nan"), 0)
    sums = np.stack([f_pos[keep], f_count[keep], g_pos[keep], g_count[keep]], axis=1)

    def shift(totals: FloatArray) -> FloatArray:
        return np.asarray(totals[..., 0] / totals[..., 1] - totals[..., 2] / totals[..., 3])

    point = float(shift(sums.sum(axis=0)))
    found = group_draws(g[keep], seed=seed)
    if found is None:
        return Effect(point, float("nan"), float("nan"), n)
    draws, index = found
    low, high = _percentile_interval(shift(draws @ _per_group(sums, index, draws.shape[1])))
    return Effect(point, low, high, n)
