"""How results look in a terminal: tables, CSV, JSON and the end-of-run summary.

Everything that comes from data (item ids, texts, judge ids, paths, SQL results, error
messages quoting them) reaches the terminal through :func:`safe_text`, and into rich only
as :class:`rich.text.Text`, never as markup: an item id ``[/]`` must not crash a command,
``[link=...]`` must not become a hyperlink and an ESC byte must not drive the terminal.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from juryflow.analysis.run_figures import spent_text
from juryflow.flows.runtime.interrupts import juryflow_command
from juryflow.maths.pairwise.records import PREFERENCE_WORDS
from juryflow.terminal.tables import FitTable

if TYPE_CHECKING:
    from juryflow.planning.dry_run import DryRun

# C0 controls (ESC among them), DEL, C1 controls (0x9b is a one-byte CSI on some
# terminals) and the bidirectional overrides that make text display in another order
# than it reads ("Trojan Source").
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_CONTROL_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# json.dumps escapes C0 itself; with ensure_ascii=False it leaves these raw.
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f{_BIDI}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: object, *, one_line: bool = False) -> str:
    """``value`` as text with every control character shown escaped (ESC as ``\\x1b``).

    Newlines and tabs are kept unless ``one_line``: a table cell may span lines, a heading
    or an error line may not be split by data.
    """
    text = value if isinstance(value, str) else str(value)
    return (_CONTROL_ONE_LINE if one_line else _CONTROL).sub(_escaped, text)


def plain(value: object, style: str = "", *, one_line: bool = False) -> Text:
    """Data for rich: escaped, and never read as markup."""
    return Text(safe_text(value, one_line=one_line), style=style)


def print_error(console: Console, message: str) -> None:
    """``error: MESSAGE`` as one unwrapped line per line of the message."""
    console.print(Text.assemble(("error:", "bold red"), " ", safe_text(message)), soft_wrap=True)


def dump_json(payload: Any) -> str:
    """JSON with every control character escaped (non-ASCII text is kept readable)."""
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def _csv_value(value: Any) -> Any:
    value = _plain(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return safe_text(value)


def format_cell(value: Any) -> str:
    if value is None:
        return "∅"
    if isinstance(value, float):
        return f"{value:.4g}"
    return safe_text(value)


def print_rows(
    console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, limit: int
) -> None:
    if fmt == "json":
        records = [{c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]
        console.file.write(dump_json(records) + "\n")
        return
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([safe_text(c) for c in columns])
        writer.writerows([[_csv_value(v) for v in row] for row in rows])
        console.file.write(buffer.getvalue())
        return
    # Wider than the terminal, the columns wrap into stacked tables, each led by the first
    # column, rather than being cut: every header and value is shown whole.
    table = FitTable()
    for column in columns:
        table.add_column(plain(column))
    for row in rows[:limit]:
        table.add_row(*(Text(format_cell(v)) for v in row))
    console.print(table)
    if len(rows) > limit:
        console.print(f"… {len(rows) - limit} more rows (use --limit or --format csv)")


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _cost_rows(summary: dict[str, Any], cost: float | None) -> list[tuple[str, str]]:
    """What the run paid for model calls: only calls it made, not judgments it reused."""
    if summary.get("model_calls") is False:  # reaggregate: judgments copied, nothing called
        return [("model cost", "none: no judge was called")]
    tokens = f"{summary.get('input_tokens') or 0} / {summary.get('output_tokens') or 0}"
    if "cost_spent_usd" not in summary:
        return [
            ("tokens in / out", tokens),
            *_provider_cache_rows(summary),
            ("cost", "n/a" if cost is None else f"${cost:.4f}"),
        ]
    spent = spent_text(summary)
    reused = summary.get("cost_reused_usd") or 0.0
    if reused:
        spent += f" · ${reused:.4f} reused from the cache (not paid again)"
    if "input_tokens_spent" in summary:  # the tokens of this run's calls, as its cost
        tokens = f"{summary['input_tokens_spent']} / {summary['output_tokens_spent']}"
    return [("tokens in / out", tokens), *_provider_cache_rows(summary), ("cost", spent)]


def _provider_cache_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Of the input tokens, those the providers' prompt caches served and wrote; no row when
    no call reported them (offline judges, servers without a prompt cache)."""
    if summary.get("cache_read_tokens") is None and summary.get("cache_write_tokens") is None:
        return []
    read = summary.get("cache_read_tokens_spent", summary.get("cache_read_tokens")) or 0
    written = summary.get("cache_write_tokens_spent", summary.get("cache_write_tokens")) or 0
    return [("prompt cache read / written", f"{read} / {written} of the input tokens")]


def _pace_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    seconds = summary.get("duration_seconds")
    if seconds is None:
        return []
    rate = summary.get("judgments_per_second")
    command = summary.get("command_seconds")
    # The command's wall time is what a person waited; the judging is the part the run did.
    duration = (
        f"{seconds:.1f} s"
        if command is None
        else (f"{command:.1f} s for the command (judging {seconds:.1f} s)")
    )
    return [
        ("duration", duration),
        ("throughput", "n/a" if rate is None else f"{rate:.1f} judgments/s"),
        ("retries", str(summary.get("retries", 0))),
        *_rate_limit_rows(summary),
    ]


