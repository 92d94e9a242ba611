"""F1 from per-item counts, its noise, and whether one predictor beats another beyond it.

Items of one source (the responses of six generators to one question, one article) are
not independent, so every resampling here draws whole **groups** with replacement (a
cluster bootstrap), from the ``(m, 3)`` per-item (tp, fp, fn) counts of
:mod:`juryflow.maths.calibration.data`. The same draws serve the two uses:

- :func:`earns_its_keep`: does a challenger beat an incumbent on F1 by more than
  ``MARGIN_SE`` bootstrap standard errors of the paired difference? (How calibration
  decides that a rule is better than the default rule, or than the best judge alone.)
- :func:`f1_interval` and :func:`difference_interval`: percentile intervals of an F1 and of
  a paired F1 difference (what ``juryflow calibrate`` prints beside each figure).

Seeded: the same counts give the same answers.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BOOTSTRAP_SAMPLES = 400
MARGIN_SE = 2.0
"""A rule must beat its incumbent (the default rule; for a combining rule also the best judge
alone) by this many bootstrap standard errors (about a one-sided 97.5 % test): at one,
across five folds some rule that won by luck on a few dozen items slips through most of the
time."""
LEVEL = 0.95
"""Coverage of the printed intervals."""


def f1_of(counts: npt.ArrayLike) -> FloatArray:
    """F1 from (..., 3) summed counts; 0 where nothing was predicted or labelled.

    >>> f1_of([[3, 1, 2], [0, 0, 0]]).tolist()
    [0.6666666666666666, 0.0]
    """
    c = np.asarray(counts, dtype=np.float64)
    tp, fp, fn = c[..., 0], c[..., 1], c[..., 2]
    denominator = 2 * tp + fp + fn
    return np.asarray(np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0))


def group_draws(
    groups: npt.ArrayLike, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[FloatArray, IntArray] | None:
    """(samples, G) group weights, how often each of the G groups was drawn in each
    resample, and each item's group index (m,); the draws of :func:`group_weights`, before
    they are spread over the items (a statistic that sums items can sum them per group
    first, and never hold a (samples, m) array).

    None with fewer than two groups (nothing to resample).

    >>> draws, index = group_draws(["a", "a", "b"], samples=3)
    >>> draws.shape, index.tolist()
    ((3, 2), [0, 0, 1])
    """
    keys = np.asarray([str(g) for g in np.asarray(groups, dtype=object).reshape(-1)])
    _, group_index = np.unique(keys, return_inverse=True)
    n_groups = int(group_index.max()) + 1 if group_index.size else 0
    if n_groups < 2:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n_groups, np.full(n_groups, 1 / n_groups), size=samples)
    return np.asarray(draws, dtype=np.float64), np.asarray(group_index, dtype=np.int64)


def group_weights(
    groups: npt.ArrayLike, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> FloatArray | None:
    """(samples, m) item weights: how often each item's group was drawn in each resample.

    None with fewer than two groups (nothing to resample).

    >>> w = group_weights(["a", "a", "b"], samples=3)
    >>> w.shape, bool((w[:, 0] == w[:, 1]).all())
    ((3, 3), True)
    """
    found = group_draws(groups, samples, seed)
    if found is None:
        return None
    draws, group_index = found
    return np.asarray(draws[:, group_index], dtype=np.float64)


def _resampled_f1(weights: FloatArray, counts: IntArray) -> FloatArray:
    return f1_of(np.einsum("bm,mk->bk", weights, counts.astype(np.float64)))


def earns_its_keep(
    challenger: IntArray,
    incumbent: IntArray,
    groups: npt.ArrayLike,
    seed: int = 0,
    margin: float = MARGIN_SE,
) -> bool:
    """Does ``challenger`` beat ``incumbent`` on F1 by more than ``margin`` standard errors?

    ``challenger`` and ``incumbent`` are (m, 3) per-item (tp, fp, fn) counts over the same
    items; the standard error of the F1 difference comes from a paired bootstrap that
    resamples whole groups.

    >>> one = np.array([[1, 0, 0]] * 20)
    >>> miss = np.array([[0, 0, 1]] * 20)
    >>> groups = np.array([str(i) for i in range(20)], dtype=object)
    >>> earns_its_keep(one, miss, groups), earns_its_keep(one, one, groups)
    (True, False)
    """
    observed = float(f1_of(challenger.sum(axis=0)) - f1_of(incumbent.sum(axis=0)))
    if observed <= 0:
        return False
    weights = group_weights(groups, seed=seed)
    if weights is None:
        return False
    boot = _resampled_f1(weights, challenger) - _resampled_f1(weights, incumbent)
    return observed > margin * float(np.std(boot))


def _percentiles(values: FloatArray) -> tuple[float, float]:
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def f1_interval(counts: IntArray, groups: npt.ArrayLike, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (``LEVEL``) of the F1 of (m, 3) per-item counts.

    With fewer than two groups there is nothing to resample: the interval is the point.

    >>> counts = np.array([[1, 0, 0]] * 10 + [[0, 1, 0]] * 10)
    >>> low, high = f1_interval(counts, [str(i) for i in range(20)])
    >>> bool(0.4 < low < 2 / 3 < high < 0.9)
    True
    """
    weights = group_weights(groups, seed=seed)
    if weights is None:
        point = float(f1_of(counts.sum(axis=0)))
        return point, point
    return _percentiles(_resampled_f1(weights, counts))


def difference_interval(
    a: IntArray, b: IntArray, groups: npt.ArrayLike, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of ``F1(a) - F1(b)``, paired: both resampled by the same draws.

    >>> same = np.array([[1, 0, 0], [0, 1, 0]] * 10)
    >>> difference_interval(same, same, [str(i) for i in range(20)])
    (0.0, 0.0)
    """
    weights = group_weights(groups, seed=seed)
    if weights is None:
        point = float(f1_of(a.sum(axis=0)) - f1_of(b.sum(axis=0)))
        return point, point
    return _percentiles(_resampled_f1(weights, a) - _resampled_f1(weights, b))
