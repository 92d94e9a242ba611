"""SVG charts shared by the viewer and the static report (no script needed to read them).

Each chart is one ``<svg>`` returned as :class:`markupsafe.Markup`, built from escaped
parts: every label from the data goes through :func:`markupsafe.escape`. The charts style
themselves with presentation attributes, so they look the same on any page, with or
without the report's stylesheet. Hovering a bar or cell shows its ``<title>``; the values
are also drawn as text, so a printout or screenshot keeps them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

__all__ = ["HeatCell", "drift_svg", "heat_colour", "heatmap_svg", "histogram_svg"]

_FONT = 'font-family="system-ui, sans-serif"'
_TITLE = f'{_FONT} font-size="12" font-weight="600" fill="#222"'
_TICK = f'{_FONT} font-size="11" fill="#444"'
_AXIS = 'stroke="#888" stroke-width="1"'


def _num(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def _svg(css_class: str, width: float, height: float, label: str, body: list[str]) -> Markup:
    head = (
        f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="{escape(label)}">'
    )
    return Markup(head + "".join(body) + "</svg>")


def histogram_svg(
    scores: Sequence[float], colour: str, title: str, bins: int = 10, counts: bool = True
) -> Markup:
    """Bars of how many scores fall in each 1/``bins`` of [0, 1], each bar's count on top
    (``counts``), with both axes ticked."""
    width, height, pad_left, pad_bottom, pad_top = 260, 140, 32, 30, 24
    tally, _ = np.histogram(np.asarray(scores, dtype=float), bins=bins, range=(0.0, 1.0))
    top = max(int(tally.max()) if tally.size else 0, 1)
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    base = pad_top + plot_h
    bar_w = plot_w / bins
    parts = [
        f'<text x="{pad_left}" y="14" class="svg-title" {_TITLE}>{escape(title)}</text>',
        f'<line x1="{pad_left}" y1="{base}" x2="{pad_left + plot_w}" y2="{base}" {_AXIS}/>',
        f'<line x1="{pad_left}" y1="{pad_top}" x2="{pad_left}" y2="{base}" {_AXIS}/>',
        f'<text x="{pad_left - 4}" y="{pad_top + 8}" text-anchor="end" class="tick" '
        f"{_TICK}>{top}</text>",
        f'<text x="{pad_left - 4}" y="{base}" text-anchor="end" class="tick" {_TICK}>0</text>',
    ]
    for index, count in enumerate(tally.tolist()):
        bar_h = plot_h * int(count) / top
        x = pad_left + index * bar_w
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{base - bar_h:.1f}" width="{bar_w - 2:.1f}" '
            f'height="{bar_h:.1f}" fill="{escape(colour)}"><title>score {index / bins:.1f}–'
            f"{(index + 1) / bins:.1f}: {int(count)}</title></rect>"
        )
        if counts and count:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{base - bar_h - 2:.1f}" text-anchor="middle" '
                f'class="value" {_FONT} font-size="9" fill="#333">{int(count)}</text>'
            )
    for tick in (0.0, 0.5, 1.0):
        x = pad_left + tick * plot_w
        parts.append(
            f'<text x="{x:.1f}" y="{base + 13}" text-anchor="middle" class="tick" '
            f"{_TICK}>{tick:g}</text>"
        )
    parts.append(
        f'<text x="{pad_left + plot_w / 2:.1f}" y="{height - 3}" text-anchor="middle" '
        f'class="axis-label" {_TICK}>score</text>'
    )
    return _svg("hist", width, height, title, parts)


def heat_colour(value: float | None) -> str:
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


def heatmap_svg(cells: Sequence[Sequence[HeatCell]], labels: Sequence[str], title: str) -> Markup:
    """A judge × judge matrix: one ``<title>`` and one value text (class ``cell``) per cell,
    row by row, and nothing else with those, so a reader can pair them by position."""
    n = len(labels)
    cell, top = 56, 40
    left = _label_width(labels)
    width, height = left + n * cell + 10, top + n * cell + 10
    parts = [f'<text x="4" y="14" class="svg-title" {_TITLE}>{escape(title)}</text>']
    for i, label in enumerate(labels):
        y = top + i * cell + cell / 2 + 4
        x = left + i * cell + cell / 2
        parts.append(
            f'<text x="{left - 6}" y="{y:.0f}" text-anchor="end" class="tick" {_TICK}>'
            f"{escape(_short(label))}</text>"
            # a column is one cell wide: its name is cut shorter (the row says it whole)
            f'<text x="{x:.0f}" y="{top - 6}" text-anchor="middle" class="tick" {_TICK}>'
            f"{escape(_short(label, 8))}</text>"
        )
        for j in range(n):
            value = cells[i][j].value
            light = value is not None and abs(value) > 0.6
            parts.append(
                f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 2}" '
                f'height="{cell - 2}" fill="{heat_colour(value)}"><title>{escape(labels[i])} / '
                f"{escape(labels[j])}: {escape(cells[i][j].tooltip)}</title></rect>"
                f'<text x="{left + j * cell + cell / 2 - 1:.0f}" '
                f'y="{top + i * cell + cell / 2 + 4:.0f}" text-anchor="middle" '
                f'class="{"cell light" if light else "cell"}" {_FONT} font-size="11" '
                f'fill="{"#fff" if light else "#111"}">'
                f"{'n/a' if value is None else _num(value, 2)}</text>"
            )
    return _svg("heatmap", width, height, title, parts)


_MAX_LABEL = 24


def _short(label: str, most: int = _MAX_LABEL) -> str:
    """A judge's name as an axis label, cut to fit."""
    return label if len(label) <= most else label[: most - 1] + "…"


