"""What each judge adds to a calibrated panel, and the cheapest subset worth keeping.

Two questions a team paying for many judges asks once ``juryflow calibrate`` has chosen a
rule, both answered out of fold with the calibration's own outer folds:

- **Leave one judge out** (:func:`leave_one_out`): the chosen rule's families (its span
  and verdict families: stacking, counted votes, one judge followed, ...) are refitted on
  each training fold *without* that judge, their parameters chosen again there; the
  held-out folds' F1 minus the same refit with every judge is what the judge adds, with a
  paired bootstrap interval (sources resampled). A judge that only echoes another adds 0.
- **The cheapest subset within noise of the best** (:func:`cheapest_subset`): for each
  size m, the m judges whose majority a greedy forward search picks on the training folds,
  scored on the held-out ones; the best of those and of the calibrated rule is the bar, and
  the cheapest subset whose F1 is not below it beyond ``MARGIN_SE`` paired standard errors
  is the advice, refitted on every labelled item.

Pure: arrays in, records out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from juryflow.maths.calibration.candidates import echoes, greedy_subsets, subset_rule
from juryflow.maths.calibration.data import BoolArray, CalibrationData, Prediction, predict, score
from juryflow.maths.calibration.procedure import (
    INNER_FOLDS,
    Counts,
    Difference,
    choose,
    grouped_folds,
    out_of_fold,
)
from juryflow.maths.reducers import ConsensusRule


@dataclass(frozen=True, slots=True)
class SubsetScore:
    """The majority of ``judges`` (chosen by greedy search on the training folds)."""

    size: int
    judges: tuple[str, ...]
    """Refitted on every labelled item: the judges to keep."""
    response_f1: float
    """Out of fold."""
    cost: float
    """Per item: the judges' summed cost (USD, or calls where no price is known)."""
    within_noise: bool
    """Not below the best (subsets and the calibrated rule) beyond ``MARGIN_SE``."""


@dataclass(frozen=True, slots=True)
class SubsetAdvice:
    subsets: tuple[SubsetScore, ...]
    best_f1: float
    cheapest: SubsetScore | None
    cost_unit: str
    """``USD`` when every judge has a known price, else ``calls``."""


def without_judge(data: CalibrationData, judge: int) -> CalibrationData:
    """``data`` with judge ``judge``'s row left out (quorum capped at the judges left)."""
    keep = np.arange(len(data.judge_ids)) != judge
    return replace(
        data,
        judge_ids=tuple(j for k, j in enumerate(data.judge_ids) if k != judge),
        span_judge=data.span_judge[keep],
        verdicts=data.verdicts[keep],
        scores=data.scores[keep],
        covered=data.covered[keep],
        span_answered=data.span_answered[keep],
        quorum=min(data.quorum, int(keep.sum())),
    )


def _tests(data: CalibrationData, folds: int, seed: int) -> list[BoolArray]:
    fold = grouped_folds(data.groups, folds, seed)
    return [fold == k for k in range(folds)]


def _refit(
    data: CalibrationData,
    default: ConsensusRule,
    tests: Sequence[BoolArray],
    families: tuple[str, str],
    seed: int,
) -> Prediction:
    labelled = ~np.isnan(data.gold_verdict) | data.span_labelled
    rules = [
        choose(data, default, ~test & labelled, INNER_FOLDS, seed, families).rule for test in tests
    ]
    return out_of_fold(data, tests, rules)


def leave_one_out(
    data: CalibrationData,
    default: ConsensusRule,
    families: tuple[str, str],
    folds: int = 5,
    seed: int = 0,
) -> list[Difference]:
    """What each judge adds to the rule of ``families`` (span family, verdict family): F1
    with it minus F1 without it, one :class:`Difference` per judge (``versus``: its id)."""
    if len(data.judge_ids) < 2:
        return []
    tests = _tests(data, folds, seed)
    counts = Counts(data, seed)
    with_all = _refit(data, default, tests, families, seed)
    out = []
    for j, judge_id in enumerate(data.judge_ids):
        without = _refit(without_judge(data, j), default, tests, families, seed)
        # What the judge adds: F1 with it minus F1 without it.
        out.append(counts.difference(judge_id, with_all, without))
    return out


def cheapest_subset(
    data: CalibrationData,
    calibrated: Prediction,
    costs: Mapping[str, float] | None = None,
    folds: int = 5,
    seed: int = 0,
) -> SubsetAdvice:
    """Each size's best majority subset out of fold, and the cheapest within noise of the
    best (``costs``: USD per item per judge; judges without one cost a call each)."""
    muted = set(echoes(data))
    pool = tuple(j for j in data.judge_ids if j not in muted)
    priced = costs is not None and all(costs.get(j, 0) > 0 for j in pool)
    unit = "USD" if priced else "calls"

    def cost(judges: Sequence[str]) -> float:
        return float(sum(costs[j] for j in judges)) if priced and costs else float(len(judges))

    if len(pool) < 2:
        return SubsetAdvice((), 0.0, None, unit)
    tests = _tests(data, folds, seed)
    labelled = ~np.isnan(data.gold_verdict)
    base = ConsensusRule(weights={j: 0.0 for j in muted})
    everything = labelled.copy()
    paths = [_path(data, base, ~test & labelled, pool) for test in tests]
    final = _path(data, base, everything, pool)
    counts = Counts(data, seed)
    preds = [
        out_of_fold(data, tests, [subset_rule(base, data.judge_ids, p[size]) for p in paths])
        for size in range(len(pool))
    ]
    f1s = [score(data, p).response.f1 for p in preds]
    bar, bar_pred = max(
        [(f, p) for f, p in zip(f1s, preds, strict=True)]
        + [(score(data, calibrated).response.f1, calibrated)],
        key=lambda pair: pair[0],
    )
    subsets = []
    for size in range(len(pool)):
        judges = final[size]
        within = not counts.beats(bar_pred, preds[size], spans=False)
        subsets.append(SubsetScore(size + 1, judges, f1s[size], cost(judges), within))
    fitting = [s for s in subsets if s.within_noise]
    cheapest = min(fitting, key=lambda s: (s.cost, -s.response_f1)) if fitting else None
    return SubsetAdvice(tuple(subsets), float(bar), cheapest, unit)


def _path(
    data: CalibrationData, base: ConsensusRule, train: BoolArray, pool: tuple[str, ...]
) -> list[tuple[str, ...]]:
    """The greedy subsets of every size 1..len(pool) fitted on ``train``."""
    bigger = greedy_subsets(data, base, train, pool)
    first = bigger[0][:1] if bigger else _best_alone(data, base, train, pool)
    return [first, *bigger, pool]


def _best_alone(
    data: CalibrationData, base: ConsensusRule, train: BoolArray, pool: tuple[str, ...]
) -> tuple[str, ...]:
    f1 = [
        score(data, predict(data, subset_rule(base, data.judge_ids, (j,))), train).response.f1
        for j in pool
    ]
    return (pool[int(np.argmax(f1))],)
