"""Judge diagnostics for pairwise judging: position flips, position bias, agreement.

- **Flip rate**: the share of a judge's items, among those answered in both orders, whose
  two answers disagree once the swapped one is mapped back (:func:`~.records.item_verdicts`
  says ``INCONSISTENT``). A judge that flips often is answering the *position*.
- **Position bias**: the share of a judge's non-tie raw answers, both orders pooled, that
  pick the answer shown first. 0.5 is no bias; since every item is shown both ways round,
  content preferences cancel out of it (each content preference is first-shown once).
- **Agreement**: Cohen's kappa over the three classes A, B, tie, between two judges or a
  judge and a human, on the items where both gave a consistent verdict (an inconsistent
  verdict is not a class and is left out, and counted).

Intervals: the Wilson score interval by default (Wilson 1927; good coverage for small counts
and shares near 0 or 1, where the Wald interval fails), or, given ``groups`` (the source of
each item), a percentile cluster bootstrap that resamples whole sources, since items of one
source are not independent. Seeded: the same inputs give the same intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import cohen_kappa, pairwise_cohen_kappa
from juryflow.maths.group_bootstrap import group_draws
from juryflow.maths.pairwise.records import (
    INCONSISTENT,
    MISSING,
    TIE,
    A,
    B,
    item_codes,
    item_verdicts,
    raw_codes,
)

FloatArray = npt.NDArray[np.float64]

DEFAULT_SAMPLES = 1000
"""Bootstrap resamples for a grouped interval (cheap: a few counts per source)."""


@dataclass(frozen=True, slots=True)
class Rate:
    """A share ``successes / trials`` with its interval at ``level`` (NaN when no trials)."""

    estimate: float
    low: float
    high: float
    successes: int
    trials: int
    level: float


def wilson_interval(
    successes: npt.ArrayLike, trials: npt.ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval(s) of ``successes / trials``, vectorised; NaN where no trials.

    Chosen over the Wald interval because flip rates are often small and counts few, where
    Wald collapses to zero width; Wilson never leaves [0, 1].

    >>> low, high = wilson_interval(2, 4)
    >>> round(float(low), 4), round(float(high), 4)
    (0.15, 0.85)
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    # The standard library's quantile, not scipy's: importing scipy.special costs a third of
    # a second on every command that builds an agreement report, pairwise or not.
    z = NormalDist().inv_cdf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        low = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
        high = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def _rates(
    hits: FloatArray,
    tries: FloatArray,
    groups: npt.ArrayLike | None,
    level: float,
    samples: int,
    seed: int,
) -> tuple[Rate, ...]:
    """Per-judge rates from ``(n_judges, n_items)`` 0/1 hits and tries."""
    k = hits.sum(axis=1)
    n = tries.sum(axis=1)
    low, high = wilson_interval(k, n, level)
    if groups is not None:
        g = np.asarray(groups, dtype=object).reshape(-1)
        if g.size != hits.shape[1]:
            raise ValueError(f"groups has {g.size} entries, expected one per item")
        found = group_draws(g, samples=samples, seed=seed)
        if found is not None:
            draws, index = found
            n_groups = draws.shape[1]
            # Sum per source first: (judges, groups), then every draw at once.
            k_g = np.stack([np.bincount(index, row, n_groups) for row in hits])
            n_g = np.stack([np.bincount(index, row, n_groups) for row in tries])
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = (draws @ k_g.T) / (draws @ n_g.T)  # (samples, judges)
            tail = 100 * (1 - level) / 2
            for j in range(hits.shape[0]):
                finite = boot[:, j][np.isfinite(boot[:, j])]
                if finite.size:
                    low[j], high[j] = np.percentile(finite, [tail, 100 - tail])
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(n > 0, k / n, np.nan)
    return tuple(
        Rate(float(est[j]), float(low[j]), float(high[j]), int(k[j]), int(n[j]), level)
        for j in range(k.size)
    )


def flip_rates(
    first: npt.ArrayLike,
    second: npt.ArrayLike,
    *,
    groups: npt.ArrayLike | None = None,
    level: float = 0.95,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> tuple[Rate, ...]:
    """Each judge's position-flip rate from raw ``(n_judges, n_items)`` verdicts.

    ``first``/``second`` as for :func:`~.records.item_verdicts` (``second`` as given in the
    swapped order). Trials are the items answered in both orders; successes the ones that
    flip. Wilson interval, or a grouped bootstrap when ``groups`` (one per item) is given.

    >>> r = flip_rates([[0, 1, 2, 0, -1]], [[1, 1, 2, 0, 0]])[0]
    >>> r.estimate, r.successes, r.trials
    (0.5, 2, 4)
    """
    items = np.atleast_2d(item_verdicts(first, second))
    hits = (items == INCONSISTENT).astype(np.float64)
    tries = (items != MISSING).astype(np.float64)
    return _rates(hits, tries, groups, level, samples, seed)


def position_bias(
    first: npt.ArrayLike,
    second: npt.ArrayLike,
    *,
    groups: npt.ArrayLike | None = None,
    level: float = 0.95,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> tuple[Rate, ...]:
    """Each judge's share of non-tie raw answers that pick the answer shown first.

    Both orders count (a raw "A" is the first-shown answer in either order); ties and
    missing answers are left out. Above 0.5 the judge favours the first position.

    >>> r = position_bias([[0, 0, 1, 2]], [[0, 0, 0, -1]])[0]
    >>> r.successes, r.trials
    (5, 6)
    """
    f = np.atleast_2d(raw_codes(first, "first"))
    s = np.atleast_2d(raw_codes(second, "second"))
    if f.shape != s.shape:
        raise ValueError(f"first and second differ in shape: {f.shape} vs {s.shape}")
    hits = (f == A).astype(np.float64) + (s == A)
    tries = np.isin(f, (A, B)).astype(np.float64) + np.isin(s, (A, B))
    return _rates(hits, tries, groups, level, samples, seed)


# ------------------------------------------------------------------------------- agreement


def _consistent_or_nan(items: npt.ArrayLike) -> FloatArray:
    v = item_codes(items)
    return np.where((v >= A) & (v <= TIE), v, np.nan).astype(np.float64)


@dataclass(frozen=True, slots=True)
class PairAgreement:
    """Agreement of two raters' item verdicts over the items both gave a consistent one."""

    kappa: float
    """Cohen's kappa over the classes A, B, tie (NaN when undefined: no shared item, or
    both raters used one class throughout)."""
    agreement: float
    """Share of the shared items with the same verdict (NaN with none)."""
    n_items: int
    """Items where both verdicts are consistent."""
    n_left_out: int
    """Items left out: either verdict inconsistent or missing."""


