"""How much the judges of a panel agree with each other: pure, vectorised numpy statistics.

Every function takes plain arrays and returns plain numbers or arrays; nothing here reads a
file or the database, so the same maths serves the CLI report, the tests and notebooks.

Conventions shared by the whole module:

- a *reliability matrix* has shape ``(n_judges, n_items)``, float, with ``NaN`` where a
  judge gave no rating (unscored, or not asked);
- a *verdict matrix* is a reliability matrix holding 0/1 (``score > VERDICT_THRESHOLD``, see
  :func:`verdicts_from_scores`);
- a judge whose row is all ``NaN`` scored nothing and is ignored, never an error;
- a statistic that is undefined for the data (nothing to compare, no variation to explain)
  is ``NaN``, so one degenerate run does not crash a report that covers many.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from juryflow.maths.records import VERDICT_THRESHOLD

Level = Literal["interval", "ordinal", "nominal"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
SpanList = Sequence[tuple[int, int]]

__all__ = [
    "ErrorCorrelation",
    "ItemSpans",
    "Level",
    "SpanLine",
    "SpanList",
    "alpha_from_coincidences",
    "cohen_kappa",
    "coincidence_matrix",
    "effective_panel_size",
    "error_correlation",
    "error_correlation_report",
    "error_indicators",
    "fleiss_kappa",
    "item_counts",
    "judge_bias",
    "krippendorff_alpha",
    "line_counts",
    "merge_spans",
    "micro_span_counts",
    "micro_span_f1",
    "pairwise_cohen_kappa",
    "pairwise_line_f1",
    "pairwise_span_f1",
    "percent_agreement",
    "span_f1",
    "span_stride",
    "verdict_table",
    "verdicts_from_scores",
]


# --------------------------------------------------------------------------- input helpers


def _matrix(ratings: npt.ArrayLike, name: str = "ratings") -> FloatArray:
    """As a float (n_judges, n_items) array (no copy if it already is); NaN is missing."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.ndim == 1 and r.size == 0:
        # ``np.asarray([])`` is 1-d; treat it as "no judges", the natural empty panel.
        r = r.reshape(0, 0)
    if r.ndim != 2:
        raise ValueError(f"{name} must be 2-d (n_judges, n_items), got shape {r.shape}")
    if np.isinf(r).any():
        raise ValueError(f"{name} contains infinite values; use NaN for a missing rating")
    return r


def _vector(values: npt.ArrayLike, n: int, name: str) -> FloatArray:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.shape[0] != n:
        raise ValueError(f"{name} has {v.shape[0]} entries, expected one per item ({n})")
    return v


def verdicts_from_scores(scores: npt.ArrayLike) -> FloatArray:
    """0/1 verdicts from 0-1 scores with the panel's strict threshold, keeping NaN as missing.

    >>> verdicts_from_scores([[0.2, 0.5, 0.9, float("nan")]]).tolist()
    [[0.0, 0.0, 1.0, nan]]
    """
    s = np.asarray(scores, dtype=np.float64)
    return np.where(np.isnan(s), np.nan, (s > VERDICT_THRESHOLD).astype(np.float64))


# ------------------------------------------------------------------------ Krippendorff alpha

