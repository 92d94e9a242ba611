"""A self-contained HTML report of one run: inline CSS and inline SVG, no script, no network.

Sections: the run summary; each judge's score distribution (SVG histograms); the panel's
agreement (group statistics, pairwise heatmaps and table, each judge against the panel,
accuracy against the human labels); the disputed items with each judge's spans and the
consensus highlighted in the judged text (``<mark>``); and the regression deltas when the
run was compared with a baseline.

Where the numbers come from: every agreement, bias and accuracy figure is a field of
:class:`juryflow.analysis.AgreementReport`, and the disputed items (which, in what order,
their measures and spans) are :func:`juryflow.analysis.disagreements`: the very objects
``juryflow agreement`` and ``juryflow disagreements`` print, so the report cannot tell a
different story. Read here directly is only what those do not carry: the run's metadata
and summary counts, each judge's provider and model, the raw scores behind the
histograms, and the regression comparison.

The tables are lists of ``(label, cell)`` pairs (:data:`GROUP_METRICS`,
:data:`PAIR_COLUMNS`, :data:`JUDGE_COLUMNS`, :data:`ACCURACY_COLUMNS`, ...): showing one
more field of the agreement report is one more pair.

Every value that comes from the data goes through :func:`html.escape`: a response that
contains markup shows as text and never becomes part of the page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from juryflow.analysis import (
    Accuracy,
    AgreementReport,
    DisputedItem,
    GroupAgreement,
    JudgeAnswer,
    JudgeSummary,
    PairAgreement,
    Scores,
    SpanOut,
    Stat,
    agreement_report,
    disagreements,
)
from juryflow.judges.agreement import merge_spans
from juryflow.storage.comparisons import latest_comparison
from juryflow.storage.files import write_private_text
from juryflow.storage.report_queries import judge_stats, raw_scores
from juryflow.storage.run_queries import cost_split
from juryflow.storage.store import RunRecord, Store

T = TypeVar("T")

Cell = Callable[[T], str]
"""Renders one table cell (a whole ``<td>``, data escaped) of one row."""

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7")
MARK_COLOURS = (
    "#cfe0f3",
    "#fde2c4",
    "#d3ecd0",
    "#ead9e6",
    "#d6eeec",
    "#fbf1c7",
    "#e6dad2",
    "#ffe0e4",
)


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    """Run metadata and regression figures (not from the agreement report)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


# The agreement figures are printed as `juryflow agreement` prints them (fixed decimals,
# "n/a (why)" for an undefined Stat), so a number can be looked up in either by its text.


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


# ----------------------------------------------------------------------------- SVG charts


