"""Records of the store's run, calibration and reliability rows, and new run ids."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def new_run_id() -> str:
    """Sortable by start time and readable: ``20261122-161530-3fa9c2``."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    kind: str
    suite: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    dataset: str | None
    panel_name: str
    panel: dict[str, Any]
    prompts: list[dict[str, Any]]
    quorum: int
    n_judges: int
    parent_run_id: str | None = None
    parameters: dict[str, Any] | None = None
    flow_run_id: str | None = None
    error: str | None = None
    consensus: dict[str, Any] | None = None
    """The consensus rule (``ConsensusRule.to_dict()``) the run's consensus was made with."""
    dataset_fingerprint: str | None = None
    """Size and SHA-256 of the dataset file the run read; None for runs started before."""


_RUN_FIELDS = (
    "run_id", "kind", "suite", "status", "started_at", "finished_at", "dataset", "panel_name",
    "panel", "prompts", "quorum", "n_judges", "parent_run_id", "parameters", "flow_run_id",
    "error", "consensus", "dataset_fingerprint",
)  # fmt: skip


_RUN_COLUMNS = ", ".join(_RUN_FIELDS)


_RUN_JSON = frozenset({"panel", "prompts", "parameters", "consensus"})


@dataclass(frozen=True, slots=True)
class CalibrationRecord:
    name: str
    created_at: datetime
    run_id: str
    rule: dict[str, Any]
    folds: int
    group_column: str | None
    seed: int
    report: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReliabilityRow:
    """One judge's estimated reliability in a run (``judge_reliability``)."""

    judge_id: str
    level: str
    method: str
    sensitivity: float | None
    specificity: float | None
    prevalence: float | None
    n_units: int
    effective_panel_size: float | None = None
    note: str | None = None


def _reliability_values(r: ReliabilityRow) -> tuple[Any, ...]:
    return (
        r.judge_id, r.level, r.method, r.sensitivity, r.specificity, r.prevalence, r.n_units,
        r.effective_panel_size, r.note,
    )  # fmt: skip


def _run_from_row(names: Sequence[str], row: Sequence[Any]) -> RunRecord:
    """A run row by column name: a store not yet migrated lacks the newest columns."""
    values = {
        name: json.loads(value) if name in _RUN_JSON and isinstance(value, str) else value
        for name, value in zip(names, row, strict=True)
        if name in _RUN_FIELDS
    }
    return RunRecord(**values)
