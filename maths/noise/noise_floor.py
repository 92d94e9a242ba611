"""The judges' noise floor for a regression gate, from an A/A check: pure, no I/O.

An A/A check judges the same items twice with the same panel (cache off). Nothing changed
between the two judgings, so every paired difference is the judges' noise alone:

- ``consensus``: each item's consensus-score difference (re-judge minus baseline);
- ``verdict_changed``: whether its consensus verdict changed (either way);
- ``judges``: each judge's own score differences.

A comparison of a run with its baseline over ``n`` paired items, when the run did not get
worse, sees differences drawn from that same noise. The **noise floor** is what that noise
alone reaches with probability at most the false-alarm rate:

- the mean consensus change: the ``1 - a`` quantile of the mean of ``n`` noise differences;
- verdict flips to hallucinated: the ``1 - a`` quantile of their count over ``n`` items
  (each item flips that way with half the A/A change rate: the two judgings are exchangeable);
- each judge's drift: the ``1 - a`` quantile of ``|mean|`` of ``n_j`` of its differences;
- the fall of agreement (Krippendorff's interval alpha) between the judgings: the ``1 - a``
  quantile of the fall over ``n`` resampled A/A items, less the A/A's own fall.

Each quantile comes from a two-stage bootstrap over the A/A items: the ``K`` items
resampled, then ``n`` draws from that resample, so the floor carries the A/A sample's own
uncertainty (a small A/A sample gives a higher floor). Each statistic is centred on its
first-stage value: in an A/A the true change is zero, and the sample's own is noise too.
Draws are multinomial counts over the ``K`` A/A items, so the work is ``samples x K``
whatever ``n`` is.

The gate's false-alarm rate is that of all its floored checks together: with ``m`` checks
(the mean, the flips, the agreement and one per judge) each floor is taken at ``a / m``
(Bonferroni), so two identical runs are flagged by any of them with probability at most
about ``a``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NOISE_SAMPLES = 4000
"""Bootstrap resamples of each floor (seeded)."""
MIN_NOISE_ITEMS = 10
"""Fewer A/A pairs than this measure no floor: the gate then runs without it, and says so."""


@dataclass(frozen=True, slots=True)
class NoiseSample:
    """What an A/A check measured: paired differences of two judgings of the same items."""

    consensus: FloatArray
    """Consensus-score differences, one per item scored in both judgings."""
    verdict_changed: BoolArray
    """Whether each item's consensus verdict changed, one per item with both verdicts."""
    judges: Mapping[str, FloatArray] = field(default_factory=dict)
    """Judge id -> its own score differences on the items it scored both times."""
    ratings_before: FloatArray | None = None
    """``(judges, items)`` scores of the first judging (NaN = none), for the agreement."""
    ratings_after: FloatArray | None = None
    """The same judges and items in the second judging."""

    @property
    def n_items(self) -> int:
        return int(self.consensus.size)

    @property
    def noise_sd(self) -> float:
        """Standard deviation of one item's consensus-score difference (NaN below 2 items)."""
        return float(self.consensus.std(ddof=1)) if self.consensus.size > 1 else math.nan

    @property
    def change_rate(self) -> float:
        """Share of items whose consensus verdict changed between the two judgings."""
        size = self.verdict_changed.size
        return float(self.verdict_changed.mean()) if size else math.nan


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """The noise floor of a comparison over ``n_paired`` items, at ``false_alarm_rate``."""

    aa_items: int
    """Items the A/A check paired (consensus scored both times)."""
    aa_mean_delta: float
    """The A/A's own mean consensus change (noise: near zero)."""
    noise_sd: float
    """Standard deviation of one item's consensus-score difference in the A/A."""
    change_rate: float
    """Share of A/A items whose consensus verdict changed."""
    false_alarm_rate: float
    """The gate's false-alarm rate; each floor is taken at it divided by ``checks``."""
    checks: int
    n_paired: int
    """The comparison's paired items, the ``n`` the floors are for."""
    mean_delta: float
    """The largest mean consensus rise noise alone gives (NaN: not measured)."""
    flips_to_hallucinated: int | None
    """The most clean -> hallucinated flips noise alone gives (None: not measured)."""
    judge_drift: dict[str, float] = field(default_factory=dict)
    """Judge id -> the largest |drift| noise alone gives it."""
    agreement_drop: float = math.nan
    """The largest fall of Krippendorff's alpha noise alone gives (NaN: not measured)."""
    seed: int = 0

    @property
    def measured(self) -> bool:
        return not math.isnan(self.mean_delta)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as None), as stored in the comparison's ``thresholds``."""

        def num(value: float) -> float | None:
            return None if math.isnan(value) else float(value)

        return {
            "aa_items": self.aa_items,
            "aa_mean_delta": num(self.aa_mean_delta),
            "noise_sd": num(self.noise_sd),
            "change_rate": num(self.change_rate),
            "false_alarm_rate": self.false_alarm_rate,
            "checks": self.checks,
            "n_paired": self.n_paired,
            "mean_delta": num(self.mean_delta),
            "flips_to_hallucinated": self.flips_to_hallucinated,
            "judge_drift": {k: num(v) for k, v in self.judge_drift.items()},
            "agreement_drop": num(self.agreement_drop),
            "seed": self.seed,
        }


