"""SVG charts shared by the viewer and the static report (no script needed to read them)."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

from juryflow import report as _report
from juryflow.report import HeatCell

__all__ = ["HeatCell", "drift_svg", "heatmap_svg", "histogram_svg"]


def histogram_svg(scores: Sequence[float], colour: str, title: str, bins: int = 10) -> Markup:
    return Markup(_report.histogram_svg(scores, colour, title, bins))


def heatmap_svg(cells: Sequence[Sequence[HeatCell]], labels: Sequence[str], title: str) -> Markup:
    return Markup(_report.heatmap_svg(cells, labels, title))


def drift_svg(drifts: Sequence[tuple[str, float | None]], threshold: float | None) -> Markup:
    return Markup(_report.drift_svg(drifts, threshold))
