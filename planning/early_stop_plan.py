"""Which judges a run with ``early_stop`` calls first, and on which items it calls them all.

The maths (whether an item is decided) is :mod:`juryflow.maths.early_stop`; this module
turns a panel into the order and the shapes that maths needs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from juryflow.judges.llm_judge import CacheKeys
from juryflow.judges.panel import JudgeSpec, PanelSpec
from juryflow.judges.pricing import price_for
from juryflow.maths.early_stop import (
    JudgeShape,
    first_round_size,
    in_audit,
    is_decided,
    ordered,
    refusal,
)
from juryflow.maths.records import VERDICT_THRESHOLD, Judgment
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
    panel_ids: tuple[str, ...]
    quorum: int | None
    rule: ConsensusRule

    def in_audit(self, item_id: str) -> bool:
        """Every judge judges this item (the random sample agreement is measured on)."""
        return in_audit(item_id, self.audit_fraction, self.seed)

    def in_panel_order(self, judgments: Iterable[Judgment]) -> list[Judgment]:
        """One order whatever order the judges were called in: a mean summed in another
        order can differ in its last bit, and an early-stopped run must match a full one."""
        at = {judge_id: n for n, judge_id in enumerate(self.panel_ids)}
        return sorted(judgments, key=lambda j: at.get(j.judge_id, len(at)))

    def open_judges(
        self, item_id: str, text: str, known: Sequence[Judgment], left_out: Collection[str] = ()
    ) -> list[str]:
        """The judges not heard on the item (``left_out``: skipped by an earlier invocation),
        in calling order, when one of them could still change its result; else [] (decided).
        An audit item is never decided before every judge has answered."""
        heard = {j.judge_id for j in known} | set(left_out)
        missing = [spec.id for spec in self.order if spec.id not in heard]
        if not missing or self.in_audit(item_id):
            return missing
        decided = is_decided(
            item_id,
            self.in_panel_order(known),
            [self.shapes[judge_id] for judge_id in missing],
            n_judges=len(self.panel_ids),
            text=text,
            quorum=self.quorum,
            rule=self.rule,
        )
        return [] if decided else missing


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
        panel_ids=tuple(spec.id for spec in panel.judges),
        quorum=quorum,
        rule=rule,
    )
    return plan, None
