"""`juryflow calibrate RUN`: choose the consensus rule from human labels, print what it is
worth out of fold (the calibrated rule, the panel's default rule and every judge, each F1
with its bootstrap interval), and store it by name.

Registered by :func:`register`; the figures come from
:mod:`juryflow.analysis.calibrate`, this module only lays them out.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from juryflow.cli.analysis import (
    FormatOption,
    GoldOption,
    RunArgument,
    _load,
    _print_json,
    console,
    gold_source,
)
from juryflow.cli.runs import DbOption, resolve_or_exit
from juryflow.cli.runs import fail as _fail
from juryflow.terminal.output import plain
from juryflow.terminal.tables import FitTable


def _f(prf: dict[str, Any] | None, key: str) -> str:
    return "—" if prf is None else f"{prf[key]:.3f}"


def _ci(prf: dict[str, Any] | None) -> str:
    interval = None if prf is None else prf.get("f1_interval")
    return "—" if interval is None else f"{interval[0]:.2f}–{interval[1]:.2f}"


def _delta(value: float | None, interval: list[float] | None) -> str:
    if value is None or interval is None:
        return "—"
    return f"{100 * value:+.1f} points ({100 * interval[0]:+.1f} to {100 * interval[1]:+.1f})"


def _lossy_line(lossy: dict[str, Any]) -> str:
    """What a lossy early stop saves and costs on this run, out of fold, in one line."""
    chose = "/".join("off" if a is None else f"{a:g}" for a in lossy["fold_agreements"])
    span = ""
    if lossy["span_full"] is not None:
        span = (
            f"; span F1 {lossy['span_full']:.1f} -> {lossy['span_lossy']:.1f} "
            f"[{lossy['span_change_interval'][0]:+.1f}, {lossy['span_change_interval'][1]:+.1f}]"
        )
    if lossy["agreement"] is not None:
        advice = f"panel key lossy_agreement: {lossy['agreement']:g} (with early_stop: true)"
    elif all(a is None for a in lossy["fold_agreements"]):
        advice = "no fold found a lossy stop worth its loss: keep exact early stopping"
    else:
        advice = "the folds disagree on the agreement: keep exact early stopping"
    return (
        f"lossy early stop, out of fold (judges called first: {', '.join(lossy['first'])}; "
        f"folds chose {chose}): {100 * lossy['calls_saved']:.1f} % of calls saved; "
        f"response F1 {lossy['response_full']:.1f} -> {lossy['response_lossy']:.1f} "
        f"[{lossy['response_change_interval'][0]:+.1f}, "
        f"{lossy['response_change_interval'][1]:+.1f}]{span}; {advice}"
    )


def _judges_added_table(values: list[dict[str, Any]]) -> FitTable:
    """Leave one judge out: what each judge adds to the kept rule, out of fold."""
    table = FitTable(
        title="What each judge adds: the kept rule's out-of-fold F1 with the judge minus "
        "without it (refitted without it on each training fold)",
    )
    for column in ("judge", "response F1", "span F1"):
        table.add_column(column, justify="left" if column == "judge" else "right")
    for v in sorted(values, key=lambda v: -v["response"]):
        table.add_row(
            plain(v["judge"]),
            _delta(v["response"], v["response_interval"]),
            _delta(v["spans"], v["span_interval"]),
        )
    return table


def _subset_line(subsets: dict[str, Any]) -> str:
    """The cheapest subset of judges within noise of the best, in one line."""
    cheapest = subsets.get("cheapest")
    if cheapest is None:
        return "cheapest subset: none within noise of the best (fewer than two judges)"
    unit = subsets["cost_unit"]
    cost = (
        f"${cheapest['cost']:.4f} an item"
        if unit == "USD"
        else f"{cheapest['cost']:g} calls an item"
    )
    return (
        f"cheapest subset within noise of the best (F1 {subsets['best_f1']:.3f}): the majority of "
        f"{', '.join(cheapest['judges'])} — F1 {cheapest['response_f1']:.3f} out of fold, {cost}"
    )


def _accuracy_table(report: dict[str, Any]) -> FitTable:
    """Out-of-fold P/R/F1 of every predictor, with intervals."""
    level = f"{100 * report.get('interval_level', 0.95):.0f} %"
    # Parts stacked below each other, each led by the predictor, when the terminal is
    # narrow: a predictor's name is never cut.
    table = FitTable(
        title="Out-of-fold accuracy against the human labels (all items; no answer = nothing); "
        f"F1 intervals: {level}, sources resampled",
    )
    columns = ("predictor", "coverage", "P", "R", "F1", "F1 interval",
               "span P", "span R", "span F1", "span F1 interval")  # fmt: skip
    for column in columns:
        table.add_column(
            column,
            justify="left" if column == "predictor" else "right",
            with_previous=column in ("F1 interval", "span F1 interval"),
        )
    for row in report["predictors"]:
        response, spans = row["response"], row["spans"]
        table.add_row(
            plain(row["name"]),
            "—" if row["coverage"] is None else f"{100 * row['coverage']:.0f} %",
            _f(response, "precision"), _f(response, "recall"), _f(response, "f1"), _ci(response),
            _f(spans, "precision"), _f(spans, "recall"), _f(spans, "f1"), _ci(spans),
        )  # fmt: skip
    return table


def calibrate_command(
    run_id: RunArgument = None,
    name: Annotated[
        str, typer.Option(help="Name to store the calibration under (replaces an older one).")
    ] = "default",
    folds: Annotated[
        int,
        typer.Option(
            min=2,
            max=50,
            # the figure is analysis.calibrate.MIN_LABELLED_PER_FOLD, not imported: start-up
            help="Cross-validation folds; each needs at least 5 labelled items (25 for 5 "
            "folds), or the calibration is refused.",
        ),
    ] = 5,
    seed: Annotated[
        int, typer.Option(min=0, max=2**31 - 1, help="Seed of the fold assignment.")
    ] = 0,
    group: Annotated[
        str | None,
        typer.Option(
            help="Item column whose values keep together in one fold (default: group, "
            "source_id or source when the items have one)."
        ),
    ] = None,
    db: DbOption = None,
    format_: FormatOption = "table",
    gold: GoldOption = "dataset",
) -> None:
    """Choose the consensus rule from human labels by nested grouped cross-validation: of the
    panel's default rule, the procedure's choice and following the best judge, the one with
    the best out-of-fold F1 and never below the default is kept; says what each judge adds
    and the cheapest subset of judges within noise of the best.

    Needs at least 5 labelled items per fold (25 with the default 5 folds): label more
    dataset rows, or annotate items with `juryflow view` and pass --gold annotations."""
    from juryflow.analysis.calibrate import run_calibration
    from juryflow.storage.store import Store

    if format_ not in {"table", "json"}:
        _fail("--format must be table or json")
    source = gold_source(gold)
    run_id = resolve_or_exit(db, run_id)
    result, record = _load(
        lambda: run_calibration(Store(db), run_id, name, folds, seed, group, gold=source)
    )
    report = record.report
    if format_ == "json":
        _print_json({"name": record.name, "run_id": record.run_id, "stored_rule": record.rule,
                     **report})  # fmt: skip
        return
    console.print(
        plain(
            f"run {record.run_id} · {report['items']} items in {report['groups']} groups "
            f"(by {report['group_column'] or 'item'}) · {report['folds']} folds · "
            f"gold: {report.get('gold_source', 'dataset')}"
        )
    )
    console.print(_accuracy_table(report))
    for d in report.get("differences", []):
        console.print(
            plain(
                f"calibrated − {d['versus']}: response F1 "
                f"{_delta(d['response'], d['response_interval'])}; span F1 "
                f"{_delta(d['spans'], d['span_interval'])}"
            )
        )
    if report.get("judges_added"):
        console.print(_judges_added_table(report["judges_added"]))
    if report.get("subsets"):
        console.print(plain(_subset_line(report["subsets"])))
    if report.get("lossy_stop"):
        console.print(plain(_lossy_line(report["lossy_stop"])))
    console.print(plain(f"stored as calibration {record.name!r}: {result.rule}"))
    for note in report["notes"]:
        console.print(plain(f"note: {note}"))
    console.print(
        plain(
            f"apply it: juryflow reaggregate {record.run_id} --calibration {record.name}, "
            f"or juryflow run DATASET --panel PANEL --calibration {record.name}"
        )
    )


def register(app: typer.Typer) -> None:
    """Add `calibrate` to the juryflow command line."""
    app.command("calibrate")(calibrate_command)
