"""Time juryflow.maths.agreement.krippendorff_alpha against the krippendorff package.

100,000 items x 5 judges, interval level, scores on a 0-1 scale in steps of 0.1 with ~10 %
missing (seeded). The scale is discrete because the package builds an
items x judges x values boolean array: with continuous scores (~450,000 distinct values)
it would need hundreds of gigabytes, while ours does not depend on the number of values.

Run: /tmp/venv/bin/python bench/bench_krippendorff.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import krippendorff
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.maths.agreement import krippendorff_alpha

N_ITEMS = 100_000
N_JUDGES = 5
MISSING = 0.10
REPEATS = 5
SEED = 20240611


def make_ratings(seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Judges that share a per-item signal, so alpha is well away from 0 and from 1.
    truth = rng.random(N_ITEMS)
    noisy = truth + rng.normal(0.0, 0.2, (N_JUDGES, N_ITEMS))
    ratings = np.round(np.clip(noisy, 0.0, 1.0), 1)
    ratings[rng.random(ratings.shape) < MISSING] = np.nan
    return ratings


def best_time(fn: Callable[[], float], repeats: int) -> tuple[float, float]:
    """Best wall time of ``repeats`` runs (least disturbed by other processes) and the result."""
    best, result = float("inf"), float("nan")
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    print(f"machine: {machine()}")
    ratings = make_ratings()
    n_values = np.unique(ratings[~np.isnan(ratings)]).size
    print(
        f"data: {N_ITEMS:,} items x {N_JUDGES} judges, interval, {n_values} distinct values, "
        f"{np.isnan(ratings).mean():.1%} missing, seed {SEED}, best of {REPEATS}"
    )
    ours_s, ours = best_time(lambda: krippendorff_alpha(ratings, "interval"), REPEATS)
    pkg_s, pkg = best_time(
        lambda: float(
            krippendorff.alpha(reliability_data=ratings, level_of_measurement="interval")
        ),
        REPEATS,
    )
    diff = abs(ours - pkg)
    ratio = ours_s / pkg_s
    print(f"alpha (ours): {ours:.12f}")
    print(f"alpha (krippendorff {version('krippendorff')}): {pkg:.12f}")
    print(f"time ours: {ours_s * 1e3:.2f} ms")
    print(f"time krippendorff.alpha: {pkg_s * 1e3:.2f} ms")
    print(
        f"ratio ours / package: {ratio:.4f} (target <= 1.0: {'met' if ratio <= 1.0 else 'MISSED'})"
    )
    print(f"max abs difference: {diff:.3e} (target <= 1e-9: {'met' if diff <= 1e-9 else 'MISSED'})")


if __name__ == "__main__":
    main()
