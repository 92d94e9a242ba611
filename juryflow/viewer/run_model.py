"""What the runs page and a run's page show, gathered from the store in one place.

Every agreement, bias and accuracy figure is a field of the
:class:`~juryflow.analysis.agreement_report.AgreementReport` that `juryflow agreement` prints
(the bias probes: of the ``BiasReport`` of `juryflow agreement --bias`,
:mod:`juryflow.pages.bias_section`),
shown with the same digits (``Stat.show()``, three decimals, percentages to one): a number
on the page can be found in the terminal by its text. Read here besides are only the run's
metadata and counts, the raw scores behind the histograms, the run list of `juryflow runs`,
and the calibrations `juryflow calibrate` stored for the run, shown as stored
(:mod:`juryflow.viewer.calibration_model`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup

from juryflow.analysis.agreement_report import (
    AgreementReport,
    GroupAgreement,
    PairAgreement,
    Stat,
    agreement_report,
)
from juryflow.analysis.run_figures import spent_text
from juryflow.pages.bias_section import BiasSection, bias_section
from juryflow.pages.charts import HeatCell, heatmap_svg, histogram_svg
from juryflow.pages.overlay import JUDGE_COLOURS as OVERLAY_COLOURS
from juryflow.pages.rule_labels import RunRule
from juryflow.report.model import GROUP_METRICS
from juryflow.report.self_agreement_columns import pairwise_tables
from juryflow.storage.reads.analysis import ensure_views
from juryflow.storage.reads.consensus_facts import run_verdict_rules
from juryflow.storage.reads.report_queries import judge_stats, raw_scores
from juryflow.storage.reads.run_queries import cost_split, list_runs
from juryflow.storage.reads.view_queries import ComparisonRow, list_comparisons, run_panels
from juryflow.storage.store import RunRecord, Store
from juryflow.terminal.output import duration
from juryflow.viewer.calibration_model import CalibrationsSection, calibrations_section

ALL_RUNS = 1_000_000
# The judges' colours are the item pages' span layers' (_overlay.css), so that a judge's
# histogram and its underlines read alike.
JUDGE_COLOURS = OVERLAY_COLOURS[:8]
CONSENSUS_COLOUR = "#b45309"

# -- how numbers read (as `juryflow agreement` prints them) ------------------------------


def num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{100 * value:.1f} %"


def signed(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:+.3f}"


def stat(value: Stat | None) -> str:
    return "—" if value is None else value.show()


def when(moment: datetime | None) -> str:
    return "—" if moment is None else f"{moment:%Y-%m-%d %H:%M}"


def cost(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


# -- links (every path segment and query value quoted) -----------------------------------


def run_href(run_id: str, tail: str = "", **query: str) -> str:
    path = f"/runs/{quote(run_id, safe='')}{tail}"
    return f"{path}?{urlencode(query)}" if query else path


def item_href(run_id: str, item_id: str) -> str:
    return run_href(run_id, "/item", id=item_id)


def comparison_href(comparison_id: str) -> str:
    return f"/comparisons/{quote(comparison_id, safe='')}"


def compare_href(a: str, b: str) -> str:
    return "/compare?" + urlencode({"a": a, "b": b})


def rule_text(raw: dict[str, Any] | None) -> str:
    """A stored consensus rule as the panel file spells it (``median / majority / ...``)."""
    from juryflow.maths.reducers import ConsensusRule, RuleError

    if raw is None:
        return "—"
    try:
        return str(ConsensusRule.from_dict(raw))
    except RuleError:
        return "(unreadable rule)"


# -- the runs page -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    href: str
    kind: str
    status: str
    panel: str
    dataset: str
    dataset_path: str
    items: int
    judges: int
    unscored: int
    consensus_rule: str
    cost: str
    started: str
    duration: str


@dataclass(frozen=True, slots=True)
class ComparisonLink:
    row: ComparisonRow
    href: str
    run_href: str
    baseline_href: str


@dataclass(frozen=True, slots=True)
class RunsPage:
    store_path: str
    runs: list[RunRow]
    comparisons: list[ComparisonLink]


def _comparison_links(rows: Sequence[ComparisonRow]) -> list[ComparisonLink]:
    return [
        ComparisonLink(
            row,
            comparison_href(row.comparison_id),
            run_href(row.run_id),
            run_href(row.baseline_run_id),
        )
        for row in rows
    ]


def load_runs_page(store: Store) -> RunsPage:
    """Every run (the rows of `juryflow runs`, with panel size and consensus rule) and
    every stored regression comparison."""
    ensure_views(store)  # a store of an older juryflow is brought up to date, as `agreement` does
    listing = list_runs(store, limit=ALL_RUNS)
    panels = run_panels(store)
    rows = []
    for values in listing.rows:
        r = dict(zip(listing.columns, values, strict=True))
        run_id = str(r["run_id"])
        panel = panels.get(run_id)
        rows.append(
            RunRow(
                run_id=run_id,
                href=run_href(run_id),
                kind=str(r["kind"]),
                status=str(r["status"]),
                panel=str(r["panel"]),
                dataset=Path(r["dataset"]).name if r["dataset"] else "—",
                dataset_path=str(r["dataset"] or ""),
                items=int(r["items"]),
                judges=panel.n_judges if panel else 0,
                unscored=int(r["unscored"]),
                consensus_rule=rule_text(panel.consensus if panel else None),
                cost=cost(r["cost_usd"]),
                started=when(r["started_at"]),
                duration=duration(r["duration_s"]),
            )
        )
    return RunsPage(str(store.path), rows, _comparison_links(list_comparisons(store)))


# -- one run's page ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricRow:
    label: str
    cells: list[tuple[str, str]]
    """Per group: the value as `juryflow agreement` prints it, and its n (blank for 0)."""


@dataclass(frozen=True, slots=True)
class RunLinks:
    run: str
    items: str
    disputed: str
    split: str
    queue: str


@dataclass(frozen=True, slots=True)
class JudgeInfo:
    judge_id: str
    provider: str
    model: str
    judgments: int
    cost: str
    tokens: str = "–"
    """Input / output tokens of this run's calls."""
    cache_read: str = "–"
    """Of the input tokens, those the provider's prompt cache served (and wrote)."""


