"""The report's self-agreement table: each judge with repeated samples against its own
samples, beside its agreement with the other judges.

Cells of :class:`juryflow.analysis.self_agreement_report.JudgeSelfAgreement` (a field of the
agreement report), laid out as the other tables of :mod:`juryflow.report.model`.
"""

from __future__ import annotations

from juryflow.analysis.self_agreement_report import Interval, JudgeSelfAgreement
from juryflow.report.model import Cell, Column, Table, count_cell, judge_cell, num_cell, table


def interval_cell(found: Interval) -> Cell:
    """A figure with its interval; undefined: n/a and the reason, visible."""
    if found.value is None:
        return Cell("n/a", num=True, na=True, title=found.note, note=found.note)
    return Cell(found.show(), num=True, title=f"n = {found.n}")


SELF_AGREEMENT_COLUMNS: tuple[Column[JudgeSelfAgreement], ...] = (
    ("judge", lambda j: judge_cell(j.judge_id)),
    ("samples", lambda j: count_cell(j.n_samples)),
    ("items", lambda j: count_cell(j.n_items)),
    ("α scores (self)", lambda j: interval_cell(j.score_alpha)),
    ("Fleiss κ (self)", lambda j: interval_cell(j.verdict_kappa)),
    ("Cohen κ with others", lambda j: num_cell(j.kappa_with_others)),
    ("pairs split (self)", lambda j: interval_cell(j.verdict_disagreement)),
    ("split vs others", lambda j: interval_cell(j.others_disagreement)),
    ("span F1 (self)", lambda j: interval_cell(j.span_f1)),
)


def self_agreement_table(judges: list[JudgeSelfAgreement]) -> Table | None:
    return table("self-agreement", SELF_AGREEMENT_COLUMNS, judges) if judges else None


def self_agreement_notes(judges: list[JudgeSelfAgreement]) -> list[str]:
    """One line per judge that disagrees with itself about as much as with the others."""
    return [line for j in judges if (line := j.summary())]
