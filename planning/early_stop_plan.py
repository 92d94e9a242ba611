"""Which judges a run with ``early_stop`` calls first, and on which items it calls them all.

The maths (whether an item is decided) is :mod:`juryflow.maths.early_stop`; this module
turns a panel into the order and the shapes that maths needs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from juryflow.judges.call_order import calling_order
from juryflow.judges.llm_judge import CacheKeys
from juryflow.judges.panel import JudgeSpec, PanelSpec
from juryflow.maths.early_stop import (
    JudgeShape,
    first_round_size,
    in_audit,
    is_decided,
    refusal,
)
from juryflow.maths.lossy_stop import close_enough
from juryflow.maths.records import VERDICT_THRESHOLD, Judgment
from juryflow.maths.reducers import ConsensusRule


def in_panel_order(judgments: Iterable[Judgment], panel_ids: Sequence[str]) -> list[Judgment]:
    """The judgments in the panel file's order of their judges (unknown judges last)."""
    at = {judge_id: n for n, judge_id in enumerate(panel_ids)}
    return sorted(judgments, key=lambda j: at.get(j.judge_id, len(at)))


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
    lossy_agreement: float | None = None
    """Also stop, lossily, an item whose first-round judges agree this closely
    (:mod:`juryflow.maths.lossy_stop`); None: exact stops only."""

    def in_audit(self, item_id: str) -> bool:
        """Every judge judges this item (the random sample agreement is measured on)."""
        return in_audit(item_id, self.audit_fraction, self.seed)

    def in_panel_order(self, judgments: Iterable[Judgment]) -> list[Judgment]:
        """One order whatever order the judges were called in: a mean summed in another
        order can differ in its last bit, and an early-stopped run must match a full one."""
        return in_panel_order(judgments, self.panel_ids)

    def open_judges(
        self, item_id: str, text: str, known: Sequence[Judgment], left_out: Collection[str] = ()
    ) -> list[str]:
        """The judges not heard on the item (``left_out``: skipped by an earlier invocation),
        in calling order, when one of them could still change its result; else [] (closed)."""
        if self.stop_reason(item_id, text, known, left_out) is not None:
            return []
        heard = {j.judge_id for j in known} | set(left_out)
        return [spec.id for spec in self.order if spec.id not in heard]

    def stop_reason(
        self, item_id: str, text: str, known: Sequence[Judgment], left_out: Collection[str] = ()
    ) -> str | None:
        """Why the judges not heard on the item need not be called: ``decided`` (exact) or
        ``lossy`` (the first judges agreed closely; the result may differ from the panel's);
        None while one of them could still change its result. An audit item stays open
        until every judge has answered."""
        heard = {j.judge_id for j in known} | set(left_out)
        missing = [spec.id for spec in self.order if spec.id not in heard]
        if not missing:
            return "decided"
        if self.in_audit(item_id):
            return None
        if self.is_decided(item_id, text, known, missing):
            return "decided"
        return "lossy" if self.lossy_stop(known, heard) else None

    def is_decided(
        self, item_id: str, text: str, known: Sequence[Judgment], missing: Sequence[str]
    ) -> bool:
        """Whether the judges ``missing`` cannot change the item's result (exact)."""
        return is_decided(
            item_id,
            self.in_panel_order(known),
            [self.shapes[judge_id] for judge_id in missing],
            n_judges=len(self.panel_ids),
            text=text,
            quorum=self.quorum,
            rule=self.rule,
        )

    def lossy_stop(self, known: Sequence[Judgment], heard: Collection[str]) -> bool:
        """Whether the lossy mode stops the item: only right after the first round, as
        ``juryflow calibrate`` measures it, and only when its judges agree closely enough."""
        if self.lossy_agreement is None:
            return False
        first = {spec.id for spec in self.order[: self.first]}
        return set(heard) == first and close_enough(list(known), self.lossy_agreement)


def _shape(spec: JudgeSpec) -> JudgeShape:
    keys = CacheKeys.of(spec)
    if keys is None:  # an offline detector: flags spans, scores 1.0 when it flags any
        return JudgeShape(spec.id, "spans", VERDICT_THRESHOLD)
    return JudgeShape(spec.id, keys.template.output_kind, keys.verdict_threshold)


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
    order = calling_order(panel)
    plan = EarlyStopPlan(
        order=tuple(specs[judge_id] for judge_id in order),
        first=min(first_round_size(len(panel.judges), quorum), len(panel.judges)),
        shapes={spec.id: _shape(spec) for spec in panel.judges},
        audit_fraction=panel.audit_fraction,
        seed=seed,
        panel_ids=tuple(spec.id for spec in panel.judges),
        quorum=quorum,
        rule=rule,
        lossy_agreement=panel.lossy_agreement,
    )
    return plan, None
