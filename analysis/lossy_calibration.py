"""The lossy early stop of a calibrated run, as ``juryflow calibrate`` reports it.

Wiring only: the run's calling order from :mod:`juryflow.judges.call_order`, the maths in
:mod:`juryflow.maths.lossy_stop`.
"""

from __future__ import annotations

from typing import Any

from juryflow.judges.call_order import calling_order
from juryflow.judges.panel import PanelSpec
from juryflow.maths.calibration.data import CalibrationData
from juryflow.maths.early_stop import first_round_size, refusal
from juryflow.maths.lossy_stop import AGREEMENT_GRID, lossy_report
from juryflow.maths.reducers import ConsensusRule


def lossy_stop_dict(
    data: CalibrationData,
    rule: ConsensusRule,
    panel: PanelSpec,
    quorum: int | None,
    folds: int,
    seed: int,
) -> dict[str, Any] | None:
    """What ``lossy_agreement`` would save and cost on this run, out of fold; None when the
    panel cannot stop early (one or two judges, or a rule early stopping refuses)."""
    first = first_round_size(len(panel.judges), quorum)
    if first >= len(panel.judges) or refusal(rule) is not None:
        return None
    report = lossy_report(data, rule, calling_order(panel), first, folds=folds, seed=seed)
    return {
        "first": list(report.first),
        "fold_agreements": list(report.agreements),
        "agreement": report.chosen,
        "calls_saved": report.calls_saved,
        "response_full": report.response_full,
        "response_lossy": report.response_lossy,
        "response_change_interval": list(report.response_change),
        "span_full": report.span_full,
        "span_lossy": report.span_lossy,
        "span_change_interval": None if report.span_change is None else list(report.span_change),
        "in_sample": [
            {"agreement": a, "calls_saved": saved, "response_change": r, "span_change": s}
            for a, (saved, r, s) in zip(AGREEMENT_GRID, report.in_sample, strict=True)
        ],
    }
