"""`juryflow agreement` and `juryflow disagreements`: the agreement report in a terminal.

``juryflow calibrate`` is in :mod:`juryflow.cli.calibration`, which shares this module's
options and registers itself.

Registered on the main app by :func:`register` (``juryflow/cli/commands.py``); the numbers come from
:mod:`juryflow.analysis.agreement_report`, this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import duckdb
import typer
from rich.table import Table
from rich.text import Text

from juryflow.cli.runs import DbOption, resolve_or_exit
from juryflow.cli.runs import fail as _fail
from juryflow.maths.pairwise.records import PREFERENCE_WORDS
from juryflow.pages.rule_labels import UNLOCALISED_NOTE, RunRule, verdict_reason
from juryflow.storage.annotations import GOLD_SOURCES, GoldSource
from juryflow.storage.reads.consensus_facts import ConsensusFacts, consensus_facts, run_rule
from juryflow.terminal.output import dump_json, plain, safe_text, terminal_console
from juryflow.terminal.self_agreement_table import (
    print_positions,
    print_preference,
    print_self_agreement,
)
from juryflow.terminal.tables import FitTable

if TYPE_CHECKING:  # imported by the commands that print it: `juryflow run` never needs it
    from juryflow.analysis.agreement_report import (
        AgreementReport,
        DisputedItem,
        GroupAgreement,
        SpanOut,
        Stat,
    )

console = terminal_console()

T = TypeVar("T")

RunArgument = Annotated[
    str | None, typer.Argument(help="Run id (default: the latest run in the store).")
]
FormatOption = Annotated[str, typer.Option("--format", "-f", help="table or json.")]
GoldOption = Annotated[
    str,
    typer.Option(
        "--gold",
        help="Whose labels are the human labels: dataset (the dataset's own), annotations "
        "(reviewers' newest annotations from `juryflow view`; other items unlabelled) or "
        "both (an item's newest annotation, else the dataset's label).",
    ),
]

GOLD_DESCRIPTIONS: dict[str, str] = {
    "dataset": "the dataset's labels",
    "annotations": "reviewers' annotations",
    "both": "annotations, else the dataset's labels",
}

SPAN_TEXT_CHARS = 60


def _load(fn: Callable[[], T]) -> T:
    from juryflow.storage.connection import StoreError
    from juryflow.storage.reads.analysis import RunNotFound

    try:
        return fn()
    except (RunNotFound, StoreError) as error:
        _fail(str(error.args[0] if error.args else error))
        raise  # unreachable: _fail raises
    except (duckdb.Error, ValueError) as error:  # DuckDB's own message says what is wrong
        _fail(f"{type(error).__name__}: {error}")
        raise


def gold_source(value: str) -> GoldSource:
    """``--gold`` checked against the sources there are (exit 2 otherwise)."""
    for source in GOLD_SOURCES:
        if value == source:
            return source
    _fail(f"--gold {value!r}: use one of {', '.join(GOLD_SOURCES)}")
    raise AssertionError  # unreachable: _fail raises


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _stat(stat: Stat | None) -> Text:
    return Text("—") if stat is None else plain(stat.show())


def _print_json(payload: Any) -> None:
    console.file.write(dump_json(payload) + "\n")


# -- agreement ------------------------------------------------------------------------

_GROUP_METRICS: tuple[tuple[str, str], ...] = (
    ("Krippendorff α, interval (scores)", "alpha_interval"),
    ("Krippendorff α, ordinal (scores)", "alpha_ordinal"),
    ("Fleiss κ (verdicts)", "fleiss_kappa"),
    ("percent agreement (verdicts)", "percent_agreement"),
    ("mean pairwise Cohen κ", "mean_cohen_kappa"),
    ("mean pairwise span F1 (chars)", "mean_span_f1"),
    ("effective panel size (errors vs gold)", "effective_panel_size"),
)


def _group_table(groups: list[GroupAgreement], has_gold: bool) -> FitTable:
    table = FitTable(title="Agreement")
    table.add_column("metric")
    for group in groups:
        table.add_column(plain(f"{group.name} ({len(group.judges)})"))
        table.add_column("n", justify="right", style="dim", with_previous=True)
    for label, field in _GROUP_METRICS:
        if field == "effective_panel_size" and not has_gold:
            continue
        cells: list[str | Text] = [label]
        for group in groups:
            stat: Stat | None = getattr(group, field)
            cells += [_stat(stat), str(stat.n) if stat is not None and stat.n else ""]
        table.add_row(*cells)
    return table


def _pairs_table(group: GroupAgreement) -> FitTable:
    table = FitTable(title="Judge pairs", key_columns=2)
    for name, justify in (
        ("judge A", "left"),
        ("judge B", "left"),
        ("items", "right"),
        ("verdict agreement", "right"),
        ("Cohen κ", "right"),
        ("span items", "right"),
        ("span F1", "right"),
    ):
        table.add_column(name, justify=justify)
    for p in group.pairs:
        table.add_row(
            plain(p.judge_a),
            plain(p.judge_b),
            str(p.n_items),
            _stat(p.verdict_agreement),
            _stat(p.cohen_kappa),
            str(p.n_span_items),
            _stat(p.span_f1),
        )
    return table


def _judges_table(report: AgreementReport) -> FitTable:
    table = FitTable(title="Judges against the panel")
    for name, justify in (
        ("judge", "left"),
        ("prompt", "left"),
        ("scored", "right"),
        ("mean score", "right"),
        ("flag rate", "right"),
        ("bias vs median", "right"),
        ("verdict = consensus", "right"),
        ("span F1 vs consensus", "right"),
        ("span P / R", "right"),
    ):
        table.add_column(name, justify=justify)
    for j in report.judge_summaries:
        table.add_row(
            plain(j.judge_id),
            plain(j.prompt or ("—" if j.output_kind else "")),
            f"{j.n_scored}/{j.n_items}",
            _num(j.mean_score),
            _pct(j.flag_rate),
            plain(j.bias.show()) if j.bias.value is None else f"{j.bias.value:+.3f}",
            _stat(j.consensus_verdict_agreement),
            _stat(j.consensus_span_f1),
            "—"
            if j.consensus_spans is None
            else f"{j.consensus_spans.precision:.3f} / {j.consensus_spans.recall:.3f}",
        )
    return table


def _error_table(group: GroupAgreement) -> FitTable | None:
    if group.error_correlation is None:
        return None
    table = FitTable(title="Error correlation (verdict wrong vs gold)")
    table.add_column("")
    for judge in group.judges:
        table.add_column(plain(judge), justify="right")
    for judge, row in zip(group.judges, group.error_correlation, strict=True):
        table.add_row(plain(judge), *(_num(v, 2) for v in row))
    return table


def _accuracy_table(report: AgreementReport) -> FitTable:
    table = FitTable(
        title=f"Against the human labels, gold: {report.gold_source} "
        f"({GOLD_DESCRIPTIONS[report.gold_source]}; all items: no answer counts as "
        "flagging nothing)",
    )
    for name in (
        "predictor", "coverage", "items", "precision", "recall", "F1", "F1 answered",
        "span items", "span P", "span R", "span F1", "span F1 answered",
    ):  # fmt: skip
        table.add_column(name, justify="left" if name == "predictor" else "right")
    for a in report.accuracy:
        r, s = a.response, a.spans
        table.add_row(
            plain(a.predictor, "bold" if a.predictor == "consensus" else ""),
            _pct(a.coverage),
            str(a.n_items),
            _num(r.precision if r else None),
            _num(r.recall if r else None),
            _num(r.f1 if r else None),
            _num(a.response_answered.f1 if a.response_answered else None),
            str(a.n_span_items),
            _num(s.precision if s else None),
            _num(s.recall if s else None),
            _num(s.f1 if s else None),
            _num(a.spans_answered.f1 if a.spans_answered else None),
        )
    return table


def _reliability_table(report: AgreementReport) -> FitTable | None:
    found = report.reliability
    if found is None:
        return None
    table = FitTable(title="Judge reliability without labels (Dawid–Skene EM over verdicts)")
    for name in ("judge", "sensitivity", "specificity", "verdicts"):
        table.add_column(name, justify="left" if name == "judge" else "right")
    for j in found.judges:
        table.add_row(plain(j.judge_id), _num(j.sensitivity), _num(j.specificity), str(j.n_units))
    return table


def print_agreement(report: AgreementReport) -> None:
    heading = (
        f" {report.run_id} · panel {report.panel_name} · "
        f"{report.n_items} items · {len(report.judges)} judges ({', '.join(report.judges)})"
        + ("" if report.status == "completed" else f" · status {report.status}")
        + f" · gold: {report.gold_source}"
    )
    console.print(Text.assemble(("run", "bold"), safe_text(heading, one_line=True)), soft_wrap=True)
    console.print(_group_table(report.groups, report.has_gold))
    everyone = report.groups[0]
    if everyone.pairs:
        console.print(_pairs_table(everyone))
    if report.judge_summaries:
        console.print(_judges_table(report))
    print_self_agreement(console, report.self_agreement)
    print_positions(console, report.position)
    print_preference(console, report.preference)
    errors = _error_table(everyone)
    if errors is not None:
        console.print(errors)
    for note in everyone.error_notes:
        console.print(plain(f"note: {note}"))
    reliability = _reliability_table(report)
    if reliability is not None and report.reliability is not None:
        console.print(reliability)
        found = report.reliability
        console.print(
            plain(
                f"estimated prevalence {_pct(found.prevalence)} · judges worth "
                f"{found.effective_panel_size.show()} independent ones given the estimate"
            )
        )
        if found.warning:
            console.print(plain(f"warning: {found.warning}", "yellow"))
    if report.accuracy:
        console.print(_accuracy_table(report))
    if report.consensus_rule:
        console.print(
            plain(
                f"consensus rule: {report.consensus_rule} · {report.contradictions} "
                f"contradictions (clean verdict with consensus spans) · {report.unlocalised} "
                "unlocalised (judges agree something is wrong, not where)"
            )
        )
    for note in report.notes:
        console.print(plain(f"note: {note}"))


def agreement(
    run: RunArgument = None,
    db: DbOption = None,
    format_: FormatOption = "table",
    gold: GoldOption = "dataset",
    bias: Annotated[
        bool,
        typer.Option(
            "--bias",
            help="Bias probes against the labels instead: length, self-preference, span "
            "position, each an effect with its interval (juryflow.analysis.bias_report).",
        ),
    ] = False,
) -> None:
    """Agreement between the judges of a run, their bias, and accuracy against human labels."""
    from juryflow.storage.store import Store

    if format_ not in {"table", "json"}:
        _fail("--format must be table or json")
    source = gold_source(gold)
    run = resolve_or_exit(db, run)
    if bias:
        from juryflow.analysis.bias_report import bias_report
        from juryflow.terminal.bias_table import bias_payload, print_bias

        found = _load(lambda: bias_report(Store(db), run, gold=source))
        if format_ == "json":
            _print_json(bias_payload(found))
        else:
            print_bias(console, found)
        return
    from juryflow.analysis.agreement_report import agreement_report

    report = _load(lambda: agreement_report(Store(db), run, gold=source))
    if format_ == "json":
        _print_json(report.model_dump(mode="json"))
        return
    print_agreement(report)


# -- disagreements --------------------------------------------------------------------


def _clip(text: str, limit: int = SPAN_TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _spans_cell(spans: list[SpanOut] | None, none: str = "—") -> Text:
    if spans is None:
        return Text(none, style="dim")
    if not spans:
        return Text("(none)", style="dim")
    cell = Text()
    for k, s in enumerate(spans):
        if k:
            cell.append("\n")
        cell.append(f"«{safe_text(_clip(s.text), one_line=True)}»")
        where = "unanchored" if s.start is None else f"{s.start}–{s.end}"
        extra = f", {s.votes} votes" if s.votes is not None else ""
        cell.append(f" {where}{extra}", style="dim")
    return cell


def _verdict(value: bool | None) -> Text:
    if value is None:
        return Text("—", style="dim")
    return Text("hallucinated", style="red") if value else Text("clean", style="green")


_PREFERENCES = {score: words for _, score, words in PREFERENCE_WORDS}
"""A pairwise judge's score (B's win share in both orders) as the words the summary uses."""


_PAIRWISE_CONSENSUS = (
    "consensus: the plurality of the verdicts the judges gave in both orders (an "
    "inconsistent judge has no say); a draw is a tie"
)


def _pairwise(item: DisputedItem) -> bool:
    return bool(item.judges) and all(j.output_kind == "preference" for j in item.judges)


def _preference(score: float | None) -> Text:
    if score is None:
        return Text("—", style="dim")
    return Text(_PREFERENCES.get(score, f"B {score:.0%}"))


def _item_heading(item: DisputedItem) -> Text:
    if _pairwise(item):
        # A preference is neither hallucinated nor clean: its split is A / tie / B.
        given = [_PREFERENCES.get(j.score) for j in item.judges if j.score is not None]
        split = " / ".join(f"{given.count(name)} {name}" for name in _PREFERENCES.values())
        measures = [f"disagreement {_num(item.disagreement)}", f"verdicts {split}"]
    else:
        measures = [
            f"disagreement {_num(item.disagreement)}",
            f"score spread {_num(item.score_spread, 2)}",
            f"verdicts {item.n_hallucinated_verdicts} hallucinated / {item.n_clean_verdicts} clean",
            f"span disagreement {_num(item.span_disagreement, 2)}",
        ]
    return Text.assemble(
        (f"#{item.rank} {safe_text(item.item_id, one_line=True)}", "bold"),
        "\n",
        (" · ".join(measures), "dim"),
    )


def _item_table(item: DisputedItem, source: GoldSource = "dataset") -> Table:
    pairwise = _pairwise(item)
    table = Table(show_lines=True)
    # A narrow terminal wraps only the spans: a judge's name, score and verdict stay whole.
    table.add_column("judge", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("spans", overflow="fold")
    for j in item.judges:
        if j.score is None:
            table.add_row(
                plain(j.judge_id),
                Text("unscored", style="dim"),
                Text("—", style="dim"),
                plain(_clip(j.unscored_reason or ""), "dim", one_line=True),
            )
            continue
        spans = j.spans if j.output_kind == "spans" else None
        table.add_row(
            plain(j.judge_id),
            _num(j.score, 2),
            _preference(j.score) if pairwise else _verdict(j.verdict),
            _spans_cell(spans, "(preference)" if pairwise else "(score only)"),
        )
    consensus_spans: list[SpanOut] | None = item.consensus_spans
    if item.consensus_status != "ok":
        consensus_spans = None
        consensus_verdict = plain(item.consensus_status or "none", "yellow")
    elif pairwise:
        consensus_verdict = _preference(item.consensus_rule_score)
    else:
        consensus_verdict = _verdict(item.consensus_hallucinated)
    table.add_row(
        Text("consensus", style="bold"),
        # the view's consensus score is the median, whatever the run's score reducer; a
        # pairwise panel's is its preference rule's (a median of 0, 1 would read as a tie)
        f"rule {_num(item.consensus_rule_score, 2)}"
        if pairwise
        else f"median {_num(item.consensus_score, 2)}",
        consensus_verdict,
        _spans_cell(consensus_spans),
    )
    if item.gold_hallucinated is not None or item.gold_spans is not None:
        table.add_row(
            Text("gold (human)" if source == "dataset" else f"gold ({source})", style="italic"),
            "",
            _verdict(item.gold_hallucinated),
            _spans_cell(item.gold_spans, "(no span labels)"),
        )
    return table


def _rule_facts(
    store: Any, run_id: str | None, item_ids: list[str]
) -> tuple[RunRule, dict[str, ConsensusFacts]]:
    """The run's stored consensus rule and the items' stored consensus facts: what says
    which rule made each consensus verdict (``run_id`` None: the latest run)."""
    from juryflow.storage.reads.analysis import resolve_run

    rid = run_id or resolve_run(store, None).run_id
    with store.read() as con:
        return RunRule.of(run_rule(con, rid)), consensus_facts(con, rid, item_ids)


def disagreements_command(
    run: RunArgument = None,
    top: Annotated[
        int, typer.Option("--top", "-n", max=1_000_000, help="How many items to show.")
    ] = 10,
    db: DbOption = None,
    format_: FormatOption = "table",
    gold: GoldOption = "dataset",
) -> None:
    """The items the judges disagree on most: each judge's score and spans, and the consensus."""
    from juryflow.storage.store import Store

    if format_ not in {"table", "json"}:
        _fail("--format must be table or json")
    if top < 1:
        _fail("--top must be at least 1")
    source = gold_source(gold)
    run = resolve_or_exit(db, run)
    from juryflow.analysis.agreement_report import disagreements

    items = _load(lambda: disagreements(Store(db), run, top, gold=source))
    if format_ == "json":
        _print_json([i.model_dump(mode="json") for i in items])
        return
    if not items:
        console.print("no items in this run")
        return
    rule, facts = _load(lambda: _rule_facts(Store(db), run, [i.item_id for i in items]))
    for item in items:
        console.print(_item_heading(item), soft_wrap=True)
        console.print(_item_table(item, source))
        if _pairwise(item):
            # The verdict facts below count hallucination votes, which a preference has not.
            if item.consensus_status == "ok":
                console.print(plain(_PAIRWISE_CONSENSUS))
        elif item.item_id in facts and item.consensus_status == "ok":
            found = facts[item.item_id]
            why = f"consensus: {verdict_reason(rule, found)}"
            console.print(plain(why + (f" · {UNLOCALISED_NOTE}" if found.unlocalised else "")))
    console.print(
        "[dim]disagreement = mean of score spread, verdict split and span disagreement; "
        "see the item_disagreement view ([bold]juryflow sql[/bold])[/]"
    )


def register(app: typer.Typer) -> None:
    """Add `agreement` and `disagreements` to the juryflow command line."""
    app.command("agreement")(agreement)
    app.command("disagreements")(disagreements_command)