def histogram_svg(scores: Sequence[float], colour: str, title: str, bins: int = 10) -> str:
    """Bars of how many scores fall in each tenth of [0, 1]."""
    width, height, pad_left, pad_bottom, pad_top = 260, 130, 30, 22, 18
    counts, _ = np.histogram(np.asarray(scores, dtype=float), bins=bins, range=(0.0, 1.0))
    top = max(int(counts.max()) if counts.size else 0, 1)
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    bar_w = plot_w / bins
    parts = [
        f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}">',
        f'<text x="{pad_left}" y="12" class="svg-title">{esc(title)}</text>',
        f'<line x1="{pad_left}" y1="{pad_top + plot_h}" x2="{pad_left + plot_w}" '
        f'y2="{pad_top + plot_h}" stroke="#888"/>',
        f'<text x="{pad_left - 4}" y="{pad_top + 8}" text-anchor="end" class="tick">{top}</text>',
        f'<text x="{pad_left - 4}" y="{pad_top + plot_h}" text-anchor="end" class="tick">0</text>',
    ]
    for index, count in enumerate(counts):
        bar_h = plot_h * int(count) / top
        x = pad_left + index * bar_w
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{pad_top + plot_h - bar_h:.1f}" width="{bar_w - 2:.1f}" '
            f'height="{bar_h:.1f}" fill="{colour}"><title>{index / bins:.1f}–'
            f"{(index + 1) / bins:.1f}: {int(count)}</title></rect>"
        )
    for tick in (0.0, 0.5, 1.0):
        x = pad_left + tick * plot_w
        parts.append(
            f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle" class="tick">{tick:g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _heat_colour(value: float | None) -> str:
    """-1 red, 0 white, +1 blue; grey for undefined."""
    if value is None or math.isnan(value):
        return "#dddddd"
    v = max(-1.0, min(1.0, value))
    if v >= 0:
        r = g = int(255 - v * (255 - 60))
        b = 255 - int(v * 40)
    else:
        r, g, b = 255 - int(-v * 40), int(255 + v * (255 - 70)), int(255 + v * (255 - 70))
    return f"rgb({r},{g},{b})"


@dataclass(frozen=True, slots=True)
class HeatCell:
    value: float | None
    """None = undefined: a grey cell reading n/a."""
    tooltip: str
    """What the cell's ``<title>`` says after the two judges (the value, or n/a and why)."""


def heatmap_svg(cells: Sequence[Sequence[HeatCell]], labels: Sequence[str], title: str) -> str:
    n = len(labels)
    cell, left, top = 56, 110, 40
    width, height = left + n * cell + 10, top + n * cell + 10
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}">',
        f'<text x="4" y="14" class="svg-title">{esc(title)}</text>',
    ]
    for i, label in enumerate(labels):
        y = top + i * cell + cell / 2 + 4
        x = left + i * cell + cell / 2
        parts.append(
            f'<text x="{left - 6}" y="{y:.0f}" text-anchor="end" class="tick">{esc(label)}</text>'
        )
        parts.append(
            f'<text x="{x:.0f}" y="{top - 6}" text-anchor="middle" class="tick">{esc(label)}</text>'
        )
        for j in range(n):
            value = cells[i][j].value
            shade = "cell light" if value is not None and abs(value) > 0.6 else "cell"
            parts.append(
                f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 2}" '
                f'height="{cell - 2}" fill="{_heat_colour(value)}"><title>{esc(labels[i])} / '
                f"{esc(labels[j])}: {esc(cells[i][j].tooltip)}</title></rect>"
                f'<text x="{left + j * cell + cell / 2 - 1:.0f}" '
                f'y="{top + i * cell + cell / 2 + 4:.0f}" text-anchor="middle" '
                f'class="{shade}">{"n/a" if value is None else _num(value, 2)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def drift_svg(drifts: Sequence[tuple[str, float | None]], threshold: float | None) -> str:
    """Horizontal bars of each judge's drift around zero, the threshold as dashed lines."""
    values = [abs(d) for _, d in drifts if d is not None and not math.isnan(d)]
    scale = max([*values, threshold or 0.0, 0.05])
    row, left, half = 24, 110, 150
    width, height = left + 2 * half + 20, 20 + row * len(drifts) + 10
    mid = left + half
    parts = [
        f'<svg class="drift" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="judge drift">',
        f'<line x1="{mid}" y1="10" x2="{mid}" y2="{height - 4}" stroke="#888"/>',
    ]
    if threshold is not None:
        for sign in (-1, 1):
            x = mid + sign * half * threshold / scale
            parts.append(
                f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="{height - 4}" '
                'stroke="#c0392b" stroke-dasharray="4 3"/>'
            )
    for index, (judge_id, drift) in enumerate(drifts):
        y = 16 + index * row
        parts.append(
            f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="tick">'
            f"{esc(judge_id)}</text>"
        )
        if drift is None or math.isnan(drift):
            continue
        length = half * abs(drift) / scale
        x = mid if drift >= 0 else mid - length
        colour = "#c0392b" if threshold is not None and abs(drift) > threshold else "#4e79a7"
        parts.append(
            f'<rect x="{x:.1f}" y="{y}" width="{max(length, 1):.1f}" height="{row - 8}" '
            f'fill="{colour}"><title>{esc(judge_id)}: {drift:+.3f}</title></rect>'
        )
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------------- text highlighting


