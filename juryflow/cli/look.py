"""`juryflow show` and `juryflow compare` (issue 43): one item of a stored run with every
judge's answer, and two stored runs compared item by item as `juryflow regression` compares
them. Both only read: nothing is judged, and the comparison is not stored (a comparison
found regressed would change which run `regression --baseline last` picks).

Registered on the main app by :func:`register` (``juryflow/cli/commands.py``). The item
comes from :func:`juryflow.storage.reads.item_queries.item_record`, as the viewer's item
page reads it; the comparison's figures from :mod:`juryflow.maths.regression_stats`, over
the scores :func:`juryflow.storage.comparisons.compare_stored` reads.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import duckdb
import typer
from rich.text import Text

from juryflow.cli.ops import _print_regression
from juryflow.cli.runs import DbOption, fail, resolve_or_exit
from juryflow.maths.regression_stats import Thresholds
from juryflow.pages.rule_labels import UNLOCALISED_NOTE
from juryflow.terminal import output
from juryflow.terminal.output import plain, safe_text, terminal_console
from juryflow.terminal.regression_markdown import (
    append_step_summary,
    figure_signed,
    regression_markdown,
)
from juryflow.terminal.tables import FitTable

if TYPE_CHECKING:
    from juryflow.maths.regression_stats import Comparison
    from juryflow.storage.reads.item_queries import ItemRecord, JudgmentRecord, SpanRecord
    from juryflow.storage.store import Store

console = terminal_console()
err = terminal_console(stderr=True)

T = TypeVar("T")

CONSENSUS_STYLE = "bold white on red"
JUDGE_STYLE = "underline yellow"
SHOWN_FLIPS = 10
"""Flipped item ids `compare` lists; `--format json` has them all."""

# -- show -------------------------------------------------------------------------------


def _number(value: float | None, digits: int = 2) -> str:
    """A stored figure as shown; "–" for none (a NaN cost is none too)."""
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _verdict(score: float | None, verdict: bool | None) -> Text:
    if score is None:
        return Text("unscored", style="dim")
    if verdict is None:
        return Text("–", style="dim")
    return Text("hallucinated", style="red") if verdict else Text("clean", style="green")


def _shortened(value: Any, chars: int) -> str:
    """A reference variable on one line, cut to ``chars`` characters (0: whole)."""
    flat = " ".join(str(value).split())
    return flat if chars == 0 or len(flat) <= chars else flat[:chars] + "…"


def _read_item(db: str | None, run_id: str, text: str) -> ItemRecord:
    """The item ``text`` names (exact id or unique prefix), or one line and exit 2."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.reads.item_queries import item_record
    from juryflow.storage.reads.item_view import ItemIdError, resolve_item_id_in
    from juryflow.storage.store import Store

    try:
        with Store(db).read() as con:
            record = item_record(con, run_id, resolve_item_id_in(con, run_id, text))
    except (ItemIdError, StoreError) as error:
        fail(str(error))
    except duckdb.Error as error:
        fail(f"cannot read item {text!r} of run {run_id}: {type(error).__name__}: {error}")
    assert record is not None  # resolved in the same read
    return record


def _marked_text(record: ItemRecord) -> Text:
    """The judged text once: the consensus's spans in one style, the characters only a
    judge marked in another (segments cut where any span starts or ends)."""
    from juryflow.pages.overlay import Layer, segments

    consensus = record.consensus.spans if record.consensus else ()
    layers = [
        Layer("consensus", "consensus", [(s.char_start, s.char_end) for s in consensus]),
        Layer("judges", "judges", [_offsets(s) for j in record.judgments for s in _anchored(j)]),
    ]
    marked = Text()
    for segment in segments(record.text, layers):
        style = (
            CONSENSUS_STYLE
            if "consensus" in segment.layers
            else (JUDGE_STYLE if segment.layers else "")
        )
        marked.append(safe_text(segment.text), style=style)
    return marked


def _anchored(judgment: JudgmentRecord) -> list[SpanRecord]:
    return [s for s in judgment.spans if s.char_start is not None and s.char_end is not None]


def _offsets(span: SpanRecord) -> tuple[int, int]:
    return (span.char_start or 0, span.char_end or 0)


def _span_line(start: int | None, end: int | None, quoted: str, extra: str = "") -> Text:
    where = "unanchored" if start is None or end is None else f"{start}–{end}"
    line = Text(f"«{safe_text(' '.join(quoted.split()), one_line=True)}»")
    line.append(f" {where}{extra}", style="dim")
    return line


def _spans_cell(judgment: JudgmentRecord) -> Text:
    if judgment.score is None:
        return plain(judgment.unscored_reason or "unscored", "dim", one_line=True)
    if judgment.output_kind != "spans":
        return Text("(score only)", style="dim")
    if not judgment.spans:
        return Text("(none)", style="dim")
    lines = [_span_line(s.char_start, s.char_end, s.text) for s in judgment.spans]
    return Text("\n").join(lines)


