"""The table of ``juryflow agreement --bias``: one row per judge and probe.

The figures come from :class:`juryflow.analysis.bias_report.BiasReport`; this module only
lays them out (effect, its interval, the items counted, what the figure is). The viewer's
run page shows them with the same words and digits: it takes :func:`signed`,
:func:`interval`, :func:`bias_title` and :func:`bias_notes` from here.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.text import Text

from juryflow.analysis.bias_report import BiasReport
from juryflow.maths.bias import Effect
from juryflow.maths.group_bootstrap import LEVEL
from juryflow.terminal.output import plain, safe_text
from juryflow.terminal.tables import FitTable


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


def bias_table(report: BiasReport) -> FitTable:
    table = FitTable(title=bias_title(report), key_columns=2)
    for name, justify in (
        ("judge", "left"),
        ("probe", "left"),
        ("effect", "right"),
        ("interval", "right"),
        ("n", "right"),
        ("note", "left"),
    ):
        table.add_column(name, justify=justify)
    for p in report.probes:
        e = p.effect
        table.add_row(
            plain(p.judge_id),
            p.probe,
            Text(signed(e.value), style="bold" if stands_out(e) else ""),
            interval(e),
            str(e.n) if e.n else "",
            plain(p.note),
        )
    return table


def print_bias(console: Console, report: BiasReport) -> None:
    heading = f" {report.run_id} · panel {report.panel_name} · {report.n_items} items"
    console.print(Text.assemble(("run", "bold"), safe_text(heading, one_line=True)), soft_wrap=True)
    console.print(bias_table(report))
    for note in bias_notes(report):
        console.print(plain(f"note: {note}"))


def bias_payload(report: BiasReport) -> dict[str, Any]:
    """The report as JSON-ready data (NaN as None)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return {str(k): v for k, v in clean(asdict(report)).items()}