def _label_width(labels: Sequence[str]) -> int:
    """Room left of a plot for its longest (shortened) label, at ~6.5 px a character."""
    longest = max((len(_short(label)) for label in labels), default=0)
    return max(60, min(int(longest * 6.5) + 14, 180))


def _ticks(scale: float) -> list[float]:
    """Symmetric tick values for an axis running from -scale to +scale."""
    step = scale / 2
    return [-scale, -step, 0.0, step, scale]


def drift_svg(
    drifts: Sequence[tuple[str, float | None]],
    threshold: float | None,
    title: str = "judge drift",
) -> Markup:
    """Horizontal bars of each judge's drift (mean score change against the baseline) around
    zero, each bar's value written at its end, an x axis with tick values, and the allowed
    drift as dashed lines. A judge without a drift reads n/a."""
    values = [abs(d) for _, d in drifts if d is not None and not math.isnan(d)]
    scale = max([*values, threshold or 0.0, 0.05])
    row, half, top = 24, 150, 26
    left = _label_width([judge_id for judge_id, _ in drifts])
    axis_y = top + row * len(drifts) + 4
    width, height = left + 2 * half + 100, axis_y + 36
    mid = left + half
    parts = [
        f'<text x="4" y="14" class="svg-title" {_TITLE}>{escape(title)}</text>',
        f'<line x1="{mid}" y1="{top - 4}" x2="{mid}" y2="{axis_y}" {_AXIS}/>',
        f'<line x1="{left}" y1="{axis_y}" x2="{left + 2 * half}" y2="{axis_y}" {_AXIS}/>',
    ]
    for tick in _ticks(scale):
        x = mid + half * tick / scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 4}" {_AXIS}/>'
            f'<text x="{x:.1f}" y="{axis_y + 15}" text-anchor="middle" class="tick" {_TICK}>'
            f"{tick:+.2f}</text>"
        )
    parts.append(
        f'<text x="{mid}" y="{axis_y + 30}" text-anchor="middle" class="axis-label" {_TICK}>'
        "drift: mean score change vs the baseline (positive = harsher)</text>"
    )
    if threshold is not None:
        for sign in (-1, 1):
            x = mid + sign * half * threshold / scale
            parts.append(
                f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" '
                'stroke="#c0392b" stroke-dasharray="4 3" class="threshold"/>'
            )
        parts.append(
            f'<text x="{mid + half * threshold / scale + 3:.1f}" y="{top - 6}" class="tick" '
            f'{_FONT} font-size="10" fill="#c0392b">allowed ±{threshold:.2f}</text>'
        )
    for index, (judge_id, drift) in enumerate(drifts):
        y = top + index * row
        parts.append(
            f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="tick" {_TICK}>'
            f"{escape(_short(judge_id))}<title>{escape(judge_id)}</title></text>"
        )
        if drift is None or math.isnan(drift):
            parts.append(
                f'<text x="{left + 2 * half + 8}" y="{y + 12}" class="value" {_TICK}>n/a</text>'
            )
            continue
        length = half * abs(drift) / scale
        x = mid if drift >= 0 else mid - length
        over = threshold is not None and abs(drift) > threshold
        # Okabe–Ito vermillion / blue: apart for colour-blind readers too
        colour = "#d55e00" if over else "#0072b2"
        weight = ' font-weight="600"' if over else ""
        # The value in a column of its own right of the plot: never over a bar or a name.
        parts.append(
            f'<rect x="{x:.1f}" y="{y}" width="{max(length, 1):.1f}" height="{row - 8}" '
            f'fill="{colour}"><title>{escape(judge_id)}: {drift:+.3f}</title></rect>'
            f'<text x="{left + 2 * half + 8}" y="{y + 12}" class="value" '
            f"{_TICK}{weight}>{drift:+.3f}{' over' if over else ''}</text>"
        )
    return _svg("drift", width, height, title, parts)