def _judges_table(record: ItemRecord) -> FitTable:
    table = FitTable()
    for name in ("judge", "model", "score", "verdict", "cost", "spans / unscored reason"):
        table.add_column(name, justify="right" if name in ("score", "cost") else "left")
    for j in record.judgments:
        cost = _number(j.cost_usd, 4)
        table.add_row(
            plain(j.judge_id, one_line=True),
            plain(j.model or j.provider, one_line=True),
            _number(j.score),
            _verdict(j.score, j.verdict),
            cost if cost == "–" else f"${cost}",
            _spans_cell(j),
        )
    return table


def _consensus_lines(record: ItemRecord) -> list[Text]:
    c = record.consensus
    if c is None:
        return [Text("consensus: none stored for this item", style="yellow")]
    head = Text.assemble(("consensus: ", "bold"))
    head.append_text(_verdict(c.score, c.hallucinated) if c.status == "ok" else plain(c.status))
    head.append(
        f" · score {_number(c.score)} (median {_number(c.score_median)}) · status {c.status} · "
        f"{c.n_scored} of {c.n_judges} judges scored"
        + (f" · verdict rule {c.verdict_rule}" if c.verdict_rule else ""),
        style="dim",
    )
    lines = [head]
    lines += [Text("  ") + _span_line(s.char_start, s.char_end, s.text, f", {s.votes} votes")
              for s in c.spans]  # fmt: skip
    if c.unlocalised:
        lines.append(Text(f"  {UNLOCALISED_NOTE}", style="dim"))
    return lines


def _gold_lines(record: ItemRecord) -> list[Text]:
    if record.gold_hallucinated is None and record.gold_spans is None:
        return []
    line = Text.assemble(("gold (dataset): ", "italic"))
    line.append_text(_verdict(0.0, record.gold_hallucinated))
    spans = [Text("  ") + _span_line(s, e, record.text[s:e]) for s, e in record.gold_spans or ()]
    return [line, *spans]


def _print_item(record: ItemRecord, reference_chars: int) -> None:
    console.print(
        plain(f"item {record.item_id} (row {record.row_number}) of run {record.run_id}", "bold"),
        soft_wrap=True,
    )
    for name, value in record.variables.items():
        if name != record.text_variable:
            line = Text.assemble((f"{safe_text(name, one_line=True)}: ", "dim"))
            line.append(safe_text(_shortened(value, reference_chars), one_line=True))
            console.print(line)
    console.print(plain(f"\n{record.text_variable or 'text'}:", "bold"))
    marked = _marked_text(record)
    console.print(marked)
    if marked.spans:  # a legend only where something is marked
        console.print(
            Text.assemble(
                ("consensus span", CONSENSUS_STYLE), "  ", ("a judge's span", JUDGE_STYLE)
            )
        )
    console.print()
    console.print(_judges_table(record))
    for line in [*_consensus_lines(record), *_gold_lines(record)]:
        console.print(line, soft_wrap=True)
    answered = {j.judge_id for j in record.judgments}
    missing = [j for j in record.judges if j not in answered and j not in record.skipped]
    if record.skipped:
        console.print(plain(f"not called (early stop): {', '.join(record.skipped)}", "dim"))
    if missing:
        console.print(plain(f"no answer stored from: {', '.join(missing)}", "yellow"))


def _no_nan(value: Any) -> Any:
    """A NaN figure in an item's record as None: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


def _item_payload(record: ItemRecord, reference_chars: int) -> dict[str, Any]:
    payload = asdict(record)
    payload["text"] = record.text
    payload["variables"] = {
        name: value if name == record.text_variable else _shortened(value, reference_chars)
        for name, value in record.variables.items()
    }
    return dict(_no_nan(payload))


def show_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of it.")],
    item: Annotated[
        str, typer.Argument(metavar="ITEM", help="Item id in RUN, or a unique prefix of it.")
    ],
    db: DbOption = None,
    format_: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    reference_chars: Annotated[
        int,
        typer.Option(min=0, metavar="N", help="Characters shown of each reference value (0: all)."),
    ] = 300,
) -> None:
    """One item of RUN: its judged text with the consensus's and the judges' spans marked,
    its reference (shortened), each judge's score, verdict, spans, model and cost, the
    consensus and the human label if the run has one."""
    if format_ not in {"table", "json"}:
        fail("--format must be table or json")
    run_id = resolve_or_exit(db, run)
    assert run_id is not None
    record = _read_item(db, run_id, item)
    if format_ == "json":
        console.file.write(output.dump_json(_item_payload(record, reference_chars)) + "\n")
        return
    _print_item(record, reference_chars)


# -- compare ----------------------------------------------------------------------------

_DEFAULTS = Thresholds()
"""`juryflow regression`'s thresholds are these defaults too."""


def _default(value: T | None) -> T:
    # Thresholds switches a check off with None; none of its defaults does.
    assert value is not None
    return value