def _rate_limit_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The 429s each LLM judge got (retried calls included) over every invocation of the
    run, as the store keeps them; no row without LLM judges."""
    if "rate_limited" not in summary:
        return []
    counts = summary["rate_limited"]
    if counts is None:
        return [("429 answers", "not counted: the calls were made on Dask workers")]
    if not counts:
        return []
    total = sum(counts.values())
    by_judge = ", ".join(f"{judge} {n}" for judge, n in counts.items() if n)
    return [("429 answers", f"{total} ({by_judge})" if total else "none")]


REASON_CHARS = 100


def _print_unscored(console: Console, judges: Sequence[dict[str, Any]]) -> None:
    """Per judge with unscored judgments: how many, and its top reasons."""
    if not judges:
        return
    console.print("\nunscored by judge:")
    for judge in judges:
        reasons = "; ".join(
            f"{_shortened(r['reason'])} ×{r['count']}" for r in judge.get("reasons", [])
        )
        line = f"  {judge['judge_id']}: {judge['unscored']}" + (f" ({reasons})" if reasons else "")
        console.print(plain(line, one_line=True), soft_wrap=True)


def _shortened(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"


def _unlocalised_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Items whose judges agree something is wrong but not where: a verdict read off the
    spans calls them clean, so a low consensus rate beside judges that flag everything is
    explained here rather than only in `juryflow agreement`."""
    count = summary.get("unlocalised") or 0
    if not count:
        return []
    items = summary.get("items") or 0
    return [
        (
            "unlocalised",
            f"{count} of {items} items: the judges agree something is wrong, not where (no "
            "character won the span vote); `juryflow agreement` and `juryflow calibrate` "
            "weigh it",
        )
    ]


def _pairwise_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """A pairwise run: how often a judge's two orders disagreed, and what the panel
    preferred (in place of a hallucination rate, which a preference has not)."""
    judged = summary.get("preference_judgments") or 0
    if not judged:
        return []
    inconsistent = summary.get("inconsistent") or 0
    preferred = summary.get("preferred") or {}
    decided = sum(preferred.values()) or 0
    share = (
        "n/a"
        if not decided
        else ", ".join(
            f"{name} {preferred.get(key, 0) / decided:.0%}" for key, _, name in PREFERENCE_WORDS
        )
    )
    return [
        (
            "inconsistent (orders disagree)",
            f"{inconsistent} of {judged} judgments ({inconsistent / judged:.0%}): the judge "
            "changed its verdict when the answers swapped places; left out of the consensus",
        ),
        ("panel prefers", f"{share} (of {decided} items with a consensus)"),
    ]


def _early_stop_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    skipped = summary.get("skipped_decided") or 0
    audit = summary.get("audit_items") or 0
    if not skipped and not audit:
        return []
    calls = f"{skipped} not made ({summary.get('items_decided_early') or 0} items decided early)"
    lossy = summary.get("items_stopped_lossy") or 0
    if lossy:
        calls += f"; {lossy} of them stopped on close agreement (lossy, not proved exact)"
    return [
        ("judge calls skipped", calls),
        ("audit items (every judge)", str(audit)),
    ]


def summary_table(summary: dict[str, Any]) -> Table:
    """The run's figures, one ``name  value`` row each."""
    table = Table(show_header=False, box=None, pad_edge=False)
    # A narrow terminal wraps the values, never a row's name, and folds a long path rather
    # than cutting it to `…`.
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    cost = summary.get("cost_usd")
    rows = [
        ("run", summary["run_id"]),
        ("items", str(summary["items"])),
        ("judges", str(summary["judges"])),
        ("judgments", f"{summary['scored']} scored / {summary['unscored']} unscored"),
        *(
            _pairwise_rows(summary)
            or [("consensus hallucination rate", _percent(summary.get("hallucination_rate")))]
        ),
        (
            "mean score spread",
            "n/a" if summary.get("mean_spread") is None else f"{summary['mean_spread']:.3f}",
        ),
        ("insufficient (quorum not met)", str(summary.get("insufficient", 0))),
        *_unlocalised_rows(summary),
        ("cache hits", str(summary.get("cache_hits", 0))),
        *_early_stop_rows(summary),
        *_cost_rows(summary, cost),
        *_pace_rows(summary),
        ("rejected rows", str(summary.get("rejected_rows", 0))),
        ("store", summary["db"]),
    ]
    for name, value in rows:
        table.add_row(name, plain(value, one_line=True))
    return table