def highlight(text: str, spans: Sequence[tuple[int, int]], css_class: str, label: str) -> str:
    """``text`` escaped, with each (merged, clipped) span wrapped in ``<mark class=...>``."""
    bounded = [(max(0, min(s, len(text))), max(0, min(e, len(text)))) for s, e in spans]
    clipped = [(s, e) for s, e in bounded if s < e]
    merged = merge_spans(clipped) if clipped else np.zeros((0, 2), dtype=np.int64)
    out: list[str] = []
    cursor = 0
    for start, end in merged.tolist():
        out.append(esc(text[cursor:start]))
        out.append(f'<mark class="{css_class}" title="{esc(label)}">{esc(text[start:end])}</mark>')
        cursor = end
    out.append(esc(text[cursor:]))
    return "".join(out)


def _offsets(spans: Sequence[SpanOut]) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in spans if s.start is not None and s.end is not None]


# ------------------------------------------------------------------------------ the data


@dataclass(frozen=True, slots=True)
class JudgeMeta:
    """What the run recorded about a judge besides its answers."""

    provider: str | None
    model: str | None
    judgments: int
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class ReportData:
    run: RunRecord
    summary: dict[str, Any]
    """``Store.run_summary``: counts, consensus hallucination rate, cost."""
    agreement: AgreementReport
    disputed: list[DisputedItem]
    judge_meta: dict[str, JudgeMeta]
    scores: dict[str, list[float]]
    """Judge id -> its raw scores, for the histograms."""
    consensus_medians: list[float]
    comparison: dict[str, Any] | None

    @property
    def judges(self) -> list[str]:
        """The judges in panel order, as the agreement report has them."""
        return self.agreement.judges


def _judge_meta(store: Store, run_id: str) -> dict[str, JudgeMeta]:
    return {
        str(row["judge_id"]): JudgeMeta(
            row["provider"],
            row["model"],
            int(row["judgments"]),
            None if row["cost_usd"] is None else float(row["cost_usd"]),
        )
        for row in judge_stats(store, run_id)
    }


def load_report_data(store: Store, run_id: str, top: int = 15) -> ReportData:
    run = store.get_run(run_id)
    if run is None:
        raise ValueError(f"no run {run_id!r} in {store.path}")
    scores, medians = raw_scores(store, run_id)
    return ReportData(
        run=run,
        summary={**store.run_summary(run_id), **cost_split(store, run_id)},
        agreement=agreement_report(store, run_id),
        disputed=disagreements(store, run_id, top),
        judge_meta=_judge_meta(store, run_id),
        scores=scores,
        consensus_medians=medians,
        comparison=latest_comparison(store, run_id),
    )


# ------------------------------------------------------------------------- table cells


def _td(body: str, *, num: bool = False, na: bool = False, title: str | None = None) -> str:
    """A ``<td>`` around ``body``, which must already be escaped."""
    classes = " ".join(c for c, on in (("num", num), ("na", na)) if on)
    attrs = (f' class="{classes}"' if classes else "") + (f' title="{esc(title)}"' if title else "")
    return f"<td{attrs}>{body}</td>"


def td_text(value: Any) -> str:
    return _td(esc(value))


def td_count(value: int) -> str:
    return _td(esc(value), num=True)


def td_num(value: float | None, digits: int = 3) -> str:
    return _td(esc(_num(value, digits)), num=True)


def td_pct(value: float | None) -> str:
    return _td("—" if value is None else esc(f"{100 * value:.1f} %"), num=True)


def td_stat(stat: Stat | None, *, signed: bool = False) -> str:
    """A statistic with what it rests on as a tooltip; undefined: n/a and the reason."""
    if stat is None:
        return _td("—", num=True)
    if stat.value is None:
        # The reason is visible text as well as a tooltip: it survives print and screenshots.
        note = f' <small class="note">({esc(stat.note)})</small>' if stat.note else ""
        return _td(f"n/a{note}", num=True, na=True, title=stat.note)
    text = f"{stat.value:+.3f}" if signed else stat.show()
    return _td(esc(text), num=True, title=f"n = {stat.n}")


