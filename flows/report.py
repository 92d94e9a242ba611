"""A self-contained HTML report of one run: inline CSS and inline SVG, no script, no network.

Sections: the run summary; each judge's score distribution (SVG histograms); pairwise
agreement heatmaps (Cohen's kappa on verdicts, character F1 on spans); the disputed items
with each judge's spans and the consensus highlighted in the judged text (``<mark>``); and
the regression deltas when the run was compared with a baseline.

Every value that comes from the data goes through :func:`html.escape`: a response that
contains markup shows as text and never becomes part of the page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from flows.artifacts import judge_stats
from flows.reaggregate import _text_variable
from judges.agreement import merge_spans, pairwise_cohen_kappa, pairwise_span_f1
from judges.records import Judgment
from storage.comparisons import latest_comparison
from storage.store import Store

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
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


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


def _heat_colour(value: float) -> str:
    """-1 red, 0 white, +1 blue; grey for undefined."""
    if math.isnan(value):
        return "#dddddd"
    v = max(-1.0, min(1.0, value))
    if v >= 0:
        r = g = int(255 - v * (255 - 60))
        b = 255 - int(v * 40)
    else:
        r, g, b = 255 - int(-v * 40), int(255 + v * (255 - 70)), int(255 + v * (255 - 70))
    return f"rgb({r},{g},{b})"


def heatmap_svg(matrix: np.ndarray, labels: Sequence[str], title: str) -> str:
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
            value = float(matrix[i, j])
            parts.append(
                f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 2}" '
                f'height="{cell - 2}" fill="{_heat_colour(value)}"><title>{esc(labels[i])} / '
                f"{esc(labels[j])}: {fmt(value)}</title></rect>"
                f'<text x="{left + j * cell + cell / 2 - 1:.0f}" '
                f'y="{top + i * cell + cell / 2 + 4:.0f}" text-anchor="middle" '
                f'class="{"cell light" if abs(value) > 0.6 else "cell"}">{fmt(value, 2)}</text>'
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


# ------------------------------------------------------------------------------ the data


@dataclass
class ReportData:
    run: Any
    summary: dict[str, Any]
    judges: list[str]
    stats: list[dict[str, Any]]
    judgments: dict[str, dict[str, Judgment]]
    """item id -> judge id -> judgment."""
    consensus: dict[str, dict[str, Any]]
    consensus_spans: dict[str, list[tuple[int, int]]]
    texts: dict[str, str]
    gold: dict[str, tuple[bool | None, list[tuple[int, int]]]]
    comparison: dict[str, Any] | None
    agreement: dict[str, Any] | None = None
    """``flows.analysis.agreement_report`` as JSON, when that module is available."""


def _agreement_report(store: Store, run_id: str) -> dict[str, Any] | None:
    try:
        from flows.analysis import agreement_report

        report: dict[str, Any] = agreement_report(store, run_id).model_dump(mode="json")
    except Exception:  # the report still shows the heatmaps computed here
        return None
    return report


def load_report_data(store: Store, run_id: str) -> ReportData:
    run = store.get_run(run_id)
    if run is None:
        raise ValueError(f"no run {run_id!r} in {store.path}")
    judgments: dict[str, dict[str, Judgment]] = {}
    for judgment in store.load_judgments(run_id):
        judgments.setdefault(judgment.item_id, {})[judgment.judge_id] = judgment
    judge_ids = [j["id"] for j in run.panel.get("judges", [])]
    seen = {jid for by_judge in judgments.values() for jid in by_judge}
    judge_ids += sorted(seen - set(judge_ids))
    columns, rows = store.query(
        "SELECT item_id, status, score_median, score_min, score_max, score_spread, "
        "hallucinated, n_answered FROM consensus WHERE run_id = ?",
        [run_id],
    )
    consensus = {row[0]: dict(zip(columns, row, strict=True)) for row in rows}
    _, span_rows = store.query(
        "SELECT item_id, char_start, char_end FROM consensus_spans WHERE run_id = ? "
        "ORDER BY item_id, span_index",
        [run_id],
    )
    consensus_spans: dict[str, list[tuple[int, int]]] = {}
    for item_id, start, end in span_rows:
        consensus_spans.setdefault(item_id, []).append((int(start), int(end)))
    try:
        variable = _text_variable(run, store)
    except Exception:
        variable = "response"
    texts: dict[str, str] = {}
    gold: dict[str, tuple[bool | None, list[tuple[int, int]]]] = {}
    for item in store.load_items(run_id):
        texts[item.item_id] = item.text(variable)
        if item.gold is not None:
            gold[item.item_id] = (item.gold.hallucinated, list(item.gold.spans))
    return ReportData(
        run=run,
        summary=store.run_summary(run_id),
        judges=judge_ids,
        stats=judge_stats(store, run_id),
        judgments=judgments,
        consensus=consensus,
        consensus_spans=consensus_spans,
        texts=texts,
        gold=gold,
        comparison=latest_comparison(store, run_id),
        agreement=_agreement_report(store, run_id),
    )


def disputed_items(data: ReportData, top: int) -> list[str]:
    """Items whose judges disagree on the verdict, widest score spread first."""
    ranked = []
    for item_id, by_judge in data.judgments.items():
        verdicts = [j.verdict for j in by_judge.values() if j.verdict is not None]
        if len(set(verdicts)) < 2:
            continue
        minority = min(sum(verdicts), len(verdicts) - sum(verdicts))
        spread = data.consensus.get(item_id, {}).get("score_spread") or 0.0
        ranked.append((-spread, -minority, item_id))
    return [item_id for *_, item_id in sorted(ranked)[:top]]


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
.charts{display:flex;flex-wrap:wrap;gap:10px}
.charts svg{background:#fff;border:1px solid #e3e3e3}
.svg-title{font-size:12px;font-weight:600}.tick{font-size:11px;fill:#444}
.cell{font-size:11px;fill:#111}.cell.light{fill:#fff}
.item{background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px 12px;margin:12px 0}
.item .meta{color:#555;font-size:12px}
.layer{display:grid;grid-template-columns:150px 1fr;gap:8px;border-top:1px dashed #eee;
  padding:4px 0}
.layer .who{font-size:12px;color:#333;font-weight:600}
.layer .text{white-space:pre-wrap;word-break:break-word}
mark{border-radius:2px;padding:0 1px;color:inherit}
mark.consensus{background:#f8c9c4;outline:2px solid #c0392b;font-weight:600}
mark.gold{background:none;border-bottom:3px double #2d7d2d}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;color:#fff}
.bad{background:#c0392b}.good{background:#2d7d2d}.na{background:#888}
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
        ("cost (USD)", f"{s.get('cost_usd') or 0:.4f}"),
        ("rejected rows", s.get("rejected_rows")),
    ]
    if run.parent_run_id:
        rows.insert(2, ("re-aggregated from", run.parent_run_id))
        params = run.parameters or {}
        rows.insert(3, ("min votes", params.get("min_votes") or "strict majority"))
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    stat_rows = "".join(
        f"<tr><td>{esc(r['judge_id'])}</td><td>{esc(r['provider'])}</td><td>{esc(r['model'])}"
        f'</td><td class="num">{r["scored"]}</td><td class="num">{r["unscored"]}</td>'
        f'<td class="num">{fmt(r["mean_score"])}</td>'
        f'<td class="num">{fmt(r["hallucinated_share"])}</td>'
        f'<td class="num">{fmt(r["mean_abs_diff_from_consensus"])}</td></tr>'
        for r in data.stats
    )
    return (
        f'<section id="summary"><h2>Run summary</h2><table>{body}</table>'
        "<h3>Judges</h3><table><tr><th>judge</th><th>provider</th><th>model</th><th>scored</th>"
        "<th>unscored</th><th>mean score</th><th>hallucinated share</th>"
        f"<th>mean |score − consensus|</th></tr>{stat_rows}</table></section>"
    )


def distribution_section(data: ReportData) -> str:
    charts = []
    for index, judge_id in enumerate(data.judges):
        scores = [
            j.score
            for by_judge in data.judgments.values()
            if (j := by_judge.get(judge_id)) is not None and j.score is not None
        ]
        charts.append(
            histogram_svg(scores, PALETTE[index % len(PALETTE)], f"{judge_id} (n={len(scores)})")
        )
    medians = [c["score_median"] for c in data.consensus.values() if c["score_median"] is not None]
    charts.append(histogram_svg(medians, "#c0392b", f"consensus median (n={len(medians)})"))
    return (
        '<section id="distributions"><h2>Score distributions</h2>'
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


def agreement_section(data: ReportData) -> str:
    item_ids = sorted(data.judgments)
    verdicts = np.full((len(data.judges), len(item_ids)), np.nan)
    spans_by_judge: list[list[list[tuple[int, int]] | None]] = []
    for row, judge_id in enumerate(data.judges):
        judge_spans: list[list[tuple[int, int]] | None] = []
        for col, item_id in enumerate(item_ids):
            judgment = data.judgments[item_id].get(judge_id)
            if judgment is None or judgment.score is None:
                judge_spans.append(None)
                continue
            verdicts[row, col] = 1.0 if judgment.verdict else 0.0
            judge_spans.append(
                [
                    (s.char_start, s.char_end)
                    for s in judgment.spans
                    if s.char_start is not None and s.char_end is not None
                ]
            )
        spans_by_judge.append(judge_spans)
    charts = [heatmap_svg(pairwise_cohen_kappa(verdicts), data.judges, "Cohen κ (verdicts)")]
    if data.judges and item_ids:
        charts.append(
            heatmap_svg(pairwise_span_f1(spans_by_judge), data.judges, "span F1 (characters)")
        )
    return (
        '<section id="agreement"><h2>Pairwise agreement</h2>'
        f'<div class="charts">{"".join(charts)}</div>'
        '<p class="meta">Grey cells are undefined (nothing shared, or no variation).</p>'
        f"{_panel_statistics(data.agreement)}</section>"
    )


def _stat_cell(stat: Any) -> str:
    if not isinstance(stat, dict):
        return "<td>–</td>"
    if stat.get("value") is None:
        return f'<td class="num">n/a ({esc(stat.get("note") or "undefined")})</td>'
    value = fmt(float(stat["value"]))
    return f'<td class="num">{value} <span class="meta">n={esc(stat.get("n"))}</span></td>'


def _panel_statistics(report: dict[str, Any] | None) -> str:
    """Group statistics and accuracy against human labels from ``flows.analysis``."""
    if not report:
        return ""
    names = (
        ("alpha_interval", "Krippendorff α (interval)"),
        ("alpha_ordinal", "Krippendorff α (ordinal)"),
        ("fleiss_kappa", "Fleiss κ (verdicts)"),
        ("percent_agreement", "percent agreement"),
        ("mean_cohen_kappa", "mean pairwise Cohen κ"),
        ("mean_span_f1", "mean pairwise span F1"),
    )
    header = "".join(f"<th>{esc(label)}</th>" for _, label in names)
    rows = "".join(
        f"<tr><td>{esc(group.get('name'))}</td>"
        + "".join(_stat_cell(group.get(key)) for key, _ in names)
        + "</tr>"
        for group in report.get("groups", [])
    )
    parts = [f"<h3>Panel agreement</h3><table><tr><th>group</th>{header}</tr>{rows}</table>"]
    accuracy = [a for a in report.get("accuracy", []) if a.get("response") or a.get("spans")]
    if accuracy:
        body = ""
        for a in accuracy:
            response, spans = a.get("response") or {}, a.get("spans") or {}
            body += (
                f"<tr><td>{esc(a.get('predictor'))}</td>"
                f'<td class="num">{fmt(response.get("f1"))}</td>'
                f'<td class="num">{fmt(spans.get("f1"))}</td></tr>'
            )
        parts.append(
            "<h3>Against the human labels</h3><table><tr><th>predictor</th>"
            f"<th>response F1</th><th>span F1 (characters)</th></tr>{body}</table>"
        )
    return "".join(parts)


def disputed_section(data: ReportData, top: int) -> str:
    chosen = disputed_items(data, top)
    legend = "".join(
        f'<span><mark class="j{i}">{esc(judge_id)}</mark></span>'
        for i, judge_id in enumerate(data.judges)
    )
    legend += '<span><mark class="consensus">consensus</mark></span>'
    legend += '<span><mark class="gold">human label</mark></span>'
    parts = [
        '<section id="disputed"><h2>Disputed items</h2>',
        f"<p>{len(chosen)} item(s) on which the judges' verdicts differ, widest score spread "
        f'first.</p><p class="legend">{legend}</p>',
    ]
    if not chosen:
        parts.append("<p>No disputed item: every judge gave the same verdict.</p>")
    for item_id in chosen:
        text = data.texts.get(item_id, "")
        consensus = data.consensus.get(item_id, {})
        gold_verdict, gold_spans = data.gold.get(item_id, (None, []))
        layers = [
            (
                "consensus",
                f"median {fmt(consensus.get('score_median'))}",
                highlight(text, data.consensus_spans.get(item_id, []), "consensus", "consensus"),
            )
        ]
        for index, judge_id in enumerate(data.judges):
            judgment = data.judgments[item_id].get(judge_id)
            if judgment is None:
                continue
            if judgment.score is None:
                detail = f"unscored: {judgment.unscored_reason}"
                body = esc(text)
            else:
                detail = f"score {fmt(judgment.score)}"
                offsets = [
                    (s.char_start, s.char_end)
                    for s in judgment.spans
                    if s.char_start is not None and s.char_end is not None
                ]
                body = highlight(text, offsets, f"judge j{index}", judge_id)
            layers.append((judge_id, detail, body))
        if gold_spans or gold_verdict is not None:
            layers.append(("human label", "", highlight(text, gold_spans, "gold", "human label")))
        rows = "".join(
            f'<div class="layer"><div class="who">{esc(who)}<br><span class="meta">'
            f'{esc(detail)}</span></div><div class="text">{body}</div></div>'
            for who, detail, body in layers
        )
        parts.append(
            f'<article class="item" id="item-{esc(item_id)}"><h3>{esc(item_id)} '
            f"{_verdict_badge(consensus.get('hallucinated'))}</h3>"
            f'<div class="meta">spread {fmt(consensus.get("score_spread"))} · '
            f"{esc(consensus.get('status'))} · human label: "
            f"{esc('–' if gold_verdict is None else gold_verdict)}</div>{rows}</article>"
        )
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
        (
            "agreement (Krippendorff α)",
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
    data = load_report_data(store, run_id)
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
        f"{agreement_section(data)}{disputed_section(data, top)}"
        "</main></body></html>\n"
    )


def write_report(store: Store, run_id: str, path: str | Path, top: int = 15) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(store, run_id, top), encoding="utf-8")
    return out
