"""Which judges a run with ``early_stop`` calls first, and on which items it calls them all.

The maths (whether an item is decided) is :mod:`juryflow.maths.early_stop`; this module
turns a panel into the order and the shapes that maths needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from juryflow.judges.llm_judge import CacheKeys
from juryflow.judges.panel import JudgeSpec, PanelSpec
from juryflow.judges.pricing import price_for
from juryflow.maths.early_stop import JudgeShape, first_round_size, in_audit, ordered, refusal
from juryflow.maths.records import VERDICT_THRESHOLD
from juryflow.maths.reducers import ConsensusRule

_TYPICAL_OUTPUT_SHARE = 0.1
"""Orders judges by price: a call's output is a few hundred tokens against a few thousand of
prompt, so an output token weighs a tenth of its share of the call."""


@dataclass(frozen=True, slots=True)
class EarlyStopPlan:
    order: tuple[JudgeSpec, ...]
    """The judges in the order they are called."""
    first: int
    """How many of them every item gets in the first round."""
    shapes: dict[str, JudgeShape]
    audit_fraction: float
    seed: int

    def in_audit(self, item_id: str) -> bool:
        """Every judge judges this item (the random sample agreement is measured on)."""
        return in_audit(item_id, self.audit_fraction, self.seed)


def _shape(spec: JudgeSpec) -> JudgeShape:
    keys = CacheKeys.of(spec)
    if keys is None:  # an offline detector: flags spans, scores 1.0 when it flags any
        return JudgeShape(spec.id, "spans", VERDICT_THRESHOLD)
    return JudgeShape(spec.id, keys.template.output_kind, keys.verdict_threshold)


def _price_per_call(spec: JudgeSpec, panel: PanelSpec) -> float:
    if spec.provider == "offline":
        return 0.0
    price = price_for(spec.model or "", panel.prices)
    if price is None:
        return float("inf")  # unknown: called last, as if the dearest
    return price.input + _TYPICAL_OUTPUT_SHARE * price.output


def early_stop_plan(
    panel: PanelSpec, rule: ConsensusRule, quorum: int | None, seed: int
) -> tuple[EarlyStopPlan | None, str | None]:
    """The plan, or None with the reason every judge is called (None, None: not asked for)."""
    if not panel.early_stop:
        return None, None
    why = refusal(rule)
    if why is not None:
        return None, f"early_stop is off for this run: {why}; every judge is called"
    if len(panel.judges) < 2:
        return None, None
    specs = {spec.id: spec for spec in panel.judges}
    if panel.judge_order == "panel":
        order = [spec.id for spec in panel.judges]
    else:
        costs = {spec.id: _price_per_call(spec, panel) for spec in panel.judges}
        order = ordered(specs, costs)
    plan = EarlyStopPlan(
        order=tuple(specs[judge_id] for judge_id in order),
        first=min(first_round_size(len(panel.judges), quorum), len(panel.judges)),
        shapes={spec.id: _shape(spec) for spec in panel.judges},
        audit_fraction=panel.audit_fraction,
        seed=seed,
    )
    return plan, None