def td_score(scores: Scores | None, field: str, why: str) -> str:
    """One of precision / recall / F1; n/a with ``why`` as a tooltip when there are none."""
    if scores is None:
        return _td("n/a", num=True, na=True, title=why)
    value: float = getattr(scores, field)
    return _td(esc(_num(value)), num=True, title=f"tp {scores.tp}, fp {scores.fp}, fn {scores.fn}")


def table(table_id: str, columns: Sequence[tuple[str, Cell[T]]], rows: Sequence[T]) -> str:
    """One row per element of ``rows``, one column per ``(label, cell)`` pair."""
    header = "".join(f"<th>{esc(label)}</th>" for label, _ in columns)
    body = "".join("<tr>" + "".join(cell(row) for _, cell in columns) + "</tr>" for row in rows)
    return f'<table id="{esc(table_id)}"><tr>{header}</tr>{body}</table>'


def facts_table(table_id: str, facts: Sequence[tuple[str, Cell[T]]], subject: T) -> str:
    """One row per ``(label, cell)`` pair, about one subject."""
    body = "".join(f"<tr><th>{esc(label)}</th>{cell(subject)}</tr>" for label, cell in facts)
    return f'<table id="{esc(table_id)}">{body}</table>'


# --------------------------------------------------------------- what the tables show

REPORT_FACTS: tuple[tuple[str, Cell[AgreementReport]], ...] = (
    ("items", lambda r: td_count(r.n_items)),
    ("judges compared", lambda r: td_text(", ".join(r.judges) or "–")),
    ("human labels", lambda r: td_text("yes" if r.has_gold else "no")),
)

GROUP_METRICS: tuple[tuple[str, Callable[[GroupAgreement], Stat | None]], ...] = (
    ("Krippendorff α, interval (scores)", lambda g: g.alpha_interval),
    ("Krippendorff α, ordinal (scores)", lambda g: g.alpha_ordinal),
    ("Fleiss κ (verdicts)", lambda g: g.fleiss_kappa),
    ("percent agreement (verdicts)", lambda g: g.percent_agreement),
    ("mean pairwise Cohen κ", lambda g: g.mean_cohen_kappa),
    ("mean pairwise span F1 (chars)", lambda g: g.mean_span_f1),
    ("effective panel size (errors vs gold)", lambda g: g.effective_panel_size),
)
"""Rows of the group table; a row that no group has (None everywhere) is left out."""

PAIR_COLUMNS: tuple[tuple[str, Cell[PairAgreement]], ...] = (
    ("judge A", lambda p: td_text(p.judge_a)),
    ("judge B", lambda p: td_text(p.judge_b)),
    ("items", lambda p: td_count(p.n_items)),
    ("verdict agreement", lambda p: td_stat(p.verdict_agreement)),
    ("Cohen κ", lambda p: td_stat(p.cohen_kappa)),
    ("span items", lambda p: td_count(p.n_span_items)),
    ("span F1", lambda p: td_stat(p.span_f1)),
)

JUDGE_COLUMNS: tuple[tuple[str, Cell[JudgeSummary]], ...] = (
    ("judge", lambda j: td_text(j.judge_id)),
    ("output", lambda j: td_text(j.output_kind)),
    ("prompt", lambda j: td_text(j.prompt or "—")),
    ("scored", lambda j: _td(esc(f"{j.n_scored}/{j.n_items}"), num=True)),
    ("mean score", lambda j: td_num(j.mean_score)),
    ("flag rate", lambda j: td_pct(j.flag_rate)),
    ("bias vs median", lambda j: td_stat(j.bias, signed=True)),
    ("verdict = consensus", lambda j: td_stat(j.consensus_verdict_agreement)),
    ("span F1 vs consensus", lambda j: td_stat(j.consensus_span_f1)),
)

