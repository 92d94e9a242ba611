"""The order an early-stopping panel calls its judges in: cheapest first by the price table
(offline detectors cost nothing, an unknown price counts as the dearest), or the panel file's
own order. One place, so that a run and ``juryflow calibrate`` (which replays it) agree."""

from __future__ import annotations

from juryflow.judges.panel import UNCALLED_PROVIDERS, JudgeSpec, PanelSpec
from juryflow.judges.pricing import price_for
from juryflow.maths.early_stop import ordered

_TYPICAL_OUTPUT_SHARE = 0.1
"""Orders judges by price: a call's output is a few hundred tokens against a few thousand of
prompt, so an output token weighs a tenth of its share of the call."""


def price_per_call(spec: JudgeSpec, panel: PanelSpec) -> float:
    if spec.provider in UNCALLED_PROVIDERS:
        return 0.0  # a detector, or a recorded judge: no call to pay for
    price = price_for(spec.model or "", panel.prices)
    if price is None:
        return float("inf")  # unknown: called last, as if the dearest
    return price.input + _TYPICAL_OUTPUT_SHARE * price.output


def calling_order(panel: PanelSpec) -> list[str]:
    """The judge ids in the order an early-stopping run calls them."""
    if panel.judge_order == "panel":
        return [spec.id for spec in panel.judges]
    costs = {spec.id: price_per_call(spec, panel) for spec in panel.judges}
    return ordered([spec.id for spec in panel.judges], costs)
