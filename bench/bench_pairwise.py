"""Time the pairwise Bradley-Terry-Davidson fit with its grouped bootstrap (issue 42).

The dev-sized case of tests/test_pairwise_maths.py: 186 items in 31 sources, three
candidate models, three judges, both orders (1,116 comparisons), 200 bootstrap draws fitted
as one problem. Target: well under a second a fit (it runs inside `juryflow agreement`).

Run: .venv/bin/python bench/bench_pairwise.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.maths.pairwise.bradley_terry import comparisons, fit_bradley_terry
from tests.test_pairwise_maths import simulate_davidson


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    rng = np.random.default_rng(2024)
    truth = np.array([-0.8, 0.0, 0.8])
    n_items = 186
    pairs = np.array([(0, 1), (1, 2), (0, 2)])[np.arange(n_items) % 3]
    groups = np.repeat([f"source-{g}" for g in range(31)], 6)
    a_first = np.broadcast_to(pairs[:, 0], (3, n_items))
    b_first = np.broadcast_to(pairs[:, 1], (3, n_items))
    first = simulate_davidson(rng, truth, a_first, b_first, position=0.5, nu=0.4)
    second = simulate_davidson(rng, truth, b_first, a_first, position=0.5, nu=0.4)
    data = comparisons(pairs[:, 0], pairs[:, 1], first, second)
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        fit = fit_bradley_terry(data, groups=groups, samples=200, seed=1)
        seconds.append(time.perf_counter() - start)
    print(
        f"{data.outcome.size} comparisons, 200 bootstrap draws: best {min(seconds):.3f} s, "
        f"median {sorted(seconds)[len(seconds) // 2]:.3f} s of {args.repeats}; ranking "
        f"{fit.ranking().tolist()} (truth [2, 1, 0])"
    )


if __name__ == "__main__":
    main()