_NO_VERDICT = "no verdict on an item with a human label"
_NO_SPANS = "no item with both span answers and human span labels"

ACCURACY_COLUMNS: tuple[tuple[str, Cell[Accuracy]], ...] = (
    ("predictor", lambda a: td_text(a.predictor)),
    ("items", lambda a: td_count(a.n_items)),
    ("precision", lambda a: td_score(a.response, "precision", _NO_VERDICT)),
    ("recall", lambda a: td_score(a.response, "recall", _NO_VERDICT)),
    ("F1", lambda a: td_score(a.response, "f1", _NO_VERDICT)),
    ("span items", lambda a: td_count(a.n_span_items)),
    ("span P", lambda a: td_score(a.spans, "precision", _NO_SPANS)),
    ("span R", lambda a: td_score(a.spans, "recall", _NO_SPANS)),
    ("span F1", lambda a: td_score(a.spans, "f1", _NO_SPANS)),
)

ITEM_MEASURES: tuple[tuple[str, Callable[[DisputedItem], str]], ...] = (
    ("disagreement", lambda d: _num(d.disagreement)),
    ("score spread", lambda d: _num(d.score_spread, 2)),
    (
        "verdicts",
        lambda d: f"{d.n_hallucinated_verdicts} hallucinated / {d.n_clean_verdicts} clean",
    ),
    ("span disagreement", lambda d: _num(d.span_disagreement, 2)),
    ("consensus", lambda d: d.consensus_status or "none"),
    ("human label", lambda d: _verdict_word(d.gold_hallucinated)),
)
"""The measures line of each disputed item (plain text, escaped when rendered)."""


# ------------------------------------------------------------------------------ sections

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
  color:#222;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;
  border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;margin:6px 0;background:#fff}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.na{color:#777}small.note{font-size:11px}
