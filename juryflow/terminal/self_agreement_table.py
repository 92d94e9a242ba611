"""The self-agreement table of ``juryflow agreement``: each judge with repeated samples,
agreement between its own samples beside its agreement with the other judges.

The figures come from :class:`juryflow.analysis.agreement_report.AgreementReport`
(``self_agreement``); this module only lays them out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from juryflow.maths.group_bootstrap import LEVEL
from juryflow.terminal.output import plain
from juryflow.terminal.tables import FitTable

if TYPE_CHECKING:  # types only: the CLI imports this table with every command
    from juryflow.analysis.position_report import JudgePosition
    from juryflow.analysis.preference_report import PreferenceSummary
    from juryflow.analysis.self_agreement_report import Interval, JudgeSelfAgreement


def _cell(found: Interval) -> str:
    return "—" if found.value is None else found.show()


def self_agreement_table(judges: list[JudgeSelfAgreement]) -> FitTable:
    table = FitTable(
        title="Self-agreement: each judge against its own samples "
        f"({100 * LEVEL:.0f} % intervals, resampling by source)"
    )
    for name, justify in (
        ("judge", "left"),
        ("samples", "right"),
        ("items", "right"),
        ("α scores (self)", "right"),
        ("Fleiss κ (self)", "right"),
        ("Cohen κ with others", "right"),
        ("pairs split (self)", "right"),
        ("split vs others", "right"),
        ("span F1 (self)", "right"),
    ):
        table.add_column(name, justify=justify)
    for j in judges:
        table.add_row(
            plain(j.judge_id),
            str(j.n_samples),
            str(j.n_items),
            _cell(j.score_alpha),
            _cell(j.verdict_kappa),
            "—" if j.kappa_with_others is None else f"{j.kappa_with_others:.3f}",
            _cell(j.verdict_disagreement),
            _cell(j.others_disagreement),
            _cell(j.span_f1),
        )
    return table


def print_self_agreement(console: Console, judges: list[JudgeSelfAgreement]) -> None:
    """The table, then one line per judge that disagrees with itself about as much as with
    the others."""
    if not judges:
        return
    console.print(self_agreement_table(judges))
    for judge in judges:
        line = judge.summary()
        if line:
            console.print(plain(f"note: {line}", "yellow"))


def positions_table(judges: list[JudgePosition]) -> FitTable:
    """Per pairwise judge: how often its two orders disagree, its pull to the first answer
    shown, and its agreement with the other judges and the human label."""
    table = FitTable(
        title=f"Pairwise judges in both orders ({100 * LEVEL:.0f} % intervals, resampling by "
        "source)"
    )
    human = any(j.human_items for j in judges)
    table.add_column("judge")
    table.add_column("flip rate (orders disagree)", justify="right")
    table.add_column("picks the answer shown first", justify="right")
    table.add_column("κ with the other judges", justify="right")
    if human:
        table.add_column("κ with the human label", justify="right")
    for j in judges:
        others = "—" if j.kappa_with_judges is None else f"{j.kappa_with_judges:.3f}"
        cells: list[Text | str] = [
            plain(j.judge_id),
            j.flip_rate.show(),
            j.first_shown.show(),
            others,
        ]
        if human:
            kappa = "—" if j.human_kappa is None else f"{j.human_kappa:.3f}"
            cells.append(f"{kappa} ({j.human_items} items)")
        table.add_row(*cells)
    return table


def print_positions(console: Console, judges: list[JudgePosition]) -> None:
    """Pairwise judges in both orders: flips and the pull of the first position."""
    if not judges:
        return
    console.print(positions_table(judges))
    console.print(
        plain(
            "a flip is left out of the consensus as inconsistent; 50 % first-shown picks is "
            "no position bias",
            one_line=True,
        ),
        soft_wrap=True,
    )


def preference_table(summary: PreferenceSummary) -> FitTable:
    """B against A head to head: wins, ties, losses and B's share, each with its interval."""
    table = FitTable(
        title=f"B against A ({summary.items} items with a consensus, "
        f"{summary.without_consensus} without; {100 * LEVEL:.0f} % intervals)"
    )
    for name in ("B wins", "ties", "B loses", "B's win share"):
        table.add_column(name, justify="right")
    table.add_row(
        summary.wins.show(), summary.ties.show(), summary.losses.show(), summary.win_share.show()
    )
    return table


def strengths_table(summary: PreferenceSummary) -> FitTable:
    """The candidate models' Bradley–Terry strengths."""
    strengths = FitTable(title="Candidate models, Bradley–Terry strength (log-odds, centred)")
    for name, justify in (("model", "left"), ("strength", "right"), ("comparisons", "right")):
        strengths.add_column(name, justify=justify)
    for m in summary.strengths:
        strengths.add_row(plain(m.model), m.strength.show(percent=False), str(m.comparisons))
    return strengths


def print_preference(console: Console, summary: PreferenceSummary | None) -> None:
    """B against A head to head, then the candidate models' strengths."""
    if summary is None:
        return
    console.print(preference_table(summary))
    if summary.regressed:
        console.print(plain("B is worse than A beyond the noise (win share below 50 %)", "red"))
    if summary.effective_panel_size is not None:
        console.print(
            plain(
                f"effective panel size (errors against the human preference): "
                f"{summary.effective_panel_size:.2f} independent judges",
                one_line=True,
            ),
            soft_wrap=True,
        )
    if summary.strengths:
        console.print(strengths_table(summary))
        if summary.position is not None and summary.position.value is not None:
            console.print(
                plain(
                    "first-shown advantage in the fit: " + summary.position.show(percent=False),
                    one_line=True,
                ),
                soft_wrap=True,
            )
