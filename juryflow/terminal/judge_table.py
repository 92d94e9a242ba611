"""The end of a run, judge by judge: how many items it scored, how often it flagged one, and
its F1 against the human labels when the dataset has them.

The figures are the run's :class:`AgreementReport` (no statistic is computed here), read
once the run is stored: ~1.4 s at 100,000 items × 5 judges (bench/README.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
from rich.console import RenderableType
from rich.text import Text

from juryflow.terminal.output import plain
from juryflow.terminal.tables import FitTable

if TYPE_CHECKING:
    from juryflow.analysis.agreement_report import AgreementReport


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _f1(report: AgreementReport, predictor: str) -> str:
    for accuracy in report.accuracy:
        if accuracy.predictor == predictor and accuracy.response is not None:
            if not accuracy.n_answered:
                # Its all-items F1 is 0 (it flagged nothing), which reads as a judge that
                # answered and was always wrong: say it never answered.
                return "n/a (no answer)"
            f1 = accuracy.response.f1
            return "—" if f1 is None else f"{f1:.3f}"
    return "—"


def judge_table(report: AgreementReport) -> FitTable:
    """One row per judge (and the consensus's F1 when there are labels)."""
    table = FitTable(title="Judges")
    table.add_column("judge")
    table.add_column("scored", justify="right")
    # A pairwise judge's 'flagged' verdict is "answer B is better" (in both orders).
    table.add_column("B better" if report.position else "flag rate", justify="right")
    if report.has_gold:
        table.add_column("F1 vs gold", justify="right")
    for judge in report.judge_summaries:
        cells: list[RenderableType] = [
            plain(judge.judge_id, one_line=True),
            f"{judge.n_scored}/{judge.n_items}",
            _pct(judge.flag_rate),
        ]
        if report.has_gold:
            cells.append(_f1(report, judge.judge_id))
        table.add_row(*cells)
    if report.has_gold:
        table.add_row(Text("consensus", style="bold"), "", "", _f1(report, "consensus"))
    return table


def judges_of_run(summary: dict[str, Any]) -> RenderableType:
    """The table for the run a summary describes, or one line saying why it is missing."""
    from juryflow.analysis.agreement_report import agreement_report
    from juryflow.storage.connection import StoreError
    from juryflow.storage.reads.analysis import RunNotFound
    from juryflow.storage.store import Store

    try:
        return judge_table(agreement_report(Store(summary["db"]), summary["run_id"]))
    except (RunNotFound, StoreError, duckdb.Error, ValueError) as error:
        return plain(
            f"per-judge figures not read ({error}); `juryflow agreement` shows them",
            "yellow",
            one_line=True,
        )
