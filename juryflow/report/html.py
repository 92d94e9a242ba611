"""A self-contained HTML report of one run: inline CSS and inline SVG, no script, no network.

Sections (linked from a table of contents): the run summary; the regression deltas when the
run was compared with a baseline, with each judge's drift; each judge's score distribution;
the panel's agreement (group statistics, pairwise heatmaps and table, each judge against the
panel, precision, recall and F1 against the human labels); and the disputed items, each with
its reference data and one copy of the judged text with every judge's spans, the consensus
and the human labels overlaid (toggled by CSS alone).

The page is rendered by the viewer's Jinja environment from ``report.html``, with the
viewer's own overlay macros and charts, so the report and ``juryflow view`` look alike; what
it shows is read and shaped by :mod:`juryflow.report.model`. Autoescaping is on: a response
that contains markup shows as text and never becomes part of the page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from juryflow.analysis.run_figures import spent_text
from juryflow.pages.charts import HeatCell, drift_svg, heatmap_svg, histogram_svg
from juryflow.pages.overlay import JUDGE_COLOURS
from juryflow.pages.regression_words import noise_floor_rows
from juryflow.pages.templating import environment
from juryflow.report.model import (
    ACCURACY_COLUMNS,
    DISPUTED_COLUMNS,
    GROUP_METRICS,
    JUDGE_COLUMNS,
    PAIR_COLUMNS,
    REPORT_FACTS,
    Cell,
    JudgeMeta,
    ReportData,
    Row,
    Table,
    count_cell,
    fmt,
    href,
    load_report_data,
    num,
    num_cell,
    stat_cell,
    table,
    text_cell,
)
from juryflow.report.self_agreement_columns import (
    pairwise_tables,
    self_agreement_notes,
    self_agreement_table,
)
from juryflow.storage.annotations import GoldSource
from juryflow.storage.files import write_private_text
from juryflow.storage.store import Store

__all__ = [
    "ReportWriteError",
    "load_report_data",
    "render_report",
    "summary_section",
    "write_report",
]

CONSENSUS_COLOUR = "#c0392b"


def _summary(data: ReportData) -> dict[str, Any]:
    run, s = data.run, data.summary
    rate = s.get("hallucination_rate")
    rows: list[tuple[str, Any]] = [
        ("run", run.run_id),
        ("kind", run.kind),
        ("status", run.status),
        ("suite", run.suite),
        ("panel", f"{run.panel_name} ({run.n_judges} judges, quorum {run.quorum})"),
        ("dataset", run.dataset),
        ("started", run.started_at),
        ("finished", run.finished_at),
        ("items", f"{s['items']} ({s['insufficient']} below quorum)"),
        (
            f"hallucinated (consensus verdict, {data.rule.run_verdict_label(data.verdict_rules)})",
            f"{fmt(rate * 100 if rate is not None else None)} %",
        ),
        ("consensus rule", data.agreement.consensus_rule or "—"),
        (
            "unlocalised",
            f"{data.agreement.unlocalised} of {data.agreement.n_items} items (the judges agree "
            "something is wrong, not where: no character won the span vote)",
        ),
        ("judgments", f"{s['judgments']} ({s['unscored']} unscored, {s['cache_hits']} cached)"),
        ("mean spread between judges", fmt(s.get("mean_spread"))),
        (
            "cost (USD)",
            f"{spent_text(s)}; "
            f"${s.get('cost_reused_usd') or 0:.4f} reused from the cache (not paid again)",
        ),
        ("rejected rows", s.get("rejected_rows")),
        ("gold labels from", data.gold),
    ]
    if run.parent_run_id:
        rows.insert(2, ("re-aggregated from", run.parent_run_id))
        params = run.parameters or {}
        rows.insert(3, ("min votes", params.get("min_votes") or "strict majority"))
    none = JudgeMeta(None, None, 0, None)
    keys = data.layer_keys()
    judges = table(
        "judge-metadata",
        (
            ("judge", lambda j: Cell(j, title=f"colour of layer {keys[j]}")),
            ("provider", lambda j: text_cell(data.judge_meta.get(j, none).provider)),
            ("model", lambda j: text_cell(data.judge_meta.get(j, none).model)),
            ("judgments", lambda j: count_cell(data.judge_meta.get(j, none).judgments)),
            ("cost (USD)", lambda j: num_cell(data.judge_meta.get(j, none).cost_usd, 4)),
        ),
        data.judges,
        row_id=lambda j: f"judge-{j}",
    )
    return {
        "rows": [(k, "" if v is None else str(v)) for k, v in rows],
        "judges": judges,
        "keys": keys,
    }


def _colour(k: int) -> str:
    return JUDGE_COLOURS[k % len(JUDGE_COLOURS)]


def _histograms(data: ReportData) -> list[Markup]:
    charts = [
        histogram_svg(data.scores.get(j, []), _colour(k), f"{j} (n={len(data.scores.get(j, []))})")
        for k, j in enumerate(data.judges)
    ]
    medians = data.consensus_medians
    charts.append(histogram_svg(medians, CONSENSUS_COLOUR, f"consensus median (n={len(medians)})"))
    return charts


def _pair_cells(group: Any, matrix: Any, metric: str) -> list[list[HeatCell]]:
    """The heatmap of one pairwise metric: values from ``matrix``, reasons from the pairs."""
    index = {judge: k for k, judge in enumerate(group.judges)}
    n = len(group.judges)
    # A judge against itself has no PairAgreement: its cell says just the matrix value.
    cells = [
        [
            HeatCell(matrix[i][j], "n/a" if matrix[i][j] is None else num(matrix[i][j]))
            for j in range(n)
        ]
        for i in range(n)
    ]
    for pair in group.pairs:
        stat = getattr(pair, metric)
        a, b = index[pair.judge_a], index[pair.judge_b]
        cells[a][b] = cells[b][a] = HeatCell(stat.value, stat.show())
    return cells


def _group_table(data: ReportData) -> Table:
    groups = data.agreement.groups
    header = ["metric"]
    for g in groups:
        header += [f"{g.name} ({len(g.judges)})", "n"]
    rows: list[Row] = []
    for label, pick in GROUP_METRICS:
        stats = [pick(g) for g in groups]
        if all(stat is None for stat in stats):
            continue
        cells = [Cell(label)]
        for stat in stats:
            cells += [
                stat_cell(stat),
                Cell(str(stat.n) if stat is not None and stat.n else "", num=True),
            ]
        rows.append(Row(cells))
    return Table("panel-agreement", header, rows)


def _agreement(data: ReportData) -> dict[str, Any]:
    report = data.agreement
    heatmaps: list[Markup] = []
    pairs = None
    if report.groups:
        everyone = report.groups[0]
        if everyone.judges:
            heatmaps = [
                heatmap_svg(
                    _pair_cells(everyone, everyone.cohen_kappa_matrix, "cohen_kappa"),
                    everyone.judges,
                    "Cohen κ (verdicts)",
                ),
                heatmap_svg(
                    _pair_cells(everyone, everyone.span_f1_matrix, "span_f1"),
                    everyone.judges,
                    "span F1 (characters)",
                ),
            ]
        if everyone.pairs:
            pairs = table("pairs", PAIR_COLUMNS, everyone.pairs)
    return {
        "facts": [(label, show(report)) for label, show in REPORT_FACTS],
        "groups": _group_table(data) if report.groups else None,
        "heatmaps": heatmaps,
        "pairs": pairs,
        "judges": table("judges", JUDGE_COLUMNS, report.judge_summaries)
        if report.judge_summaries
        else None,
        "accuracy": table("accuracy", ACCURACY_COLUMNS, report.accuracy)
        if report.accuracy
        else None,
        "self_agreement": self_agreement_table(report.self_agreement),
        "self_notes": self_agreement_notes(report.self_agreement),
        **pairwise_tables(report.position, report.preference),
        "notes": report.notes,
    }


def _regression(data: ReportData) -> dict[str, Any] | None:
    c = data.comparison
    if c is None:
        return None
    shown = {d.item_id for d in data.disputed}
    rows = [
        ("baseline run", c["baseline_run_id"]),
        ("paired items", c["n_paired"]),
        ("mean change in the consensus median score", fmt(c["mean_delta"])),
        ("95% bootstrap interval", f"{fmt(c['ci_low'])} to {fmt(c['ci_high'])}"),
        ("median change in the consensus median score", fmt(c["median_delta"])),
        ("Wilcoxon statistic / p", f"{fmt(c['wilcoxon_statistic'])} / {fmt(c['p_value'])}"),
        ("flips to hallucinated", c["flips_to_hallucinated"]),
        ("flips to clean", c["flips_to_clean"]),
        # The comparison's own alpha, over the items both runs judged: not the
        # agreement section's, which covers every item of this run.
        (
            "agreement on the paired items (Krippendorff α)",
            f"{fmt(c['agreement_before'])} → {fmt(c['agreement_after'])}",
        ),
    ]
    thresholds = c.get("thresholds") or {}
    # The A/A check's floor the gate held the changes against (--noise-floor), as the
    # compare page words it.
    rows += noise_floor_rows(thresholds.get("noise_floor"))
    flipped = c.get("flipped_items") or {}
    flips = [
        (
            direction.replace("_", " "),
            # An item links to its article when it is among the disputed items shown.
            [
                Cell(i, href=href("item", i) if i in shown else None)
                for i in flipped.get(direction, [])
            ],
        )
        for direction in ("to_hallucinated", "to_clean")
    ]
    return {
        "status": "regressed" if c["regressed"] else "passed",
        "message": c["message"],
        "rows": [(k, "" if v is None else str(v)) for k, v in rows],
        "drift": drift_svg(
            [(j["judge_id"], j["drift"]) for j in c["judges"]], thresholds.get("max_judge_drift")
        ),
        "flips": flips,
    }


def _context(data: ReportData) -> dict[str, Any]:
    return {
        "run_id": data.run.run_id,
        "summary": _summary(data),
        "regression": _regression(data),
        "histograms": _histograms(data),
        "agreement": _agreement(data),
        "disputed": table("disputed-index", DISPUTED_COLUMNS, data.disputed),
        "items": data.items(),
        "gold_label": data.gold_label,
        "bias": data.bias,
    }


def _macros() -> Any:
    return environment().get_template("_report.html").module


def summary_section(data: ReportData) -> str:
    """The run summary section alone (what the run cost, counted as the CLI counts it)."""
    return str(_macros().summary_section(_summary(data)))


def render_report(store: Store, run_id: str, top: int = 15, gold: GoldSource = "dataset") -> str:
    data = load_report_data(store, run_id, top, gold=gold)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = environment().get_template("report.html")
    return page.render(generated=generated, store_path=str(store.path), **_context(data))


class ReportWriteError(ValueError):
    """The report could not be written where asked; the message says what to change."""


def write_report(
    store: Store, run_id: str, path: str | Path, top: int = 15, gold: GoldSource = "dataset"
) -> Path:
    """Render run ``run_id`` and write it to ``path`` as an owner-only (0600) file."""
    out = Path(path)
    page = render_report(store, run_id, top, gold=gold)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_private_text(out, page)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ReportWriteError(
            f"cannot write the report to {out}: {reason}; pass -o a writable path"
        ) from None
    return out