def print_run_summary(
    console: Console, summary: dict[str, Any], judges: RenderableType | None = None
) -> None:
    """The run's figures, its warnings and unscored reasons, ``judges`` (the per-judge
    table) and the commands that look further."""
    console.print(summary_table(summary))
    for warning in summary.get("warnings") or ():
        console.print(Text("warning: ", style="yellow") + plain(warning), soft_wrap=True)
    _print_unscored(console, summary.get("unscored_by_judge") or [])
    rejected = summary.get("rejected") or []
    if rejected:
        console.print(
            f"\n[bold yellow]{summary['rejected_rows']} rejected rows[/] (table row_errors):"
        )
        for row in rejected[:10]:
            line = f"  line {row['row']}: {safe_text(row['error'], one_line=True)}"
            console.print(Text(line), soft_wrap=True)
        if summary["rejected_rows"] > 10:
            console.print(f"  … and {summary['rejected_rows'] - 10} more")
    if judges is not None:
        console.print()
        console.print(judges)
    console.print("\nNext:")
    db = shlex.quote(str(summary["db"]))
    juryflow = juryflow_command()  # a path when the shell would not find a bare `juryflow`
    for command, what in (
        (f"{juryflow} agreement {summary['run_id']} --db {db}", "how far the judges agree, "
         "and how right they are against the human labels"),
        (f"{juryflow} view --db {db} --open", "each item with what every judge flagged"),
    ):  # fmt: skip
        console.print(plain(f"  {command}   # {what}", one_line=True), soft_wrap=True)


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.4f}"


def print_dry_run(console: Console, estimate: DryRun) -> None:
    """The ``--dry-run`` table: per judge the calls, cache hits, tokens and cost, a total,
    and how each figure was estimated."""
    from juryflow.planning.dry_run import INPUT_METHOD

    rejected = f", {estimate.rejected_rows} rejected rows" if estimate.rejected_rows else ""
    heading = (
        f"dry run: {estimate.items} items{rejected} from {estimate.dataset} · panel "
        f"{estimate.panel_name} · no model was called and nothing was written"
    )
    console.print(plain(heading, one_line=True), soft_wrap=True)
    # Stacked in parts, each led by the judge, when the terminal is narrow: a cut id could
    # name another judge, and a cut figure is no figure.
    table = FitTable()
    headers = ("judge", "model", "calls", "cached", "tokens in", "tokens out (est.)",
               "cost (est.)", "cost (max)")  # fmt: skip
    for index, name in enumerate(headers):
        table.add_column(name, justify="left" if index < 2 else "right")
    for j in estimate.judges:
        table.add_row(
            plain(j.judge_id, one_line=True),
            plain(j.model or "offline", one_line=True),
            str(j.calls),
            str(j.cached),
            str(j.input_tokens),
            str(j.output_tokens),
            _usd(j.cost_usd),
            _usd(j.cost_max_usd),
        )
    table.add_section()
    table.add_row(
        "total",
        "",
        str(estimate.total("calls")),
        str(estimate.total("cached")),
        str(estimate.total("input_tokens")),
        str(estimate.total("output_tokens")),
        _usd(estimate.total("cost_usd")),
        _usd(estimate.total("cost_max_usd")),
    )
    # Outside a terminal (a pipe, a CI log) nothing wraps the lines: the table keeps its
    # natural width rather than folding figures at 80 columns.
    wide = console if console.is_terminal else Console(file=console.file, width=160)
    wide.print(table)
    lines = [INPUT_METHOD]
    for j in estimate.judges:
        if j.model is None:
            continue
        lines.append(f"output tokens of {j.judge_id}: {j.output_basis}; at most {j.max_tokens} "
                     "per call (max_tokens), which cost (max) assumes")  # fmt: skip
        if j.price is None:
            lines.append(
                f"no price for {j.judge_id}'s model {j.model}: add it to the panel file, "
                f"prices: {{{j.model}: {{input: USD, output: USD}}}} (per million tokens)"
            )
        if j.no_call:
            lines.append(f"{j.judge_id}: {j.no_call} items miss a prompt variable (unscored, "
                         "no call)")  # fmt: skip
    if estimate.cache_used:
        lines.append("cached: answers the store's judgment cache would give without a call")
    else:
        lines.append("cache not consulted (no store yet, or --no-cache): every prompt is a call")
    lines += estimate.notes
    if estimate.max_cost is not None:
        total, most = estimate.total("cost_usd"), estimate.total("cost_max_usd")
        verdict = (
            "the run would likely stop at the budget (resumable)"
            if total is not None and total > estimate.max_cost
            else "within the budget"
            if most is not None and most <= estimate.max_cost
            else "within the budget if answers are of the estimated length"
        )
        lines.append(f"--max-cost ${estimate.max_cost:g}: {verdict}")
    for line in lines:
        console.print(plain(f"  {line}", one_line=True), soft_wrap=True)


def duration(seconds: float | None) -> str:
    """A run's duration as ``runs`` and the viewer show it: ``12.3 s``, ``4:05``, ``1:02:03``."""
    if seconds is None:
        return "—"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f} s"
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def terminal_console(*, stderr: bool = False, highlight: bool = True) -> Console:
    """A console whose width follows the terminal (or ``COLUMNS``) at every print.

    rich fixes a console's width for good when ``COLUMNS`` is set as the console is made.
    The command line's consoles are made once, on import, so a ``COLUMNS`` set at that
    moment (by a caller, for one command) would bind every later command to that width.
    """
    console = Console(stderr=stderr, highlight=highlight)
    console._width = None  # rich has no public way to unset a width it read at creation
    return console
