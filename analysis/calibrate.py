"""`juryflow calibrate RUN`: choose a consensus rule from a labelled run, store it by name.

Wiring only: rows from :mod:`juryflow.storage.reads.analysis`, maths in
:mod:`juryflow.maths.calibration.procedure`, the
stored record in :mod:`juryflow.storage.store`. Applying it: ``juryflow run --calibration NAME`` or
``juryflow reaggregate RUN --calibration NAME``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from juryflow.analysis.lossy_calibration import lossy_stop_dict
from juryflow.judges.panel import parse_panel
from juryflow.maths.calibration.judge_value import (
    SubsetAdvice,
    cheapest_subset,
    leave_one_out,
)
from juryflow.maths.calibration.procedure import (
    CalibrationData,
    CalibrationResult,
    Difference,
    Prediction,
    calibrate,
    word_ids,
)
from juryflow.maths.consensus import coverage
from juryflow.maths.gold import PRF
from juryflow.maths.group_bootstrap import LEVEL
from juryflow.maths.reducers import ConsensusRule
from juryflow.storage.annotations import GoldSource
from juryflow.storage.reads.analysis import (
    CalibrationRows,
    RunNotFound,
    calibration_rows,
    judge_costs,
)
from juryflow.storage.store import CalibrationRecord, Store


class NoLabels(RunNotFound):
    """The run has no labels of the chosen gold source; the message names how to get some."""


_HOW_TO_LABEL = {
    "dataset": "its dataset has no `labels` / `hallucinated` columns; annotate items with "
    "`juryflow view` and pass --gold annotations, or run a labelled dataset",
    "annotations": "annotate some with `juryflow view` (its queue walks the most disputed "
    "first), or use --gold dataset",
    "both": "annotate some with `juryflow view`, or run a labelled dataset",
}

MIN_LABELLED_PER_FOLD = 5
"""Labelled items calibration needs per cross-validation fold: with fewer, a fold's test
set scores nothing and a rule fitted on a handful of items would still be stored."""

_HOW_TO_LABEL_MORE = {
    "dataset": "label more rows of its dataset (`labels` / `hallucinated`), or annotate "
    "items with `juryflow view` and pass --gold both",
    "annotations": "annotate more with `juryflow view` (its queue walks the most disputed first)",
    "both": "annotate more with `juryflow view`",
}


class TooFewLabels(NoLabels):
    """Fewer labelled items than the folds need; the message names the minimum."""


def require_labels(rows: CalibrationRows, folds: int, gold: GoldSource) -> None:
    """Refuse a run with fewer than ``MIN_LABELLED_PER_FOLD`` labelled items per fold."""
    labelled = sum(
        verdict is not None or spans is not None
        for verdict, spans in zip(rows.gold_hallucinated, rows.gold_spans, strict=True)
    )
    needed = MIN_LABELLED_PER_FOLD * folds
    if labelled == 0:
        raise NoLabels(
            f"run {rows.info.run_id} has no item labelled by --gold {gold}: {_HOW_TO_LABEL[gold]}"
        )
    if labelled < needed:
        raise TooFewLabels(
            f"run {rows.info.run_id} has {labelled} item{'s' * (labelled != 1)} labelled by "
            f"--gold {gold}; calibrating needs at least {MIN_LABELLED_PER_FOLD} per fold, "
            f"{needed} for --folds {folds}: {_HOW_TO_LABEL_MORE[gold]}, or pass fewer --folds "
            f"(--folds 2 needs {2 * MIN_LABELLED_PER_FOLD})"
        )


def calibration_data(rows: CalibrationRows, quorum: int) -> CalibrationData:
    """Flatten a run's rows onto one character axis (every item's judged text end to end)."""
    n, m = len(rows.judge_ids), len(rows.item_ids)
    judge_row = {j: k for k, j in enumerate(rows.judge_ids)}
    item_col = {i: k for k, i in enumerate(rows.item_ids)}
    lengths = np.asarray([len(t) for t in rows.texts], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    n_chars = int(offsets[-1])
    verdicts = np.full((n, m), np.nan)
    scores = np.full((n, m), np.nan)
    span_judge = np.asarray([rows.output_kinds.get(j) == "spans" for j in rows.judge_ids])
    span_answered = np.zeros((n, m), dtype=bool)
    for item_id, judge_id, score, verdict in rows.judgments:
        if item_id not in item_col or judge_id not in judge_row or score is None:
            continue
        j, i = judge_row[judge_id], item_col[item_id]
        scores[j, i] = float(score)
        verdicts[j, i] = float(bool(verdict))
        span_answered[j, i] = bool(span_judge[j])
    covered = np.zeros((n, n_chars), dtype=bool)
    by_pair: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for item_id, judge_id, start, end in rows.spans:
        if item_id in item_col and judge_id in judge_row:
            by_pair.setdefault((judge_row[judge_id], item_col[item_id]), []).append((start, end))
    for (j, i), spans in by_pair.items():
        if span_answered[j, i]:
            covered[j, offsets[i] : offsets[i + 1]] = coverage([spans], int(lengths[i]))[0]
    gold_chars = np.zeros(n_chars, dtype=bool)
    span_labelled = np.zeros(m, dtype=bool)
    for i, labels in enumerate(rows.gold_spans):
        if labels is None:
            continue
        span_labelled[i] = True
        gold_chars[offsets[i] : offsets[i + 1]] = coverage([labels], int(lengths[i]))[0]
    words = [word_ids(t) for t in rows.texts]
    # Word ids must be unique across items, so that snapping never crosses into another text.
    shift = np.cumsum([0] + [int(w.max()) + 1 if w.size and w.max() >= 0 else 0 for w in words])
    word_id = np.concatenate(
        [np.where(w >= 0, w + shift[k], -1) for k, w in enumerate(words)] or [np.zeros(0)]
    ).astype(np.int64)
    return CalibrationData(
        judge_ids=tuple(rows.judge_ids),
        span_judge=span_judge,
        verdicts=verdicts,
        scores=scores,
        covered=covered,
        span_answered=span_answered,
        char_item=np.repeat(np.arange(m), lengths),
        word_id=word_id,
        gold_verdict=np.asarray(
            [np.nan if g is None else float(g) for g in rows.gold_hallucinated]
        ),
        gold_chars=gold_chars,
        span_labelled=span_labelled,
        groups=np.asarray(rows.groups, dtype=object),
        quorum=quorum,
    )


def run_calibration(
    store: Store,
    run_id: str | None,
    name: str,
    folds: int = 5,
    seed: int = 0,
    group_column: str | None = None,
    gold: GoldSource = "dataset",
) -> tuple[CalibrationResult, CalibrationRecord]:
    """Calibrate on RUN against the labels of gold source ``gold`` and store the result as
    NAME (replacing an older one)."""
    rows = calibration_rows(store, run_id, group_column, gold)
    require_labels(rows, folds, gold)
    run = store.get_run(rows.info.run_id)
    assert run is not None  # calibration_rows resolved it
    panel = parse_panel(run.panel, f"run {run.run_id}")
    default = (
        ConsensusRule.from_dict(run.consensus) if run.consensus else panel.consensus_rule()
    ).resolve(panel.all_span_judges)
    data = calibration_data(rows, run.quorum)
    result = calibrate(data, default, folds=folds, seed=seed)
    rule = ConsensusRule.from_dict({**result.rule.to_dict(), "name": name})
    lossy = lossy_stop_dict(data, default, panel, run.quorum, folds, seed)
    values = judge_values(data, default, result, folds, seed)
    kept = predict_kept(result)
    advice = cheapest_subset(data, kept, judge_costs(store, run.run_id), folds, seed)
    record = CalibrationRecord(
        name=name,
        created_at=datetime.now(UTC),
        run_id=run.run_id,
        rule=rule.to_dict(),
        folds=folds,
        group_column=rows.group_column,
        seed=seed,
        report={
            **report_dict(result, rows.group_column, gold),
            "lossy_stop": lossy,
            "judges_added": [_judge_value(v) for v in values],
            "subsets": _subsets(advice),
        },
    )
    store.save_calibration(record)
    return result, record


def judge_values(
    data: CalibrationData, default: ConsensusRule, result: CalibrationResult, folds: int, seed: int
) -> list[Difference]:
    """Leave one judge out of the kept rule's families (the default's where a part was not
    kept), refitted on the calibration's own folds."""
    kept = result.kept
    if kept is None:
        return []
    return leave_one_out(data, default, (kept.spans.family, kept.verdict.family), folds, seed)


