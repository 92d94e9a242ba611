"""The report's tables of judges asked more than once per item: each judge with repeated
samples against its own samples, beside its agreement with the other judges; each pairwise
judge's two orders; and what a pairwise panel preferred.

Cells of the agreement report's
:class:`~juryflow.analysis.self_agreement_report.JudgeSelfAgreement`,
:class:`~juryflow.analysis.position_report.JudgePosition` and
:class:`~juryflow.analysis.preference_report.PreferenceSummary`, laid out as the other tables
of :mod:`juryflow.report.model`.
"""

from __future__ import annotations

from juryflow.analysis.position_report import JudgePosition
from juryflow.analysis.preference_report import ModelStrength, PreferenceSummary
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


POSITION_COLUMNS: tuple[Column[JudgePosition], ...] = (
    ("judge", lambda j: judge_cell(j.judge_id)),
    ("flip rate (orders disagree)", lambda j: Cell(j.flip_rate.show(), num=True)),
    ("picks the answer shown first", lambda j: Cell(j.first_shown.show(), num=True)),
    ("κ with the other judges", lambda j: num_cell(j.kappa_with_judges)),
    ("κ with the human label", lambda j: num_cell(j.human_kappa)),
)

STRENGTH_COLUMNS: tuple[Column[ModelStrength], ...] = (
    ("model", lambda m: Cell(m.model)),
    ("Bradley–Terry strength", lambda m: Cell(m.strength.show(percent=False), num=True)),
    ("comparisons", lambda m: count_cell(m.comparisons)),
)


def head_to_head_facts(preference: PreferenceSummary) -> list[tuple[str, str]]:
    """B against A in a pairwise run: the report's, the run page's and the comparison's."""
    facts = [
        ("items with a consensus", f"{preference.items} ({preference.without_consensus} without)"),
        ("B wins", preference.wins.show()),
        ("ties", preference.ties.show()),
        ("B loses", preference.losses.show()),
        ("B's win share", preference.win_share.show()),
    ]
    if preference.effective_panel_size is not None:
        facts.append(("effective panel size", f"{preference.effective_panel_size:.2f}"))
    return facts


def pairwise_tables(
    judges: list[JudgePosition], preference: PreferenceSummary | None
) -> dict[str, Table | list[tuple[str, str]] | None]:
    """A pairwise run's tables (all None in other runs)."""
    if not judges:
        return {"positions": None, "head_to_head": None, "strengths": None}
    facts = [] if preference is None else head_to_head_facts(preference)
    strengths = preference.strengths if preference is not None else []
    return {
        "positions": table("positions", POSITION_COLUMNS, judges),
        "head_to_head": facts or None,
        "strengths": table("strengths", STRENGTH_COLUMNS, strengths) if strengths else None,
    }