@dataclass(frozen=True, slots=True)
class RunPage:
    run: RunRecord
    facts: list[tuple[str, str]]
    report: AgreementReport
    metrics: list[MetricRow]
    histograms: list[Markup]
    heatmaps: list[Markup]
    judges: list[JudgeInfo]
    links: RunLinks
    comparisons: list[ComparisonLink]
    bias: BiasSection
    calibrations: CalibrationsSection
    """What `juryflow calibrate` stored for this run, shown as stored (nothing refitted)."""
    pairwise: dict[str, Any]
    """A pairwise run's positions, B against A and strengths, as the report shows them."""


def _metric_rows(groups: Sequence[GroupAgreement]) -> list[MetricRow]:
    rows = []
    for label, pick in GROUP_METRICS:
        stats = [pick(g) for g in groups]
        if all(s is None for s in stats):
            continue  # effective panel size without human labels
        rows.append(
            MetricRow(label, [(stat(s), str(s.n) if s is not None and s.n else "") for s in stats])
        )
    return rows


def pair_cells(
    group: GroupAgreement,
    matrix: Sequence[Sequence[float | None]],
    pick: Callable[[PairAgreement], Stat],
) -> list[list[HeatCell]]:
    """One pairwise metric as heatmap cells: values from ``matrix``, and for each pair the
    report's own Stat (so a grey cell says why it is n/a)."""
    index = {judge: k for k, judge in enumerate(group.judges)}
    cells = [[HeatCell(v, "n/a" if v is None else num(v)) for v in row] for row in matrix]
    for pair in group.pairs:
        value = pick(pair)
        a, b = index[pair.judge_a], index[pair.judge_b]
        cells[a][b] = cells[b][a] = HeatCell(value.value, value.show())
    return cells


def _heatmaps(report: AgreementReport) -> list[Markup]:
    if not report.groups or not report.groups[0].judges:
        return []
    everyone = report.groups[0]
    return [
        heatmap_svg(
            pair_cells(everyone, everyone.cohen_kappa_matrix, lambda p: p.cohen_kappa),
            everyone.judges,
            "Cohen κ (verdicts)",
        ),
        heatmap_svg(
            pair_cells(everyone, everyone.span_f1_matrix, lambda p: p.span_f1),
            everyone.judges,
            "span F1 (characters)",
        ),
    ]


def _histograms(
    report: AgreementReport, scores: dict[str, list[float]], medians: list[float]
) -> list[Markup]:
    charts = [
        histogram_svg(
            scores.get(judge_id, []),
            JUDGE_COLOURS[k % len(JUDGE_COLOURS)],
            f"{judge_id} (n={len(scores.get(judge_id, []))})",
        )
        for k, judge_id in enumerate(report.judges)
    ]
    charts.append(histogram_svg(medians, CONSENSUS_COLOUR, f"consensus median (n={len(medians)})"))
    return charts


