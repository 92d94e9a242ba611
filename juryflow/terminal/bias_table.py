"""The table of ``juryflow agreement --bias``: one row per judge and probe.

The figures come from :class:`juryflow.analysis.bias_report.BiasReport`; this module only
lays them out (effect, its interval, the items counted, what the figure is), in the words of
:mod:`juryflow.pages.bias_words`, which the viewer's run page and the HTML report use too.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.text import Text

from juryflow.analysis.bias_report import BiasReport
from juryflow.pages.bias_words import bias_notes, bias_title, interval, signed, stands_out
from juryflow.terminal.output import plain, safe_text
from juryflow.terminal.tables import FitTable


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
