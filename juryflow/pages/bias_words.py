"""The words and digits of the bias probes, shared by ``juryflow agreement --bias``
(:mod:`juryflow.terminal.bias_table`), the viewer's run page and the HTML report
(:mod:`juryflow.pages.bias_section`), so an effect found on a page reads the same in the
terminal."""

from __future__ import annotations

import math

from juryflow.analysis.bias_report import BiasReport
from juryflow.maths.bias import Effect
from juryflow.maths.group_bootstrap import LEVEL


def signed(value: float) -> str:
    if math.isnan(value):
        return "—"
    # A rounding residue below the printed precision is no sign.
    return f"{value:+.3f}".replace("-0.000", "+0.000")


def interval(effect: Effect) -> str:
    if math.isnan(effect.low):
        return "—"
    return f"[{signed(effect.low)}, {signed(effect.high)}]"


def stands_out(effect: Effect) -> bool:
    """Printed bold: measured, with an interval that excludes 0."""
    return effect.measured and not math.isnan(effect.low) and effect.excludes_zero


def bias_title(report: BiasReport) -> str:
    by = report.group_column or "item"
    return (
        f"Bias probes against the labels, gold: {report.gold_source} "
        f"({100 * LEVEL:.0f} % intervals, resampling by {by})"
    )


def bias_notes(report: BiasReport) -> list[str]:
    """The lines under the table, without their ``note:``."""
    notes = []
    if report.audit_items is not None:
        notes.append(
            f"early stopping: the probes are over the {report.audit_items} audit "
            "items every judge judged"
        )
    if not report.controlled:
        notes.append("no item has a human verdict, so no probe is controlled for gold")
    notes.append(
        "bold = the interval excludes 0; length and self-preference are "
        "Mantel–Haenszel differences of flag rates within gold strata"
    )
    return notes
