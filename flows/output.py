"""How results look in a terminal: tables, CSV, JSON and the end-of-run summary."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table

EXAMPLE_QUERY = (
    "SELECT judge_id, count(*) AS n, avg(score) AS mean_score, count(*) - count(score) AS "
    "unscored FROM judgments WHERE run_id = '{run_id}' GROUP BY judge_id"
)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def format_cell(value: Any) -> str:
    if value is None:
        return "∅"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_rows(
    console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, limit: int
) -> None:
    if fmt == "json":
        records = [{c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]
        console.print_json(json.dumps(records, default=str))
        return
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        writer.writerows([[_plain(v) for v in row] for row in rows])
        console.file.write(buffer.getvalue())
        return
    table = Table(*columns, show_lines=False)
    for row in rows[:limit]:
        table.add_row(*(format_cell(v) for v in row))
    console.print(table)
    if len(rows) > limit:
        console.print(f"… {len(rows) - limit} more rows (use --limit or --format csv)")


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def print_run_summary(console: Console, summary: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    cost = summary.get("cost_usd")
    rows = [
        ("run", summary["run_id"]),
        ("items", str(summary["items"])),
        ("judges", str(summary["judges"])),
        ("judgments", f"{summary['scored']} scored / {summary['unscored']} unscored"),
        ("consensus hallucination rate", _percent(summary.get("hallucination_rate"))),
        (
            "mean score spread",
            "n/a" if summary.get("mean_spread") is None else f"{summary['mean_spread']:.3f}",
        ),
        ("insufficient (quorum not met)", str(summary.get("insufficient", 0))),
        ("cache hits", str(summary.get("cache_hits", 0))),
        (
            "tokens in / out",
            f"{summary.get('input_tokens') or 0} / {summary.get('output_tokens') or 0}",
        ),
        ("cost", "n/a" if cost is None else f"${cost:.4f}"),
        ("rejected rows", str(summary.get("rejected_rows", 0))),
        ("store", summary["db"]),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    rejected = summary.get("rejected") or []
    if rejected:
        console.print(
            f"\n[bold yellow]{summary['rejected_rows']} rejected rows[/] (table row_errors):"
        )
        for row in rejected[:10]:
            console.print(f"  line {row['row']}: {row['error']}", soft_wrap=True)
        if summary["rejected_rows"] > 10:
            console.print(f"  … and {summary['rejected_rows'] - 10} more")
    console.print("\nTry next:")
    query = EXAMPLE_QUERY.format(run_id=summary["run_id"])
    console.print(f'  juryflow sql "{query}" --db {summary["db"]}', soft_wrap=True)