def _paired_differences(
    before: Mapping[str, float | None], after: Mapping[str, float | None]
) -> FloatArray:
    ids = sorted(k for k, v in before.items() if v is not None and after.get(k) is not None)
    return np.asarray([float(after[k]) - float(before[k]) for k in ids], dtype=np.float64)  # type: ignore[arg-type]


def noise_sample(
    consensus_before: Mapping[str, float | None],
    consensus_after: Mapping[str, float | None],
    verdicts_before: Mapping[str, bool | None],
    verdicts_after: Mapping[str, bool | None],
    judges_before: Mapping[str, Mapping[str, float | None]],
    judges_after: Mapping[str, Mapping[str, float | None]],
) -> NoiseSample:
    """The paired differences of an A/A check: baseline (``before``) vs its re-judge.

    >>> s = noise_sample({"a": 0.0, "b": 0.6, "c": None}, {"a": 0.6, "b": 0.6, "c": 1.0},
    ...                  {"a": False, "b": True}, {"a": True, "b": True},
    ...                  {"j": {"a": 0.0, "b": 1.0}}, {"j": {"a": 0.6, "b": 1.0}})
    >>> s.consensus.tolist(), s.verdict_changed.tolist(), s.judges["j"].tolist()
    ([0.6, 0.0], [True, False], [0.6, 0.0])
    >>> s.ratings_before.tolist(), s.ratings_after.tolist()
    ([[0.0, 1.0]], [[0.6, 1.0]])
    """
    verdict_ids = sorted(
        k for k, v in verdicts_before.items() if v is not None and verdicts_after.get(k) is not None
    )
    changed = np.asarray(
        [bool(verdicts_before[k]) != bool(verdicts_after[k]) for k in verdict_ids], dtype=bool
    )
    judges = {
        judge_id: _paired_differences(judges_before[judge_id], judges_after.get(judge_id, {}))
        for judge_id in sorted(judges_before)
        if judge_id in judges_after
    }
    # the agreement is compared on the items both judgings gave a consensus score
    items = sorted(
        k
        for k, v in consensus_before.items()
        if v is not None and consensus_after.get(k) is not None
    )
    names = sorted(set(judges_before) & set(judges_after))

    def ratings(scores: Mapping[str, Mapping[str, float | None]]) -> FloatArray:
        return np.asarray(
            [[np.nan if (v := scores[j].get(i)) is None else v for i in items] for j in names],
            dtype=np.float64,
        ).reshape(len(names), len(items))

    return NoiseSample(
        _paired_differences(consensus_before, consensus_after),
        changed,
        judges,
        ratings(judges_before),
        ratings(judges_after),
    )


