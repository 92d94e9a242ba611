"""Lossy early stopping: stop an item once the judges called first agree closely enough.

Exact early stopping (:mod:`juryflow.maths.early_stop`) leaves a judge out only when no
answer of its could change the result. With majority-overlap spans that needs the judges
called first to mark the very same words, which two judges rarely do on a response they
both find hallucinated. The lossy mode also stops an item when the judges called first all
answered, agree on the verdict and their spans agree with a character F1 of at least
``agreement``; the judges left out count as judges that failed, so the item's consensus is
the rule over the judges called. That may differ from the full panel's: how much it costs
in quality is measured out of fold by :func:`lossy_report` (``juryflow calibrate``), never
assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import numpy.typing as npt

from juryflow.maths.calibration.data import (
    BoolArray,
    CalibrationData,
    IntArray,
    Prediction,
    predict,
    span_counts,
    verdict_counts,
)
from juryflow.maths.calibration.procedure import grouped_folds
from juryflow.maths.group_bootstrap import difference_interval, f1_of
from juryflow.maths.records import Judgment
from juryflow.maths.reducers import ConsensusRule

AGREEMENT_GRID = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0)
"""The agreements calibration tries, strictest first (1.0: the same characters)."""

DEFAULT_TOLERANCE = 1.0
"""Points of response or span F1 a lossy stop may lose in the inner folds to be chosen."""


def _chars(judgment: Judgment) -> set[int]:
    return {
        c
        for s in judgment.voting_spans
        if s.char_start is not None and s.char_end is not None
        for c in range(s.char_start, s.char_end)
    }


def span_agreement(a: Judgment, b: Judgment) -> float:
    """Character F1 between two judges' voting spans; 1.0 when neither marks anything.

    >>> from juryflow.maths.records import Span
    >>> one = Judgment("i", "a", "spans", 1.0, (Span(0, 4, "abcd", "exact"),))
    >>> two = Judgment("i", "b", "spans", 1.0, (Span(2, 6, "cdef", "exact"),))
    >>> span_agreement(one, two)
    0.5
    """
    x, y = _chars(a), _chars(b)
    if not x and not y:
        return 1.0
    return 2 * len(x & y) / (len(x) + len(y))


def close_enough(called: Sequence[Judgment], agreement: float) -> bool:
    """Whether the judges called so far agree closely enough for a lossy stop: at least two,
    all scored, one verdict, and every pair of span judges at ``agreement`` or above."""
    if len(called) < 2 or not all(j.scored for j in called):
        return False
    if len({j.verdict for j in called}) > 1:
        return False
    spans = [j for j in called if j.output_kind == "spans"]
    return all(span_agreement(a, b) >= agreement for a, b in combinations(spans, 2))


# ------------------------------------------------------------------ measured on a run


def stoppable(data: CalibrationData, first: Sequence[int], agreement: float) -> BoolArray:
    """(m,) items :func:`close_enough` stops when ``first`` (judge rows) are called first."""
    rows = np.asarray(first, dtype=np.int64)
    answered = data.answered[rows].all(axis=0)
    verdicts = np.nan_to_num(data.verdicts[rows], nan=-1.0)
    one_verdict = (verdicts == verdicts[0]).all(axis=0)
    m = data.n_items
    worst = np.ones(m)
    span_rows = [int(r) for r in rows if data.span_judge[r]]
    for a, b in combinations(span_rows, 2):
        both = np.bincount(data.char_item[data.covered[a] & data.covered[b]], minlength=m)
        size = np.bincount(data.char_item[data.covered[a]], minlength=m) + np.bincount(
            data.char_item[data.covered[b]], minlength=m
        )
        f1 = np.where(size > 0, 2 * both / np.maximum(size, 1), 1.0)
        worst = np.minimum(worst, f1)
    return np.asarray(answered & one_verdict & (worst >= agreement - 1e-12))


def without(data: CalibrationData, judges: Sequence[int], items: BoolArray) -> CalibrationData:
    """``data`` as if ``judges`` had failed on ``items``."""
    rows = np.asarray(judges, dtype=np.int64)
    verdicts, scores = data.verdicts.copy(), data.scores.copy()
    answered, covered = data.span_answered.copy(), data.covered.copy()
    for r in rows:
        verdicts[r, items] = np.nan
        scores[r, items] = np.nan
        answered[r, items] = False
        covered[r, items[data.char_item]] = False
    return replace(data, verdicts=verdicts, scores=scores, span_answered=answered, covered=covered)


def _blend(
    data: CalibrationData, full: Prediction, lossy: Prediction, stop: BoolArray
) -> Prediction:
    chars = np.where(stop[data.char_item], lossy.chars, full.chars)
    return Prediction(np.where(stop, lossy.verdict, full.verdict), chars)


def _counts(data: CalibrationData, pred: Prediction) -> tuple[IntArray, IntArray]:
    return verdict_counts(data, pred.verdict), span_counts(data, pred.chars)


def _f1(counts: IntArray, items: BoolArray) -> float:
    return 100.0 * float(f1_of(counts[items].sum(axis=0)))


@dataclass(frozen=True, slots=True)
class LossyReport:
    """Lossy early stopping on a fully judged, labelled run, out of fold."""

    first: tuple[str, ...]
    """The judges called first (the run's calling order)."""
    agreements: tuple[float | None, ...]
    """The agreement each outer fold chose on the others (None: no lossy stop)."""
    chosen: float | None
    """The agreement to run with: the folds' choice when they agree, else None."""
    calls_saved: float
    """Share of the panel's calls left out on items the folds' choices stopped, 0-1."""
    response_full: float
    response_lossy: float
    response_change: tuple[float, float]
    """Paired bootstrap interval of the response F1 change (points)."""
    span_full: float | None
    span_lossy: float | None
    span_change: tuple[float, float] | None
    in_sample: tuple[tuple[float, float, float | None], ...]
    """Per agreement of the grid, on every item: calls saved, response and span F1 change."""


def lossy_report(
    data: CalibrationData,
    rule: ConsensusRule,
    order: Sequence[str],
    first: int,
    folds: int = 5,
    seed: int = 0,
    tolerance: float = DEFAULT_TOLERANCE,
) -> LossyReport:
    """What a lossy stop would save and cost on this run, each agreement chosen on the other
    folds (the largest saving that loses at most ``tolerance`` points of response and span
    F1 there) and measured on the fold left out."""
    row = {judge_id: n for n, judge_id in enumerate(data.judge_ids)}
    called = [row[j] for j in order[:first] if j in row]
    rest = [row[j] for j in order[first:] if j in row]
    everyone = np.ones(data.n_items, dtype=bool)
    full = predict(data, rule)
    lossy = predict(without(data, rest, everyone), rule)
    full_v, full_s = _counts(data, full)
    spans = bool(data.span_labelled.any() and data.has_spans)
    stops = {a: stoppable(data, called, a) for a in AGREEMENT_GRID}
    counts = {a: _counts(data, _blend(data, full, lossy, stops[a])) for a in AGREEMENT_GRID}

    def change(a: float, items: BoolArray) -> tuple[float, float | None]:
        v, s = counts[a]
        response = _f1(v, items) - _f1(full_v, items)
        return response, (_f1(s, items) - _f1(full_s, items)) if spans else None

    def choose(train: BoolArray) -> float | None:
        best: float | None = None
        for a in AGREEMENT_GRID:  # strictest first: the last that holds saves the most
            response, span = change(a, train)
            if response >= -tolerance and (span is None or span >= -tolerance):
                best = a
        return best

    fold = grouped_folds(data.groups, folds, seed)
    stop = np.zeros(data.n_items, dtype=bool)
    choices: list[float | None] = []
    for k in range(folds):
        a = choose(fold != k)
        choices.append(a)
        if a is not None:
            stop |= stops[a] & (fold == k)
    blended = _blend(data, full, lossy, stop)
    v, s = _counts(data, blended)
    n_calls = data.n_items * len(data.judge_ids)
    in_sample = tuple(
        (float(stops[a].sum() * len(rest) / n_calls), *change(a, everyone)) for a in AGREEMENT_GRID
    )
    groups: npt.NDArray[np.object_] = data.groups
    return LossyReport(
        first=tuple(order[:first]),
        agreements=tuple(choices),
        chosen=choices[0] if len(set(choices)) == 1 else None,
        calls_saved=float(stop.sum() * len(rest) / n_calls),
        response_full=_f1(full_v, everyone),
        response_lossy=_f1(v, everyone),
        response_change=_points(difference_interval(v, full_v, groups, seed)),
        span_full=_f1(full_s, everyone) if spans else None,
        span_lossy=_f1(s, everyone) if spans else None,
        span_change=_points(difference_interval(s, full_s, groups, seed)) if spans else None,
        in_sample=in_sample,
    )


def _points(interval: tuple[float, float]) -> tuple[float, float]:
    return 100.0 * interval[0], 100.0 * interval[1]