def _comparison(
    store: Store, run_id: str, baseline_id: str, thresholds: Thresholds
) -> dict[str, Any]:
    """The comparison as ``juryflow.flows.regression.compare_runs`` summarises it, but not
    stored: the same figures, problems, notes and baseline warnings."""
    from juryflow.analysis.comparison_summary import comparison_summary
    from juryflow.storage.comparisons import compare_stored

    found: Comparison = compare_stored(store, baseline_id, run_id)
    return comparison_summary(store, found, run_id, baseline_id, thresholds)


def _print_details(c: dict[str, Any], style: str) -> None:
    """What the verdict line sums up: the flips and each judge's drift."""
    to = err if c["regressed"] else console
    to.print(
        plain(
            f"flips: {c['flips_to_hallucinated']} clean → hallucinated, "
            f"{c['flips_to_clean']} hallucinated → clean; agreement (Krippendorff α) "
            f"{figure_signed(c['agreement_before'], False)} → "
            f"{figure_signed(c['agreement_after'], False)}",
            style,
        ),
        soft_wrap=True,
    )
    drifts = ", ".join(f"{judge} {figure_signed(d)}" for judge, d in c["judge_drift"].items())
    to.print(plain(f"judge drift: {drifts or '–'}", style), soft_wrap=True)
    flipped = c["flipped_items"].get("to_hallucinated", [])
    if flipped:  # the ids `juryflow show` takes next
        more = f", … ({len(flipped)} in all)" if len(flipped) > SHOWN_FLIPS else ""
        listed = ", ".join(flipped[:SHOWN_FLIPS]) + more
        to.print(plain(f"flipped to hallucinated: {listed}", style, one_line=True), soft_wrap=True)


def compare_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The run to check (id or prefix).")],
    baseline: Annotated[
        str, typer.Argument(metavar="BASELINE", help="The run to compare it with (id or prefix).")
    ],
    db: DbOption = None,
    format_: Annotated[
        str, typer.Option("--format", "-f", help="table, json or markdown.")
    ] = "table",
    max_mean_increase: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Largest allowed rise of the mean consensus score."),
    ] = _default(_DEFAULTS.max_mean_increase),
    max_flips_to_hallucinated: Annotated[
        int, typer.Option(min=0, help="Largest allowed number of clean → hallucinated flips.")
    ] = _default(_DEFAULTS.max_flips_to_hallucinated),
    max_judge_drift: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Largest allowed |mean score change| of any judge."),
    ] = _default(_DEFAULTS.max_judge_drift),
    max_agreement_drop: Annotated[
        float, typer.Option(min=0.0, max=2.0, help="Largest allowed fall of Krippendorff's alpha.")
    ] = _default(_DEFAULTS.max_agreement_drop),
    p_value_alpha: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Significance level of the paired test.")
    ] = _DEFAULTS.p_value_alpha,
) -> None:
    """RUN compared with BASELINE item by item, as `juryflow regression` compares them,
    judging and storing nothing; exit 1 naming what regressed. --format markdown: the
    verdict for a CI step summary or a pull-request comment."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.store import Store

    if format_ not in {"table", "json", "markdown"}:
        fail("--format must be table, json or markdown")
    run_id = resolve_or_exit(db, run)
    baseline_id = resolve_or_exit(db, baseline, "BASELINE")
    assert run_id is not None and baseline_id is not None
    thresholds = Thresholds(
        max_mean_increase=max_mean_increase,
        max_flips_to_hallucinated=max_flips_to_hallucinated,
        max_judge_drift=max_judge_drift,
        max_agreement_drop=max_agreement_drop,
        p_value_alpha=p_value_alpha,
    )
    try:
        compared = _comparison(Store(db), run_id, baseline_id, thresholds)
    except StoreError as error:
        fail(str(error))
    except duckdb.Error as error:
        fail(f"cannot compare run {run_id} with {baseline_id}: {type(error).__name__}: {error}")
    _print_compared(compared, format_)
    append_step_summary(regression_markdown(compared))
    if compared["regressed"]:
        raise typer.Exit(code=1)


def _print_compared(compared: dict[str, Any], format_: str) -> None:
    if format_ == "json":
        console.file.write(output.dump_json(compared) + "\n")
        return
    if format_ == "markdown":
        console.file.write(regression_markdown(compared))
        return
    # the verdict line(s) exactly as `juryflow regression` prints them
    result = {k: compared[k] for k in ("run_id", "suite", "message")}
    style = "bold red" if compared["regressed"] else ""
    _print_regression({**result, "comparison": compared}, compared["baseline_run_id"],
                      err if compared["regressed"] else console, style)  # fmt: skip
    _print_details(compared, style)


def register(app: typer.Typer) -> None:
    """Add `show` and `compare` to the juryflow command line."""
    app.command("show")(show_command)
    app.command("compare")(compare_command)