.charts{display:flex;flex-wrap:wrap;gap:10px}
.charts svg{background:#fff;border:1px solid #e3e3e3}
.svg-title{font-size:12px;font-weight:600}.tick{font-size:11px;fill:#444}
.cell{font-size:11px;fill:#111}.cell.light{fill:#fff}
.item{background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px 12px;margin:12px 0}
.meta{color:#555;font-size:12px}
.layer{display:grid;grid-template-columns:150px 1fr;gap:8px;border-top:1px dashed #eee;
  padding:4px 0}
.layer .who{font-size:12px;color:#333;font-weight:600}
.layer .text{white-space:pre-wrap;word-break:break-word}
mark{border-radius:2px;padding:0 1px;color:inherit}
mark.consensus{background:#f8c9c4;outline:2px solid #c0392b;font-weight:600}
mark.gold{background:none;border-bottom:3px double #2d7d2d}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;color:#fff}
.bad{background:#c0392b}.good{background:#2d7d2d}.badge.na{background:#888}
.legend span{margin-right:12px}
.regressed{border-left:5px solid #c0392b;padding-left:10px}
.passed{border-left:5px solid #2d7d2d;padding-left:10px}
"""


def _judge_css(judges: Sequence[str]) -> str:
    return "".join(
        f"mark.j{i}{{background:{MARK_COLOURS[i % len(MARK_COLOURS)]};"
        f"box-shadow:inset 0 -2px 0 {PALETTE[i % len(PALETTE)]}}}"
        for i in range(len(judges))
    )


def _verdict_word(value: bool | None) -> str:
    return "–" if value is None else ("hallucinated" if value else "clean")


def _verdict_badge(value: bool | None) -> str:
    if value is None:
        return '<span class="badge na">no verdict</span>'
    return (
        '<span class="badge bad">hallucinated</span>'
        if value
        else '<span class="badge good">clean</span>'
    )


def summary_section(data: ReportData) -> str:
    run, s = data.run, data.summary
    rate = s.get("hallucination_rate")
    rows = [
        ("run", run.run_id),
        ("kind", run.kind),
        ("status", run.status),
        ("suite", run.suite),
        ("panel", f"{run.panel_name} ({run.n_judges} judges, quorum {run.quorum})"),
        ("dataset", run.dataset),
        ("started", run.started_at),
        ("finished", run.finished_at),
        ("items", f"{s['items']} ({s['insufficient']} below quorum)"),
        ("hallucinated (consensus)", f"{fmt(rate * 100 if rate is not None else None)} %"),
        ("judgments", f"{s['judgments']} ({s['unscored']} unscored, {s['cache_hits']} cached)"),
        ("mean spread between judges", fmt(s.get("mean_spread"))),
        (
            "cost (USD)",
            f"{s.get('cost_spent_usd') or 0:.4f} spent in this run; "
            f"{s.get('cost_reused_usd') or 0:.4f} reused from the cache (not paid again)",
        ),
        ("rejected rows", s.get("rejected_rows")),
    ]
    if run.parent_run_id:
        rows.insert(2, ("re-aggregated from", run.parent_run_id))
        params = run.parameters or {}
        rows.insert(3, ("min votes", params.get("min_votes") or "strict majority"))
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    none = JudgeMeta(None, None, 0, None)
    judge_columns: tuple[tuple[str, Cell[str]], ...] = (
        ("judge", td_text),
        ("provider", lambda j: td_text(data.judge_meta.get(j, none).provider)),
        ("model", lambda j: td_text(data.judge_meta.get(j, none).model)),
        ("judgments", lambda j: td_count(data.judge_meta.get(j, none).judgments)),
        ("cost (USD)", lambda j: td_num(data.judge_meta.get(j, none).cost_usd, 4)),
    )
    return (
        f'<section id="summary"><h2>Run summary</h2><table>{body}</table>'
        f"<h3>Judges</h3>{table('judge-metadata', judge_columns, data.judges)}</section>"
    )


def distribution_section(data: ReportData) -> str:
    charts = []
    for index, judge_id in enumerate(data.judges):
        scores = data.scores.get(judge_id, [])
        charts.append(
            histogram_svg(scores, PALETTE[index % len(PALETTE)], f"{judge_id} (n={len(scores)})")
        )
    medians = data.consensus_medians
    charts.append(histogram_svg(medians, "#c0392b", f"consensus median (n={len(medians)})"))
    return (
        '<section id="distributions"><h2>Score distributions</h2>'
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


def _pair_cells(
    group: GroupAgreement,
    matrix: Sequence[Sequence[float | None]],
    pick: Callable[[PairAgreement], Stat],
) -> list[list[HeatCell]]:
    """The heatmap of one pairwise metric: values from ``matrix``, reasons from the pairs."""
    index = {judge: k for k, judge in enumerate(group.judges)}
    n = len(group.judges)
    # A judge against itself has no PairAgreement: its cell says just the matrix value.
    cells = [
        [
            HeatCell(matrix[i][j], "n/a" if matrix[i][j] is None else _num(matrix[i][j]))
            for j in range(n)
        ]
        for i in range(n)
    ]
    for pair in group.pairs:
        stat = pick(pair)
        a, b = index[pair.judge_a], index[pair.judge_b]
        cells[a][b] = cells[b][a] = HeatCell(stat.value, stat.show())
    return cells


def _group_table(groups: Sequence[GroupAgreement]) -> str:
    header = "<th>metric</th>" + "".join(
        f"<th>{esc(f'{g.name} ({len(g.judges)})')}</th><th>n</th>" for g in groups
    )
    rows = []
    for label, pick in GROUP_METRICS:
        stats = [pick(g) for g in groups]
        if all(stat is None for stat in stats):
            continue
        cells = "".join(
            td_stat(stat) + _td(esc(stat.n if stat is not None and stat.n else ""), num=True)
            for stat in stats
        )
        rows.append(f"<tr><th>{esc(label)}</th>{cells}</tr>")
    return f'<table id="panel-agreement"><tr>{header}</tr>{"".join(rows)}</table>'


def agreement_section(data: ReportData) -> str:
    report = data.agreement
    parts = [
        '<section id="agreement"><h2>Agreement</h2>',
        facts_table("agreement-facts", REPORT_FACTS, report),
    ]
    if report.groups:
        parts.append(f"<h3>Panel agreement</h3>{_group_table(report.groups)}")
        everyone = report.groups[0]
        if everyone.judges:
            charts = (
                heatmap_svg(
                    _pair_cells(everyone, everyone.cohen_kappa_matrix, lambda p: p.cohen_kappa),
                    everyone.judges,
                    "Cohen κ (verdicts)",
                ),
                heatmap_svg(
                    _pair_cells(everyone, everyone.span_f1_matrix, lambda p: p.span_f1),
                    everyone.judges,
                    "span F1 (characters)",
                ),
            )
            parts.append(
                f'<h3>Judge pairs</h3><div class="charts">{"".join(charts)}</div>'
                '<p class="meta">Grey cells are n/a; hover over one for why.</p>'
            )
        if everyone.pairs:
            parts.append(table("pairs", PAIR_COLUMNS, everyone.pairs))
    if report.judge_summaries:
        parts.append("<h3>Judges against the panel</h3>")
        parts.append(table("judges", JUDGE_COLUMNS, report.judge_summaries))
        parts.append(
            '<p class="meta">bias = mean (score − consensus median); positive is harsher '
            "than the panel.</p>"
        )
    if report.accuracy:
        parts.append("<h3>Against the human labels</h3>")
        parts.append(table("accuracy", ACCURACY_COLUMNS, report.accuracy))
    if report.notes:
        notes = "".join(f"<li>{esc(note)}</li>" for note in report.notes)
        parts.append(f'<ul class="notes meta">{notes}</ul>')
    parts.append("</section>")
    return "".join(parts)


def _judge_layer(answer: JudgeAnswer, text: str, colour: int) -> tuple[str, str, str]:
    """(who, detail, highlighted text) of one judge's answer to a disputed item."""
    if answer.score is None:
        return answer.judge_id, f"unscored: {answer.unscored_reason or ''}", esc(text)
    detail = f"score {_num(answer.score, 2)} · {_verdict_word(answer.verdict)}"
    if answer.output_kind != "spans":
        return answer.judge_id, f"{detail} · score only", esc(text)
    unanchored = [s.text for s in answer.spans if s.start is None or s.end is None]
    if unanchored:
        detail += " · not found in the text: " + ", ".join(f"«{t}»" for t in unanchored)
    body = highlight(text, _offsets(answer.spans), f"judge j{colour}", answer.judge_id)
    return answer.judge_id, detail, body


def _disputed_item(item: DisputedItem, colours: dict[str, int]) -> str:
    text = item.text
    ok = item.consensus_status == "ok"
    consensus_detail = (
        f"median {_num(item.consensus_score, 2)}" if ok else item.consensus_status or "none"
    )
    consensus_body = (
        highlight(text, _offsets(item.consensus_spans), "consensus", "consensus")
        if ok
        else esc(text)
    )
    layers = [("consensus", consensus_detail, consensus_body)]
    for answer in item.judges:
        colour = colours.setdefault(answer.judge_id, len(colours))
        layers.append(_judge_layer(answer, text, colour))
    if item.gold_hallucinated is not None or item.gold_spans is not None:
        gold_detail = _verdict_word(item.gold_hallucinated)
        if item.gold_spans is None:
            gold_detail += " · no span labels"
        gold_body = highlight(text, _offsets(item.gold_spans or []), "gold", "human label")
        layers.append(("human label", gold_detail, gold_body))
    rows = "".join(
        f'<div class="layer"><div class="who">{esc(who)}<br><span class="meta">'
        f'{esc(detail)}</span></div><div class="text">{body}</div></div>'
        for who, detail, body in layers
    )
    measures = " · ".join(f"{label} {value(item)}" for label, value in ITEM_MEASURES)
    badge = _verdict_badge(item.consensus_hallucinated if ok else None)
    return (
        f'<article class="item" id="item-{esc(item.item_id)}"><h3>#{item.rank} '
        f"{esc(item.item_id)} {badge}</h3>"
        f'<div class="meta">{esc(measures)}</div>{rows}</article>'
    )


def disputed_section(data: ReportData) -> str:
    colours = {judge_id: k for k, judge_id in enumerate(data.judges)}
    legend = "".join(
        f'<span><mark class="j{i}">{esc(judge_id)}</mark></span>'
        for i, judge_id in enumerate(data.judges)
    )
    legend += '<span><mark class="consensus">consensus</mark></span>'
    legend += '<span><mark class="gold">human label</mark></span>'
    parts = [
        '<section id="disputed"><h2>Disputed items</h2>',
        f"<p>The {len(data.disputed)} item(s) the judges disagree on most, in the order of "
        "<code>juryflow disagreements</code>: disagreement is the mean of the score spread, "
        "the verdict split and the span disagreement (the <code>item_disagreement</code> "
        f'view).</p><p class="legend">{legend}</p>',
    ]
    if not data.disputed:
        parts.append("<p>No item in this run.</p>")
    parts.extend(_disputed_item(item, colours) for item in data.disputed)
    parts.append("</section>")
    return "".join(parts)


def regression_section(data: ReportData) -> str:
    c = data.comparison
    if c is None:
        return (
            '<section id="regression"><h2>Regression</h2>'
            "<p>This run has not been compared with a baseline.</p></section>"
        )
    status = "regressed" if c["regressed"] else "passed"
    rows = [
        ("baseline run", c["baseline_run_id"]),
        ("paired items", c["n_paired"]),
        ("mean consensus change", fmt(c["mean_delta"])),
        ("95% bootstrap interval", f"{fmt(c['ci_low'])} to {fmt(c['ci_high'])}"),
        ("median change", fmt(c["median_delta"])),
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
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    thresholds = c.get("thresholds") or {}
    drift = drift_svg(
        [(j["judge_id"], j["drift"]) for j in c["judges"]], thresholds.get("max_judge_drift")
    )
    flipped = c.get("flipped_items") or {}
    flips = "".join(
        f"<p><b>{esc(direction.replace('_', ' '))}</b>: "
        f"{esc(', '.join(flipped.get(direction, [])) or '–')}</p>"
        for direction in ("to_hallucinated", "to_clean")
    )
    return (
        f'<section id="regression" class="{status}"><h2>Regression vs baseline: {status}</h2>'
        f"<p><b>{esc(c['message'])}</b></p><table>{body}</table>"
        f'<h3>Judge drift</h3><div class="charts">{drift}</div>{flips}</section>'
    )


def render_report(store: Store, run_id: str, top: int = 15) -> str:
    data = load_report_data(store, run_id, top)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>juryflow report {esc(run_id)}</title>"
        f"<style>{CSS}{_judge_css(data.judges)}</style></head><body><main>"
        f"<h1>juryflow report: run {esc(run_id)}</h1>"
        f'<p class="meta">generated {esc(generated)} from {esc(store.path)}</p>'
        f"{summary_section(data)}{regression_section(data)}{distribution_section(data)}"
        f"{agreement_section(data)}{disputed_section(data)}"
        "</main></body></html>\n"
    )


class ReportWriteError(ValueError):
    """The report could not be written where asked; the message says what to change."""


def write_report(store: Store, run_id: str, path: str | Path, top: int = 15) -> Path:
    """Render run ``run_id`` and write it to ``path`` as an owner-only (0600) file."""
    out = Path(path)
    page = render_report(store, run_id, top)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_private_text(out, page)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ReportWriteError(
            f"cannot write the report to {out}: {reason}; pass -o a writable path"
        ) from None
    return out
