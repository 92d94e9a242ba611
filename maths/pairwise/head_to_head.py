"""Candidate against baseline: win, tie and loss rates over items, and a regression flag.

From a panel's consensus per item (:mod:`.rules`), with one answer the baseline's and the
other the candidate's (``candidate="B"`` by default: A is the baseline), the candidate's

- **win / tie / loss rates** over the items with a consensus (``MISSING`` items, where no
  judge was consistent, are left out and counted: they say nothing about either side);
- **win share** ``wins + ties / 2``: 0.5 is "as good as the baseline", the figure an A/A
  run (the baseline against itself) must reproduce, and the one :func:`regressed` tests.

Intervals are percentile intervals of a cluster bootstrap over sources (``groups``, one per
item; each item its own source without it), since items of one source are not independent:
per-source counts are summed once, then every draw weighs them, so no draws-by-items array
is held. Seeded: the same inputs give the same intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from juryflow.maths.group_bootstrap import group_draws
from juryflow.maths.pairwise.records import TIE, A, B, item_codes

FloatArray = npt.NDArray[np.float64]

DEFAULT_SAMPLES = 2000
"""Bootstrap draws (cheap: three counts per source)."""


@dataclass(frozen=True, slots=True)
class Share:
    """A share with its percentile interval (NaN when it cannot be resampled)."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True, slots=True, eq=False)
class HeadToHead:
    """The candidate's record against the baseline over the items with a consensus."""

    wins: Share
    ties: Share
    losses: Share
    win_share: Share
    """``wins + ties / 2``: 0.5 is "as good as the baseline"."""
    n_items: int
    """Items with a consensus (A, B or tie)."""
    n_missing: int
    """Items left out: no consensus (no judge consistent), or an inconsistent code."""
    level: float
    win_share_draws: FloatArray
    """The bootstrap draws of the win share (empty with fewer than two sources)."""


def head_to_head(
    consensus: npt.ArrayLike,
    *,
    candidate: Literal["A", "B"] = "B",
    groups: npt.ArrayLike | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> HeadToHead:
    """The candidate's win, tie and loss rates and win share, with grouped intervals.

    ``consensus`` has one code per item (``A``, ``B``, ``TIE``, ``MISSING``); ``candidate``
    says which label is the candidate's answer, the other being the baseline's.

    >>> r = head_to_head([1, 1, 2, 0, -1], samples=0)
    >>> r.wins.estimate, r.ties.estimate, r.losses.estimate, r.win_share.estimate
    (0.5, 0.25, 0.25, 0.625)
    >>> r.n_items, r.n_missing
    (4, 1)
    """
    if candidate not in ("A", "B"):
        raise ValueError(f"candidate must be 'A' or 'B', got {candidate!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    c = item_codes(np.asarray(consensus).reshape(-1), "consensus")
    win_code, loss_code = (B, A) if candidate == "B" else (A, B)
    # (n_items, 3): win, tie, loss indicators; items without a consensus are zero rows.
    outcome = np.stack([c == win_code, c == TIE, c == loss_code], axis=1).astype(np.float64)
    decided = outcome.sum(axis=1)
    n = int(decided.sum())
    n_missing = int(c.size - n)
    with np.errstate(invalid="ignore", divide="ignore"):
        point = outcome.sum(axis=0) / n
    point_share = float(point[0] + point[1] / 2) if n else float("nan")

    lows = np.full(4, np.nan)
    highs = np.full(4, np.nan)
    boot_share = np.zeros(0)
    if samples > 0 and n:
        g = np.arange(c.size) if groups is None else np.asarray(groups, dtype=object).reshape(-1)
        if len(g) != c.size:
            raise ValueError(f"groups has {len(g)} entries, expected one per item")
        found = group_draws(g, samples=samples, seed=seed)
        if found is not None:
            draws, index = found
            n_groups = draws.shape[1]
            per_group = np.stack(
                [np.bincount(index, outcome[:, k], n_groups) for k in range(3)], axis=1
            )
            totals = draws @ per_group  # (samples, 3)
            with np.errstate(invalid="ignore", divide="ignore"):
                shares = totals / totals.sum(axis=1, keepdims=True)
            boot = np.column_stack([shares, shares[:, 0] + shares[:, 1] / 2])
            boot = boot[np.isfinite(boot).all(axis=1)]
            if boot.size:
                tail = 100 * (1 - level) / 2
                lows, highs = np.percentile(boot, [tail, 100 - tail], axis=0)
                boot_share = boot[:, 3]
    estimates = [*point.tolist(), point_share] if n else [float("nan")] * 4
    share = [Share(float(estimates[k]), float(lows[k]), float(highs[k])) for k in range(4)]
    return HeadToHead(
        wins=share[0],
        ties=share[1],
        losses=share[2],
        win_share=share[3],
        n_items=n,
        n_missing=n_missing,
        level=level,
        win_share_draws=np.asarray(boot_share, dtype=np.float64),
    )


def _win_share_bounds(result: HeadToHead, alpha: float) -> tuple[float, float]:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    draws = result.win_share_draws
    if not draws.size:
        return float("nan"), float("nan")
    low, high = np.percentile(draws, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)


def regressed(result: HeadToHead, alpha: float = 0.05) -> bool:
    """Is the candidate worse than the baseline beyond the noise?

    True when the upper end of the two-sided ``1 - alpha`` interval of the win share is
    below 0.5, the bound a report prints beside the figure at ``level = 1 - alpha``, so the
    flag and the printed interval never disagree (a one-sided test at ``alpha / 2``). False
    when the win share cannot be resampled (fewer than two sources): no evidence, no flag.

    >>> regressed(head_to_head([0] * 30 + [2] * 10 + [1] * 2))
    True
    >>> regressed(head_to_head([0, 1, 2] * 20))
    False
    """
    return bool(_win_share_bounds(result, alpha)[1] < 0.5)


def passes_aa(result: HeadToHead, alpha: float = 0.05) -> bool:
    """The A/A check: a run of the baseline against itself must come out at 50 %.

    True when the ``1 - alpha`` interval of the win share covers 0.5: the panel (and its
    position bias, cancelled by asking both orders) favours neither copy. A failing A/A run
    means the comparison itself is biased, and no head-to-head on it is to be trusted.

    >>> passes_aa(head_to_head([0, 1, 2, 2] * 25))
    True
    """
    low, high = _win_share_bounds(result, alpha)
    return bool(low <= 0.5 <= high)