def verdict_label(run: RunRecord, verdict_rules: Sequence[str]) -> str:
    """The rule that made the run's consensus verdicts (``spans: union``); ``verdict_rules``
    are the rules its items were decided by, which resolve a stored ``auto``."""
    return RunRule.of(run.consensus).verdict_label(
        verdict_rules[0] if len(verdict_rules) == 1 else None
    )


def _facts(
    run: RunRecord, summary: dict[str, Any], report: AgreementReport, verdict_rule: str
) -> list[tuple[str, str]]:
    rate = summary.get("hallucination_rate")
    facts = [
        ("run", run.run_id),
        ("kind", run.kind),
        ("status", run.status),
        ("suite", run.suite),
        ("panel", f"{run.panel_name} ({run.n_judges} judges, quorum {run.quorum})"),
        ("consensus rule", report.consensus_rule or rule_text(run.consensus)),
        ("dataset", run.dataset or "—"),
        ("started", when(run.started_at)),
        ("finished", when(run.finished_at)),
        ("items", f"{summary['items']} ({summary['insufficient']} below quorum)"),
        (f"hallucinated (consensus verdict, {verdict_rule})", pct(rate)),
        (
            "unlocalised",
            f"{report.unlocalised} of {report.n_items} items (the judges agree something is "
            "wrong, not where: no character won the span vote)",
        ),
        (
            "judgments",
            f"{summary['judgments']} ({summary['unscored']} unscored, "
            f"{summary['cache_hits']} cached)",
        ),
        ("mean spread between judges", num(summary.get("mean_spread"))),
        (
            "cost (USD)",
            f"{spent_text(summary)}; "
            f"${summary.get('cost_reused_usd') or 0:.4f} reused from the cache",
        ),
        ("human labels", "yes" if report.has_gold else "no"),
    ]
    if run.parent_run_id:
        facts.insert(2, ("re-aggregated from", run.parent_run_id))
    if run.error:
        facts.append(("error", run.error))
    return facts


def _judge_tokens(row: dict[str, Any]) -> str:
    if row.get("input_tokens") is None and row.get("output_tokens") is None:
        return "–"
    return f"{row.get('input_tokens') or 0:,} / {row.get('output_tokens') or 0:,}"


def _judge_cache(row: dict[str, Any]) -> str:
    """Tokens the prompt cache served, with those it wrote; "–" where the provider said
    nothing of a cache (offline judges, servers without one)."""
    read, written = row.get("cache_read_tokens"), row.get("cache_write_tokens")
    if read is None and written is None:
        return "–"
    shown = f"{read or 0:,}"
    return shown + (f" ({written:,} written)" if written else "")


def load_run_page(store: Store, run_id: str) -> RunPage | None:
    """Run ``run_id``'s page, or None when the store has no such run."""
    run = store.get_run(run_id)
    if run is None:
        return None
    report = agreement_report(store, run_id)
    summary = {**store.run_summary(run_id), **cost_split(store, run_id)}
    scores, medians = raw_scores(store, run_id)
    with store.read() as con:
        verdict_rules = run_verdict_rules(con, run_id)
    judges = [
        JudgeInfo(
            str(row["judge_id"]),
            str(row["provider"] or "—"),
            str(row["model"] or "—"),
            int(row["judgments"]),
            cost(row["cost_usd"]),
            _judge_tokens(row),
            _judge_cache(row),
        )
        for row in judge_stats(store, run_id)
    ]
    return RunPage(
        run=run,
        facts=_facts(run, summary, report, verdict_label(run, verdict_rules)),
        report=report,
        metrics=_metric_rows(report.groups),
        histograms=_histograms(report, scores, medians),
        heatmaps=_heatmaps(report),
        judges=judges,
        links=RunLinks(
            run=run_href(run_id),
            items=run_href(run_id, "/items"),
            disputed=run_href(run_id, "/items", sort="disagreement", order="desc"),
            split=run_href(run_id, "/items", split="1"),
            queue=run_href(run_id, "/queue"),
        ),
        comparisons=_comparison_links(list_comparisons(store, run_id)),
        bias=bias_section(store, report),
        calibrations=calibrations_section(store, run_id, rule_text),
        pairwise=pairwise_tables(report.position, report.preference),
    )