# The Wikipedia "Krippendorff's alpha" worked example (3 coders x 15 units), used in doctests.
_WIKI = np.array(
    [
        [np.nan] * 5 + [3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
        [1, np.nan, 2, 1, 3, 3, 4, 3] + [np.nan] * 7,
        [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
    ]
)


def _pairable(r: FloatArray) -> tuple[FloatArray, npt.NDArray[np.bool_], IntArray]:
    """Keep the items with at least two ratings: a lone rating has nothing to coincide with."""
    present = ~np.isnan(r)
    m = present.sum(axis=0)
    keep = m >= 2
    return r[:, keep], present[:, keep], m[keep].astype(np.int64)


def krippendorff_alpha(ratings: npt.ArrayLike, level: Level = "interval") -> float:
    """Krippendorff's alpha for a reliability matrix ``(n_judges, n_items)``, NaN = missing.

    ``alpha = 1 - (n - 1) * sum(o * d) / sum(n_c * n_k * d)`` with ``o`` the coincidence
    matrix (:func:`coincidence_matrix`), ``n_c`` its marginals, ``n`` the number of pairable
    values and ``d`` the level's distance (interval ``(v_c - v_k)^2``, ordinal the squared
    marginal mass between the two values, nominal ``c != k``).  Equal to
    ``krippendorff.alpha(reliability_data=ratings, level_of_measurement=level)``.

    Computed without the ``V x V`` coincidence matrix, because judges' 0-1 scores can take
    as many distinct values as there are ratings (a detector's probabilities) and an
    ``n_items x V`` count table would not fit in memory.  The sums are the same:

    - interval: ``sum(o * d) = sum_u 2 m_u SS_u / (m_u - 1)`` and
      ``sum(n_c n_k d) = 2 n SS``, with ``SS_u`` the within-item and ``SS`` the total sum of
      squared deviations, so alpha is a ratio of variances (O(n_judges * n_items));
    - ordinal: ``d_ck = (mid_c - mid_k)^2`` where ``mid_c = sum_{g <= c} n_g - n_c / 2`` is
      the value's mid-rank, so ordinal alpha is interval alpha on mid-ranks;
    - nominal: ``sum(o * d) = sum_u (m_u^2 - sum_c n_uc^2) / (m_u - 1)`` and
      ``sum(n_c n_k d) = n^2 - sum_c n_c^2``.

    Edge cases (all ``NaN`` rather than an exception, unlike the ``krippendorff`` package):

    - items with fewer than two ratings are dropped (not pairable);
    - no pairable item at all -> ``NaN``;
    - expected disagreement 0, i.e. every pairable rating is the same value -> ``NaN``
      ("agreement undefined: every rating is the same");
    - a judge with no scored item (an all-NaN row) is simply ignored.

    The Wikipedia worked example (published nominal alpha 0.691):

    >>> round(krippendorff_alpha(_WIKI, "nominal"), 3)
    0.691
    >>> round(krippendorff_alpha(_WIKI, "interval"), 6)
    0.810845
    >>> round(krippendorff_alpha(_WIKI, "ordinal"), 6)
    0.806721
    >>> krippendorff_alpha([[1.0, 1.0], [1.0, 1.0]])
    nan
    """
    r, present, m = _pairable(_matrix(ratings))
    if m.size == 0:
        return float("nan")
    values = r[present]
    if values.min() == values.max():
        return float("nan")
    if level == "nominal":
        return _nominal_alpha(present, m, values)
    if level == "ordinal":
        r = np.full(r.shape, np.nan)
        r[present] = _midranks(values)
    elif level != "interval":
        raise ValueError(f"level must be 'interval', 'ordinal' or 'nominal', got {level!r}")
    return _interval_alpha(r, present, m)


def _interval_alpha(r: FloatArray, present: npt.NDArray[np.bool_], m: IntArray) -> float:
    n = int(m.sum())
    item_mean = np.where(present, r, 0.0).sum(axis=0) / m
    dev = np.where(present, r - item_mean, 0.0)
    within = (m * (dev * dev).sum(axis=0) / (m - 1)).sum()
    values = r[present]
    total_dev = values - values.mean()
    total = float(total_dev @ total_dev)
    return float(1.0 - (n - 1) * within / (n * total))


def _midranks(values: FloatArray) -> FloatArray:
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    mid = np.cumsum(counts) - counts / 2.0
    return np.asarray(mid[inverse], dtype=np.float64)


def _nominal_alpha(present: npt.NDArray[np.bool_], m: IntArray, values: FloatArray) -> float:
    n = int(m.sum())
    _, codes, n_c = np.unique(values, return_inverse=True, return_counts=True)
    n_values = n_c.size
    # ``values`` is row-major over judges, so the item of each value comes from the same mask.
    item = np.broadcast_to(np.arange(m.size), present.shape)[present]
    keys, pair_counts = np.unique(item * n_values + codes, return_counts=True)
    pair_item = keys // n_values
    same = np.bincount(pair_item, weights=pair_counts.astype(np.float64) ** 2, minlength=m.size)
    observed = ((m * m - same) / (m - 1)).sum()
    expected = float(n) * n - float((n_c.astype(np.float64) ** 2).sum())
    return float(1.0 - (n - 1) * observed / expected)


def coincidence_matrix(ratings: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The value domain and coincidence matrix ``o`` of a reliability matrix.

    ``o[c, k] = sum_u (pairs of ratings (c, k) by different judges on item u) / (m_u - 1)``
    over the pairable items, built as ``counts.T @ (counts / (m_u - 1))`` minus the
    self-pairs, as fast-krippendorff does.  Memory is ``n_items x V``: meant for discrete
    scales and for showing people *which* values the judges confuse, not for alpha on
    continuous scores (:func:`krippendorff_alpha` does not need it).

    >>> values, o = coincidence_matrix(_WIKI)
    >>> values.tolist(), float(o.sum())
    ([1.0, 2.0, 3.0, 4.0], 26.0)
    """
    r, present, m = _pairable(_matrix(ratings))
    values = r[present]
    domain, codes = np.unique(values, return_inverse=True)
    n_items, n_values = m.size, domain.size
    item = np.broadcast_to(np.arange(n_items), present.shape)[present]
    counts = np.bincount(item * n_values + codes, minlength=n_items * n_values)
    counts = counts.reshape(n_items, n_values).astype(np.float64)
    weight = 1.0 / (m - 1)
    o = counts.T @ (counts * weight[:, None]) - np.diag(counts.T @ weight)
    return domain, o


def alpha_from_coincidences(values: FloatArray, o: FloatArray, level: Level) -> float:
    """Alpha from a coincidence matrix, the textbook formula (see :func:`krippendorff_alpha`).

    >>> round(alpha_from_coincidences(*coincidence_matrix(_WIKI), "nominal"), 6)
    0.691358
    """
    n_c = o.sum(axis=0)
    n = n_c.sum()
    if level == "nominal":
        d = 1.0 - np.eye(values.size)
    elif level == "interval":
        d = (values[:, None] - values[None, :]) ** 2
    elif level == "ordinal":
        mid = np.cumsum(n_c) - n_c / 2.0
        d = (mid[:, None] - mid[None, :]) ** 2
    else:
        raise ValueError(f"level must be 'interval', 'ordinal' or 'nominal', got {level!r}")
    expected = float(n_c @ d @ n_c)
    if n == 0 or expected == 0.0:
        return float("nan")
    return float(1.0 - (n - 1) * (o * d).sum() / expected)


# ---------------------------------------------------------------------------- kappa family


def verdict_table(verdicts: npt.ArrayLike, categories: Sequence[float] = (0.0, 1.0)) -> IntArray:
    """Fleiss count table ``(n_items, n_categories)`` from a verdict matrix.

    Fleiss' kappa needs the same number of ratings on every item, so only items rated by
    every judge who rated anything are kept (all-NaN judges are ignored).

    >>> verdict_table([[1, 0, 1], [1, 1, float("nan")], [float("nan")] * 3]).tolist()
    [[0, 2], [1, 1]]
    """
    v = _matrix(verdicts, "verdicts")
    v = v[~np.isnan(v).all(axis=1)]
    # With no active judge every item would be vacuously "complete" with zero ratings.
    v = v[:, ~np.isnan(v).any(axis=0)] if v.shape[0] else v.reshape(0, 0)
    cats = np.asarray(categories, dtype=np.float64)
    if not np.isin(v, cats).all():
        raise ValueError(f"verdicts hold values outside the categories {list(categories)}")
    return np.stack([(v == c).sum(axis=0) for c in cats], axis=1).astype(np.int64)


def fleiss_kappa(table: npt.ArrayLike) -> float:
    """Fleiss' kappa from a count table ``(n_items, n_categories)``, as statsmodels'
    ``fleiss_kappa(table, method="fleiss")``.

    Every row must sum to the same number of raters (ValueError otherwise). ``NaN`` when
    there is no item, fewer than two raters per item, or every rating falls in a single
    category (chance agreement is 1, so kappa is 0/0).

    Wikipedia's "Fleiss' kappa" worked example (10 items, 14 raters, 5 categories) gives 0.210:

    >>> table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
    ...          [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
    ...          [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    >>> round(fleiss_kappa(table), 3)
    0.21
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2:
        raise ValueError(f"table must be 2-d (n_items, n_categories), got shape {t.shape}")
    if t.shape[0] == 0:
        return float("nan")
    raters = t.sum(axis=1)
    k = raters[0]
    if not (raters == k).all():
        raise ValueError("every item of a Fleiss table needs the same number of ratings")
    if k < 2:
        return float("nan")
    p_cat = t.sum(axis=0) / t.sum()
    p_item = ((t * t).sum(axis=1) - k) / (k * (k - 1))
    chance = float(p_cat @ p_cat)
    if chance == 1.0:
        return float("nan")
    return float((p_item.mean() - chance) / (1.0 - chance))


def pairwise_cohen_kappa(verdicts: npt.ArrayLike) -> FloatArray:
    """Cohen's kappa for every pair of judges, ``(n_judges, n_judges)``, each pair over the
    items both rated (any label values, not only 0/1).

    Matches ``sklearn.metrics.cohen_kappa_score`` on those items, including when it is
    undefined: ``NaN`` when a pair shares no item or both judges give one and the same label
    throughout (chance agreement 1). Like sklearn, a single shared item on which the two
    disagree gives 0.0, not NaN. The diagonal is 1 (NaN for a constant or empty judge).

    >>> pairwise_cohen_kappa([[1, 1, 0, 0], [1, 0, 0, 0]]).round(3).tolist()
    [[1.0, 0.5], [0.5, 1.0]]
    """
    v = _matrix(verdicts, "verdicts")
    present = ~np.isnan(v)
    both = present.astype(np.float64)
    shared = both @ both.T
    agree = np.zeros_like(shared)
    chance_num = np.zeros_like(shared)
    # One matrix product per label: judges are few, labels fewer, items many.
    for label in np.unique(v[present]):
        said = (v == label).astype(np.float64)
        agree += said @ said.T
        said_where_other_rated = said @ both.T
        chance_num += said_where_other_rated * said_where_other_rated.T
    # Counts are exact integers in float64, so "chance agreement is 1" is an exact test.
    undefined = (shared == 0) | (chance_num == shared * shared)
    with np.errstate(divide="ignore", invalid="ignore"):
        po = agree / shared
        pe = chance_num / (shared * shared)
        kappa = (po - pe) / (1.0 - pe)
    return np.where(undefined, np.nan, kappa)


def cohen_kappa(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cohen's kappa of two verdict vectors, dropping positions where either is NaN.

    Same values and NaN cases as :func:`pairwise_cohen_kappa` / sklearn.

    >>> round(cohen_kappa([1, 1, 0, 0, float("nan")], [1, 0, 0, 0, 1]), 3)
    0.5
    """
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"a and b differ in length: {x.size} vs {y.size}")
    return float(pairwise_cohen_kappa(np.vstack([x, y]))[0, 1])


def percent_agreement(verdicts: npt.ArrayLike) -> float:
    """Mean, over items with at least two verdicts, of the share of judge pairs that agree.

    ``NaN`` when no item has two verdicts.

    Items: all three agree (1), one pair of three agrees (1/3), the two present agree (1):

    >>> round(percent_agreement([[1, 1, 0], [1, 0, 0], [1, 0, float("nan")]]), 4)
    0.7778
    """
    v = _matrix(verdicts, "verdicts")
    present = ~np.isnan(v)
    m = present.sum(axis=0)
    keep = m >= 2
    if not keep.any():
        return float("nan")
    v, m = v[:, keep], m[keep]
    agreeing = np.zeros(m.size)
    for label in np.unique(v[~np.isnan(v)]):
        n_label = (v == label).sum(axis=0)
        agreeing += n_label * (n_label - 1) / 2.0
    return float((agreeing / (m * (m - 1) / 2.0)).mean())


# ----------------------------------------------------------------------------------- spans


def merge_spans(spans: SpanList | IntArray) -> IntArray:
    """Half-open character spans ``[start, end)`` merged into sorted, disjoint ``(k, 2)``.

    Merging first is what makes a character count once however many overlapping spans
    cover it. Empty spans (start == end) cover nothing and are dropped; negative offsets or
    start > end are malformed and raise ValueError.

    >>> merge_spans([(5, 9), (0, 3), (2, 4), (9, 10), (7, 7)]).tolist()
    [[0, 4], [5, 10]]
    """
    a = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if (a < 0).any() or (a[:, 1] < a[:, 0]).any():
        raise ValueError(f"spans must be (start, end) with 0 <= start <= end: {spans!r}")
    a = a[a[:, 1] > a[:, 0]]
    if a.shape[0] <= 1:
        return a
    a = a[np.argsort(a[:, 0], kind="stable")]
    reach = np.maximum.accumulate(a[:, 1])
    starts_group = np.flatnonzero(np.r_[True, a[1:, 0] > reach[:-1]])
    ends = np.maximum.reduceat(a[:, 1], starts_group)
    return np.column_stack([a[starts_group, 0], ends])


def _chars(merged: IntArray) -> int:
    return int((merged[:, 1] - merged[:, 0]).sum())


def _overlap(a: IntArray, b: IntArray) -> int:
    # Both sets are disjoint, so their pairwise intersections are disjoint and simply add up.
    if a.shape[0] == 0 or b.shape[0] == 0:
        return 0
    lo = np.maximum(a[:, None, 0], b[None, :, 0])
    hi = np.minimum(a[:, None, 1], b[None, :, 1])
    return int(np.clip(hi - lo, 0, None).sum())


def span_f1(pred_spans: SpanList, ref_spans: SpanList) -> tuple[int, int, int]:
    """Character counts for one item: ``(overlap, pred_chars, ref_chars)``.

    Overlapping spans within one set are counted once. Despite the name it returns the
    counts, so that callers can micro-average across items (:func:`micro_span_f1`).

    >>> span_f1([(0, 5), (3, 8)], [(6, 12)])
    (2, 8, 6)
    """
    p, r = merge_spans(pred_spans), merge_spans(ref_spans)
    return _overlap(p, r), _chars(p), _chars(r)


def _safe_ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


@dataclass(frozen=True, slots=True, eq=False)
class ItemSpans:
    """One span set for every item as flat arrays, the form DuckDB hands them over in.

    Span ``k`` is ``[start[k], end[k])`` on item ``item[k]``; ``item`` never decreases, so
    each item's spans are one contiguous slice, in their stored order. ``answered[i]`` says
    item ``i`` has a span list at all (possibly empty), as opposed to ``None``: a judge that
    failed or scores only, a consensus below quorum, an item without span labels.
    """

    item: IntArray
    start: IntArray
    end: IntArray
    answered: BoolArray

    def __post_init__(self) -> None:
        n = self.item.shape[0]
        if self.start.shape != (n,) or self.end.shape != (n,):
            raise ValueError("item, start and end need one entry per span each")
        if n and (
            (self.item[1:] < self.item[:-1]).any()
            or self.item[0] < 0
            or self.item[-1] >= self.answered.shape[0]
        ):
            raise ValueError("span items must be sorted item indexes below the item count")

    @property
    def n_items(self) -> int:
        return int(self.answered.shape[0])

    def take(self, keep: BoolArray) -> ItemSpans:
        """The sets of the items where ``keep`` holds, renumbered in their order.

        >>> sets = ItemSpans.from_lists([[(0, 1)], None, [(2, 3)]])
        >>> sets.take(np.array([False, True, True])).to_lists()
        [None, [(2, 3)]]
        """
        keep = np.asarray(keep, dtype=bool)
        renumbered = np.cumsum(keep) - 1
        rows = keep[self.item]
        return ItemSpans(
            renumbered[self.item[rows]], self.start[rows], self.end[rows], self.answered[keep]
        )

    @classmethod
    def from_lists(cls, spans_per_item: Sequence[SpanList | None]) -> ItemSpans:
        """From per-item lists (``None`` = no answer), the form tests and notebooks write."""
        answered = np.fromiter((s is not None for s in spans_per_item), dtype=bool)
        counts = np.fromiter((len(s) if s else 0 for s in spans_per_item), dtype=np.int64)
        pairs = np.asarray(
            [pair for spans in spans_per_item if spans for pair in spans], dtype=np.int64
        ).reshape(-1, 2)
        item = np.repeat(np.arange(len(spans_per_item), dtype=np.int64), counts)
        return cls(item, pairs[:, 0].copy(), pairs[:, 1].copy(), answered)

    def to_lists(self) -> list[list[tuple[int, int]] | None]:
        """Back to per-item lists of ``(start, end)``, ``None`` where not answered."""
        bounds = np.searchsorted(self.item, np.arange(self.n_items + 1)).tolist()
        pairs = list(zip(self.start.tolist(), self.end.tolist(), strict=True))
        return [
            pairs[bounds[i] : bounds[i + 1]] if said else None
            for i, said in enumerate(self.answered.tolist())
        ]

    def max_end(self) -> int:
        return int(self.end.max()) if self.end.size else 0


def span_stride(*span_sets: Sequence[SpanList | None] | ItemSpans) -> int:
    """A line length per item longer than any span end, for :class:`SpanLine`."""
    ends = [
        s.max_end() if isinstance(s, ItemSpans) else ItemSpans.from_lists(s).max_end()
        for s in span_sets
    ]
    return max(ends, default=0) + 1


def _per_item(item: IntArray, values: IntArray, n_items: int) -> IntArray:
    """Sums of ``values`` per item, ``item`` sorted: differences of one cumulative sum."""
    total = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    return np.diff(total[np.searchsorted(item, np.arange(n_items + 1))])


@dataclass(frozen=True, slots=True, eq=False)
class SpanLine:
    """One span set for every item (a judge's answers, the consensus, the human labels),
    merged once and placed on one line where item ``i`` owns ``[i * stride, (i + 1) *
    stride)``: spans of different items can then never touch, and one merge (one sort)
    serves every item at once. A report takes many figures from the same sets; each is
    then a sum over the items wanted (:func:`item_counts`), not a pass over Python lists."""

    intervals: IntArray
    """Sorted, disjoint ``(k, 2)`` intervals on the line."""
    answered: BoolArray
    """Per item: a span list was given (possibly empty), as opposed to None."""
    stride: int
    item: IntArray
    """The item of each interval (intervals never cross an item's stretch of the line)."""
    chars: IntArray
    """Per item: the characters its spans cover, each counted once."""

    @classmethod
    def of(cls, spans_per_item: Sequence[SpanList | None] | ItemSpans, stride: int) -> SpanLine:
        spans = (
            spans_per_item
            if isinstance(spans_per_item, ItemSpans)
            else ItemSpans.from_lists(spans_per_item)
        )
        bad = np.flatnonzero((spans.start < 0) | (spans.end < spans.start))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"spans must be (start, end) with 0 <= start <= end: item {int(spans.item[k])} "
                f"has {(int(spans.start[k]), int(spans.end[k]))}"
            )
        if spans.end.size and int(spans.end.max()) >= stride:
            # A span reaching the next item's stretch would merge with that item's spans.
            raise ValueError(f"stride {stride} must exceed every span end: use span_stride()")
        offset = spans.item * stride
        merged = merge_spans(np.column_stack([offset + spans.start, offset + spans.end]))
        item = merged[:, 0] // stride
        chars = _per_item(item, merged[:, 1] - merged[:, 0], spans.n_items)
        return cls(merged, spans.answered, stride, item, chars)


def _covered_before(line: IntArray, below: IntArray, x: IntArray) -> IntArray:
    """How many characters of the sorted, disjoint ``line`` lie before each position ``x``.

    ``below[k]`` is the length of the first ``k`` intervals. The intervals that start
    before ``x`` are all whole except perhaps the last, so one binary search per position
    does it."""
    k = np.searchsorted(line[:, 0], x, side="left")
    last = np.maximum(k - 1, 0)
    partial = np.minimum(x, line[last, 1]) - line[last, 0]
    return np.where(k > 0, below[last] + partial, 0)


def _overlaps(a: IntArray, b: IntArray) -> IntArray:
    """Per interval of ``a``: its characters inside ``b`` (both merged, on the same line):
    those of ``b`` before its end minus those before its start, by binary search into
    ``b``, with no sort of the two together."""
    if not a.size or not b.size:
        return np.zeros(a.shape[0], dtype=np.int64)
    below = np.concatenate([[0], np.cumsum(b[:, 1] - b[:, 0])[:-1]])
    return _covered_before(b, below, a[:, 1]) - _covered_before(b, below, a[:, 0])


def line_counts(a: IntArray, b: IntArray) -> tuple[int, int, int]:
    """``(overlap, chars_a, chars_b)`` of two merged sets on the same line.

    >>> line_counts(np.array([[0, 5], [10, 20]]), np.array([[3, 12], [15, 16]]))
    (5, 15, 10)
    """
    return int(_overlaps(a, b).sum()), _chars(a), _chars(b)


def item_counts(a: SpanLine, b: SpanLine) -> IntArray:
    """``(3, n_items)``: per item, the characters both lines cover, those ``a`` covers and
    those ``b`` covers. Summed over the items to compare (``counts[:, items].sum(axis=1)``)
    they give the micro ``(overlap, chars_a, chars_b)`` of those items.

    >>> a = SpanLine.of([[(0, 5)], [(1, 4)]], 10)
    >>> item_counts(a, SpanLine.of([[(3, 8)], None], 10)).tolist()
    [[2, 0], [5, 3], [5, 0]]
    """
    if a.stride != b.stride or a.answered.size != b.answered.size:
        raise ValueError("span lines to compare need the same stride and item count")
    if a is b:
        return np.stack([a.chars, a.chars, a.chars])
    return np.stack([a.chars + b.chars - _union_chars(a, b), a.chars, b.chars])


def _union_chars(a: SpanLine, b: SpanLine) -> IntArray:
    """Per item, the characters either line covers: |A u B|, so that the overlap is
    |A| + |B| - |A u B| (each set is disjoint). Both are sorted, so the stable sort of the
    two together is one merge of two runs, not a full sort."""
    starts = np.concatenate([a.intervals[:, 0], b.intervals[:, 0]])
    ends = np.concatenate([a.intervals[:, 1], b.intervals[:, 1]])
    if starts.size == 0:
        return np.zeros(a.answered.size, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    first = np.flatnonzero(np.r_[True, starts[1:] > reach[:-1]])
    union_starts = starts[first]
    return _per_item(
        union_starts // a.stride,
        np.maximum.reduceat(ends, first) - union_starts,
        a.answered.size,
    )


def micro_span_counts(
    pred_per_item: Sequence[SpanList], ref_per_item: Sequence[SpanList]
) -> tuple[int, int, int]:
    """``(overlap, pred_chars, ref_chars)`` summed over items: :func:`span_f1` of every
    item added up, computed in one pass (every item's spans on one line, see
    :class:`SpanLine`).

    >>> micro_span_counts([[(0, 5), (3, 8)], []], [[(6, 12)], [(0, 4)]])
    (2, 8, 10)
    """
    if len(pred_per_item) != len(ref_per_item):
        raise ValueError(
            f"{len(pred_per_item)} predicted span lists for {len(ref_per_item)} reference "
            "ones; need one of each per item"
        )
    pred, ref = ItemSpans.from_lists(pred_per_item), ItemSpans.from_lists(ref_per_item)
    stride = span_stride(pred, ref)
    return line_counts(SpanLine.of(pred, stride).intervals, SpanLine.of(ref, stride).intervals)


def micro_span_f1(pairs: Iterable[tuple[SpanList, SpanList]]) -> tuple[float, float, float]:
    """Micro-averaged character ``(precision, recall, f1)`` over ``(pred, ref)`` span pairs.

    Sums overlaps and characters over all items before dividing (RAGTruth / LettuceDetect).
    A 0/0 ratio is 0.0, as sklearn's ``zero_division=0``.

    >>> micro_span_f1([([(0, 5)], [(0, 10)]), ([(0, 5)], [])])
    (0.5, 0.5, 0.5)
    """
    listed = list(pairs)
    overlap, pred, ref = micro_span_counts([p for p, _ in listed], [r for _, r in listed])
    return (
        _safe_ratio(overlap, pred),
        _safe_ratio(overlap, ref),
        _safe_ratio(2 * overlap, pred + ref),
    )


def pairwise_span_f1(
    spans_by_judge: Sequence[Sequence[SpanList | None]],
    *,
    lines: Sequence[SpanLine] | None = None,
) -> FloatArray:
    """Micro character F1 between every pair of judges, ``(n_judges, n_judges)``.

    ``spans_by_judge[j][i]`` is judge j's span list for item i, or ``None`` when the judge
    did not answer that item (the pair is then compared on the items both answered). F1 is
    symmetric: ``2 * overlap / (chars_a + chars_b)`` summed over those items. When neither
    judge flagged a single character on them, F1 is ``NaN``: they agree there is nothing to
    flag, but overlap F1 cannot express it (use the verdict kappas for that). ``lines``,
    when given, are the judges' sets already on one line (:func:`pairwise_line_f1`).

    >>> pairwise_span_f1([[[(0, 4)], []], [[(2, 6)], [(0, 2)]]]).round(3).tolist()
    [[1.0, 0.4], [0.4, 1.0]]
    """
    n_items = {len(items) for items in spans_by_judge}
    if len(n_items) > 1:
        raise ValueError(f"every judge needs one entry per item, got lengths {sorted(n_items)}")
    if lines is None:
        sets = [ItemSpans.from_lists(items) for items in spans_by_judge]
        stride = span_stride(*sets)
        lines = [SpanLine.of(spans, stride) for spans in sets]
    return pairwise_line_f1(lines)


def pairwise_line_f1(lines: Sequence[SpanLine]) -> FloatArray:
    """:func:`pairwise_span_f1` of span sets already on one line (same stride and items):
    each judge's spans are merged once, and a pair sums its per-item counts
    (:func:`item_counts`) over the items both judges answered."""
    n_judges = len(lines)
    out = np.full((n_judges, n_judges), np.nan)
    for i in range(n_judges):
        for j in range(i, n_judges):
            both = lines[i].answered & lines[j].answered
            overlap, chars_a, chars_b = item_counts(lines[i], lines[j])[:, both].sum(axis=1)
            if chars_a + chars_b:
                out[i, j] = out[j, i] = 2.0 * overlap / (chars_a + chars_b)
    return out


# ------------------------------------------------------------------------- judges vs others


def judge_bias(scores: npt.ArrayLike, consensus: npt.ArrayLike) -> FloatArray:
    """Each judge's mean ``score - consensus`` (e.g. the panel median) over the items where
    both exist; ``NaN`` for a judge with no such item. Positive = harsher than the panel
    (a higher hallucination score).

    >>> judge_bias([[0.9, 0.2, float("nan")], [float("nan")] * 3], [0.5, 0.4, 0.1]).round(6)
    array([0.1, nan])
    """
    s = _matrix(scores, "scores")
    diff = s - _vector(consensus, s.shape[1], "consensus")
    valid = ~np.isnan(diff)
    count = valid.sum(axis=1)
    total = np.where(valid, diff, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / count, np.nan)


def error_indicators(verdicts: npt.ArrayLike, gold: npt.ArrayLike) -> FloatArray:
    """Whether each judge got each item wrong: ``1.0`` where its verdict differs from the
    gold 0/1 label, ``0.0`` where it matches, ``NaN`` where either is missing.

    ``verdicts`` is a verdict matrix; 0-1 scores are accepted and turned into verdicts with
    :func:`verdicts_from_scores` (which leaves 0/1 verdicts unchanged), so a caller still
    passing scores gets the same answer. Values outside [0, 1] or a gold label other than
    0/1 raise ``ValueError``.

    >>> error_indicators([[1, 0, 0.8, float("nan")]], [1, 1, 0, 0]).tolist()
    [[0.0, 1.0, 1.0, nan]]
    """
    x = _matrix(verdicts, "verdicts")
    g = _vector(gold, x.shape[1], "gold")
    if ((x < 0) | (x > 1)).any():
        raise ValueError("verdicts must be 0/1 (or 0-1 scores), with NaN for no verdict")
    if ((g != 0) & (g != 1) & ~np.isnan(g)).any():
        raise ValueError("gold must be 0/1, with NaN for no label")
    v = verdicts_from_scores(x)
    return np.where(np.isnan(v) | np.isnan(g), np.nan, (v != g).astype(np.float64))


@dataclass(frozen=True, slots=True, eq=False)
class ErrorCorrelation:
    """The judges' error correlation against gold, with what it had to leave out.

    ``correlation`` is :func:`error_correlation`'s matrix, ``n_items`` the items it used
    (gold and every judge who gave any verdict present), ``error_rate`` each judge's share of
    wrong verdicts on them (``NaN`` for a judge with none), ``constant_error`` the judges
    whose error never varies there (always right or always wrong: no correlation is
    defined, so they are not in ``effective_size``), and ``notes`` one sentence for each
    judge left out, ready to print.
    """

    correlation: FloatArray
    n_items: int
    error_rate: FloatArray
    constant_error: tuple[int, ...]
    effective_size: float
    notes: tuple[str, ...]


def error_correlation_report(
    verdicts: npt.ArrayLike, gold: npt.ArrayLike, names: Sequence[str] | None = None
) -> ErrorCorrelation:
    """Correlation of the judges' error *indicators* (:func:`error_indicators`), with notes.

    The error is ``1[verdict != gold]``, not the signed ``verdict - gold``: signed errors
    all contain ``-gold``, so they correlate through the labels themselves, and three
    judges flipping independent coins came out worth 1.5 judges instead of 3. Indicators
    of independent judges are independent whatever the labels.

    The Pearson correlation is taken over the items where gold and every judge who gave any
    verdict are present, so that all pairs (and :func:`effective_panel_size`) see the same
    items. ``names`` label the judges in ``notes`` (default ``judge 0``, ``judge 1``, ...).

    >>> report = error_correlation_report([[1, 0, 1], [0, 1, 1], [0, 1, 0]], [0, 1, 1])
    >>> report.constant_error, report.error_rate.round(2).tolist()
    ((1,), [0.67, 0.0, 0.33])
    >>> report.notes[0].split(":")[0]
    "judge 1 is never wrong on the 3 items with gold and every judge's verdict"
    """
    err = error_indicators(verdicts, gold)
    n_judges = err.shape[0]
    label = [names[j] if names is not None else f"judge {j}" for j in range(n_judges)]
    active = ~np.isnan(_matrix(verdicts, "verdicts")).all(axis=1)
    g = _vector(gold, err.shape[1], "gold")
    keep = ~np.isnan(g) & ~np.isnan(err[active]).any(axis=0)
    n_items = int(keep.sum())
    corr = np.full((n_judges, n_judges), np.nan)
    rate = np.full(n_judges, np.nan)
    notes = [f"{label[j]} gave no verdict and is left out" for j in np.flatnonzero(~active)]
    constant: tuple[int, ...] = ()
    if n_items:
        e = err[np.ix_(active, keep)]
        rate[active] = e.mean(axis=1)
        # Indicators are exactly 0/1, so a constant row has min == max (no float fuzz).
        varies = e.min(axis=1) < e.max(axis=1)
        idx = np.flatnonzero(active)
        constant = tuple(int(j) for j in idx[~varies])
        for j in constant:
            how = "never wrong on" if rate[j] == 0 else "wrong on every one of"
            notes.append(
                f"{label[j]} is {how} the {n_items} items with gold and every judge's "
                "verdict: its errors do not vary, so it has no error correlation and is left "
                "out of the effective panel size"
            )
        if n_items >= 2:
            centred = e - e.mean(axis=1, keepdims=True)
            sd = np.sqrt((centred * centred).sum(axis=1))
            with np.errstate(divide="ignore", invalid="ignore"):
                c = np.clip((centred @ centred.T) / np.outer(sd, sd), -1.0, 1.0)
            c[~varies, :] = np.nan
            c[:, ~varies] = np.nan
            corr[np.ix_(idx, idx)] = c
    if n_items < 2:
        notes.append(
            f"{n_items} item{'' if n_items == 1 else 's'} with gold and every judge's verdict: "
            "no error correlation"
        )
    n_eff = effective_panel_size(corr) if n_judges else float("nan")
    return ErrorCorrelation(
        correlation=corr,
        n_items=n_items,
        error_rate=rate,
        constant_error=constant,
        effective_size=n_eff,
        notes=tuple(notes),
    )


def error_correlation(verdicts: npt.ArrayLike, gold: npt.ArrayLike) -> FloatArray:
    """Pearson correlation ``(n_judges, n_judges)`` of the judges' errors against gold 0/1.

    The error is the indicator ``1[verdict != gold]`` (:func:`error_indicators`), over the
    items where gold and every judge who gave any verdict are present. Judges whose errors
    are correlated fail together, so adding them to a panel buys less than their count
    suggests (:func:`effective_panel_size`). Rows/columns are ``NaN`` for a judge with no
    verdict or a constant error on those items (never wrong, or always wrong: no variance),
    and everywhere when fewer than two items are usable; :func:`error_correlation_report`
    names the judges left out.

    Indicators (1, 0, 0, 1) and (1, 0, 1, 1); centred cross-products 0.5, squares 1 and
    0.75, so r = 0.5 / sqrt(0.75) = 1 / sqrt(3):

    >>> error_correlation([[1, 0, 1, 0], [1, 0, 0, 0]], [0, 0, 1, 1]).round(3).tolist()
    [[1.0, 0.577], [0.577, 1.0]]
    """
    return error_correlation_report(verdicts, gold).correlation


def effective_panel_size(error_corr: npt.ArrayLike) -> float:
    """How many independent judges a panel with these error correlations is worth.

    ``n_eff = n / (1 + (n - 1) * rho)`` with ``rho`` the mean off-diagonal correlation:
    the variance of the mean of ``n`` equicorrelated judges is ``sigma^2 (1 + (n-1) rho) / n``,
    i.e. Kish's design effect for clusters (Kish, *Survey Sampling*, 1965, section 5.4; the
    same ratio as the Spearman-Brown formula). ``rho`` is clipped to [0, 1]: negatively
    correlated errors would promise more than ``n`` judges, which averaging cannot deliver.

    NaN correlations are skipped; judges with no defined correlation to anyone are left out
    of ``n`` (:func:`error_correlation_report` says which and why). A 1x1 matrix is worth
    1 judge; no defined correlation at all gives ``NaN``.

    >>> effective_panel_size([[1, 0.5, 0.5], [0.5, 1, 0.5], [0.5, 0.5, 1]])
    1.5
    """
    c = np.asarray(error_corr, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"error_corr must be a square matrix, got shape {c.shape}")
    if c.shape[0] == 1:
        return 1.0
    off = ~np.eye(c.shape[0], dtype=bool) & np.isfinite(c)
    judges = off.any(axis=1)
    n = int(judges.sum())
    if n < 2:
        return float("nan")
    rho = float(np.clip(c[off].mean(), 0.0, 1.0))
    return n / (1.0 + (n - 1) * rho)