def _two_stage(k: int, n: int, samples: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """``(samples, k)`` counts of a bootstrap of the ``k`` A/A items, and of ``n`` draws
    from each of those resamples: the second stage is the comparison's items, the first
    carries the A/A sample's own uncertainty into the floor."""
    rng = np.random.default_rng(seed)
    first = rng.multinomial(k, np.full(k, 1.0 / k), size=samples)
    second = rng.multinomial(n, first / k)
    return first.astype(np.float64), second.astype(np.float64)


def resampled_means(
    noise: npt.ArrayLike, n: int, samples: int = NOISE_SAMPLES, seed: int = 0
) -> FloatArray:
    """``samples`` means of ``n`` draws from the noise, each less the mean of the resample
    it was drawn from (in an A/A the true mean change is zero).

    Each resample is two-stage (:func:`_two_stage`): the ``K`` A/A values resampled, then
    ``n`` draws from that resample, as multinomial counts, so the work is ``samples x K``
    for any ``n``. Empty noise or ``n < 1`` gives an empty array.

    >>> resampled_means([0.25, 0.25, 0.25], 50, samples=3).tolist()  # no spread
    [0.0, 0.0, 0.0]
    >>> resampled_means([], 5).size
    0
    """
    e = np.asarray(noise, dtype=np.float64).reshape(-1)
    if e.size == 0 or n < 1:
        return np.empty(0, dtype=np.float64)
    first, second = _two_stage(e.size, n, samples, seed)
    return np.asarray(second @ e / n - first @ e / e.size, dtype=np.float64)


def mean_floor(
    noise: npt.ArrayLike, n: int, level: float, samples: int = NOISE_SAMPLES, seed: int = 0
) -> float:
    """The largest mean of ``n`` noise differences, but for a share ``level`` of the draws:
    the ``1 - level`` quantile of :func:`resampled_means` (NaN when nothing to draw from).

    A mean rise above it happens by noise alone with probability about ``level``: for
    normal noise of standard deviation ``s`` it is about ``z(1 - level) * s / sqrt(n)``.

    >>> round(mean_floor([-1.0, 1.0] * 50, 100, 0.05), 2)  # z(0.95) / sqrt(100) = 0.164
    0.16
    """
    means = resampled_means(noise, n, samples, seed)
    return float(np.quantile(means, 1.0 - level)) if means.size else math.nan


def drift_floor(
    noise: npt.ArrayLike, n: int, level: float, samples: int = NOISE_SAMPLES, seed: int = 0
) -> float:
    """The largest ``|mean|`` of ``n`` noise differences but for a share ``level`` of the
    draws: a judge's drift counts either way.

    >>> round(drift_floor([-1.0, 1.0] * 50, 100, 0.05), 2)  # z(0.975) / sqrt(100) = 0.196
    0.2
    """
    means = resampled_means(noise, n, samples, seed)
    return float(np.quantile(np.abs(means), 1.0 - level)) if means.size else math.nan


def flips_floor(
    changed: npt.ArrayLike, n: int, level: float, samples: int = NOISE_SAMPLES, seed: int = 0
) -> int | None:
    """The most clean -> hallucinated flips ``n`` items give by noise alone but for a share
    ``level`` of the draws (None when the A/A had no verdict pair).

    Each resample draws the A/A's change rate ``q*`` (a bootstrap of its items), then the
    flips of ``n`` items as Binomial(n, q*/2): the two judgings are exchangeable, so a
    change is as likely to go either way.

    >>> flips_floor([False] * 20, 100, 0.05), flips_floor([], 100, 0.05)
    (0, None)
    >>> 5 <= flips_floor([True, False, False, False, False] * 8, 100, 0.05) <= 20
    True
    """
    c = np.asarray(changed, dtype=bool).reshape(-1)
    if c.size == 0 or n < 1:
        return None
    rng = np.random.default_rng(seed)
    rates = rng.binomial(c.size, c.mean(), size=samples) / c.size
    flips = rng.binomial(n, rates / 2.0)
    return int(np.quantile(flips, 1.0 - level, method="higher"))


def weighted_interval_alpha(ratings: npt.ArrayLike, weights: npt.ArrayLike) -> FloatArray:
    """Krippendorff's interval alpha of ``(judges, items)`` ratings (NaN = missing) with
    each item counted ``weights[b, u]`` times, for every row ``b`` of ``weights`` at once.

    The sums of :func:`juryflow.maths.agreement.krippendorff_alpha` are sums over items,
    so an item drawn ``w`` times adds ``w`` times its share: ``sum_u w_u 2 m_u SS_u /
    (m_u - 1)`` over ``2 n SS``, with ``n`` and ``SS`` over the weighted values. With unit
    weights it is that alpha (4/9 for items (0, 0), (1, 1), (1, 0)); undefined rows are NaN.

    >>> weighted_interval_alpha([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]], [[1, 1, 1], [0, 1, 0]])
    array([0.44444444,        nan])
    """
    x = np.asarray(ratings, dtype=np.float64)
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    present = ~np.isnan(x)
    m = present.sum(axis=0).astype(np.float64)
    pairable = m >= 2
    values = np.where(present & pairable, x, 0.0)
    m = np.where(pairable, m, 0.0)
    total = values.sum(axis=0)
    squares = (values**2).sum(axis=0)
    within_ss = squares - np.divide(total**2, m, out=np.zeros_like(total), where=m > 0)
    within = np.divide(2 * m * within_ss, m - 1, out=np.zeros_like(m), where=m > 1)
    n = w @ m
    total_ss = w @ squares - np.divide((w @ total) ** 2, n, out=np.zeros_like(n), where=n > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1) * (w @ within) / (2 * n * total_ss)
    return np.asarray(np.where((n > 1) & (total_ss > 1e-12), alpha, np.nan), dtype=np.float64)


def agreement_floor(
    before: npt.ArrayLike,
    after: npt.ArrayLike,
    n: int,
    level: float,
    samples: int = NOISE_SAMPLES,
    seed: int = 0,
) -> float:
    """The largest fall of interval alpha from ``before`` to ``after`` (``(judges, K)``
    ratings of the same items) over ``n`` items drawn from the ``K``, but for a share
    ``level`` of the draws, less the fall on all ``K`` (in an A/A it is noise). NaN when
    undefined.

    >>> same = [[0.0, 1.0, 0.5, 1.0], [0.0, 1.0, 0.5, 0.0]]
    >>> agreement_floor(same, same, 40, 0.05)  # identical judgings never fall
    0.0
    """
    b = np.asarray(before, dtype=np.float64)
    a = np.asarray(after, dtype=np.float64)
    k = b.shape[1] if b.ndim == 2 else 0
    if k == 0 or n < 1 or b.shape != a.shape:
        return math.nan
    first, second = _two_stage(k, n, samples, seed)
    own = weighted_interval_alpha(b, first) - weighted_interval_alpha(a, first)
    falls = weighted_interval_alpha(b, second) - weighted_interval_alpha(a, second) - own
    falls = falls[~np.isnan(falls)]
    return float(np.quantile(falls, 1.0 - level)) if falls.size else math.nan


def noise_floor(
    sample: NoiseSample,
    n_paired: int,
    judge_pairs: Mapping[str, int],
    false_alarm_rate: float,
    *,
    samples: int = NOISE_SAMPLES,
    seed: int = 0,
) -> NoiseFloor:
    """The floors of a comparison over ``n_paired`` items (each judge over
    ``judge_pairs[judge]``), at ``false_alarm_rate`` for the gate as a whole.

    The checks share the rate (Bonferroni): the mean, the flips, the agreement and one per
    judge that the A/A measured. An A/A with fewer than :data:`MIN_NOISE_ITEMS` pairs
    measures nothing.

    >>> rng = np.random.default_rng(1)
    >>> s = NoiseSample(rng.normal(0, 0.3, 200), rng.random(200) < 0.2,
    ...                 {"j": rng.normal(0, 0.4, 200)})
    >>> f = noise_floor(s, 400, {"j": 400}, 0.05)
    >>> f.checks, 0.02 < f.mean_delta < 0.05, 0.03 < f.judge_drift["j"] < 0.07
    (4, True, True)
    >>> noise_floor(NoiseSample(np.zeros(3), np.zeros(3, bool)), 50, {}, 0.05).measured
    False
    """
    judges = {j: d for j, d in sample.judges.items() if d.size >= MIN_NOISE_ITEMS}
    checks = 3 + len(judges)
    level = false_alarm_rate / checks
    if sample.n_items < MIN_NOISE_ITEMS:
        return NoiseFloor(
            aa_items=sample.n_items,
            aa_mean_delta=float(sample.consensus.mean()) if sample.n_items else math.nan,
            noise_sd=sample.noise_sd,
            change_rate=sample.change_rate,
            false_alarm_rate=false_alarm_rate,
            checks=checks,
            n_paired=n_paired,
            mean_delta=math.nan,
            flips_to_hallucinated=None,
            seed=seed,
        )
    return NoiseFloor(
        aa_items=sample.n_items,
        aa_mean_delta=float(sample.consensus.mean()),
        noise_sd=sample.noise_sd,
        change_rate=sample.change_rate,
        false_alarm_rate=false_alarm_rate,
        checks=checks,
        n_paired=n_paired,
        mean_delta=mean_floor(sample.consensus, n_paired, level, samples, seed),
        flips_to_hallucinated=flips_floor(sample.verdict_changed, n_paired, level, samples, seed),
        judge_drift={
            j: drift_floor(d, judge_pairs.get(j, 0), level, samples, seed)
            for j, d in judges.items()
            if judge_pairs.get(j, 0) > 0
        },
        agreement_drop=(
            agreement_floor(
                sample.ratings_before, sample.ratings_after, n_paired, level, samples, seed
            )
            if sample.ratings_before is not None and sample.ratings_after is not None
            else math.nan
        ),
        seed=seed,
    )