def predict_kept(result: CalibrationResult) -> Prediction:
    """The kept rule's out-of-fold prediction, as the calibration scored it."""
    assert result.kept_prediction is not None
    return result.kept_prediction


def _judge_value(d: Difference) -> dict[str, Any]:
    """One judge's leave-one-out change, as :func:`_difference` writes a difference."""
    found = _difference(d)
    return {"judge": found.pop("versus"), **found}


def _subsets(advice: SubsetAdvice) -> dict[str, Any]:
    def one(s: Any) -> dict[str, Any]:
        return {
            "size": s.size,
            "judges": list(s.judges),
            "response_f1": s.response_f1,
            "cost": s.cost,
            "within_noise": s.within_noise,
        }

    return {
        "cost_unit": advice.cost_unit,
        "best_f1": advice.best_f1,
        "by_size": [one(s) for s in advice.subsets],
        "cheapest": None if advice.cheapest is None else one(advice.cheapest),
    }


def _prf(prf: PRF | None, interval: tuple[float, float] | None = None) -> dict[str, Any] | None:
    if prf is None:
        return None
    out: dict[str, Any] = {"precision": prf.precision, "recall": prf.recall, "f1": prf.f1}
    if interval is not None:
        out["f1_interval"] = list(interval)
    return out


def _difference(d: Difference) -> dict[str, Any]:
    return {
        "versus": d.versus,
        "response": d.response,
        "response_interval": list(d.response_interval),
        "spans": d.spans,
        "span_interval": None if d.span_interval is None else list(d.span_interval),
    }


def report_dict(
    result: CalibrationResult, group_column: str | None, gold: GoldSource = "dataset"
) -> dict[str, Any]:
    """The calibration's figures as plain JSON (stored, and printed by ``--format json``)."""
    return {
        "gold_source": gold,
        "rule": str(result.rule),
        "folds": result.folds,
        "items": result.n_items,
        "groups": result.n_groups,
        "group_column": group_column,
        "fold_rules": list(result.fold_rules),
        "fold_choices": list(result.fold_choices),
        "choice_on_all_items": result.choice_on_all,
        "kept_default": result.kept_default,
        "interval_level": LEVEL,
        "notes": list(result.notes),
        "predictors": [
            {
                "name": r.name,
                "kind": r.kind,
                "coverage": r.coverage,
                "response": _prf(r.scored.response, r.response_interval),
                "spans": _prf(r.scored.spans, r.span_interval),
            }
            for r in result.results
        ],
        "differences": [_difference(d) for d in result.differences],
    }