def pair_agreement(a: npt.ArrayLike, b: npt.ArrayLike) -> PairAgreement:
    """Cohen's kappa (ties a class of their own) of two raters' item verdicts.

    ``a``/``b`` are item verdicts over the same items (judges: from
    :func:`~.records.item_verdicts`; a human: ``A``/``B``/``TIE``/``MISSING``). Reuses
    :func:`juryflow.maths.agreement.cohen_kappa` on the items where both are consistent.

    >>> r = pair_agreement([0, 0, 1, 2, 1, 3, 0], [0, 1, 1, 2, 1, 0, -1])
    >>> round(r.kappa, 6), r.n_items, r.n_left_out
    (0.6875, 5, 2)
    """
    x = _consistent_or_nan(a).reshape(-1)
    y = _consistent_or_nan(b).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"a and b differ in length: {x.size} vs {y.size}")
    both = ~np.isnan(x) & ~np.isnan(y)
    n = int(both.sum())
    agreement = float((x[both] == y[both]).mean()) if n else float("nan")
    return PairAgreement(cohen_kappa(x, y), agreement, n, int(x.size - n))


def panel_kappa(items: npt.ArrayLike) -> FloatArray:
    """Cohen's kappa for every pair of judges, ``(n_judges, n_judges)``, three classes.

    Each pair over the items where both are consistent (via
    :func:`juryflow.maths.agreement.pairwise_cohen_kappa`).
    """
    return pairwise_cohen_kappa(_consistent_or_nan(np.atleast_2d(np.asarray(items))))


def human_agreement(
    items: npt.ArrayLike, human: npt.ArrayLike, names: Sequence[str] | None = None
) -> dict[str, PairAgreement]:
    """Each judge's agreement with human labels, by judge name (``judge {j}`` unnamed).

    ``items`` is ``(n_judges, n_items)`` item verdicts, ``human`` one label per item (A, B,
    tie or missing). An inconsistent judge verdict is left out rather than counted wrong:
    its flip rate reports it.
    """
    v = np.atleast_2d(np.asarray(items))
    if names is not None and len(names) != v.shape[0]:
        raise ValueError(f"{len(names)} names for {v.shape[0]} judges")
    return {
        (names[j] if names is not None else f"judge {j}"): pair_agreement(v[j], human)
        for j in range(v.shape[0])
    }
