"""The reads behind `juryflow view`'s runs and comparison pages that no other module makes.

Bound parameters only: run and comparison ids from a URL never become SQL text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from juryflow.storage.comparisons import comparison_record
from juryflow.storage.store import Store


@dataclass(frozen=True, slots=True)
class RunPanel:
    """What `juryflow runs` does not list about a run: its panel size and consensus rule."""

    n_judges: int
    quorum: int
    consensus: dict[str, Any] | None


def run_panels(store: Store) -> dict[str, RunPanel]:
    """Every run's panel size, quorum and consensus rule (``runs.consensus``), by run id."""
    _, rows = store.query("SELECT run_id, n_judges, quorum, consensus FROM runs")
    return {
        str(run_id): RunPanel(int(n), int(quorum), _json(rule)) for run_id, n, quorum, rule in rows
    }


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    comparison_id: str
    run_id: str
    baseline_run_id: str
    created_at: datetime
    regressed: bool
    n_paired: int
    flips_to_hallucinated: int
    flips_to_clean: int
    message: str


_COMPARISON_LIST = (
    "SELECT comparison_id, run_id, baseline_run_id, created_at, regressed, n_paired, "
    "flips_to_hallucinated, flips_to_clean, message FROM comparisons "
    "WHERE ($run IS NULL OR run_id = $run OR baseline_run_id = $run) "
    "ORDER BY created_at DESC, comparison_id DESC LIMIT $limit"
)


def list_comparisons(
    store: Store, run_id: str | None = None, limit: int = 1000
) -> list[ComparisonRow]:
    """The stored regression comparisons, newest first (those involving ``run_id`` only,
    as the run or as its baseline, when given)."""
    with store.read() as con:
        rows = con.execute(_COMPARISON_LIST, {"run": run_id, "limit": limit}).fetchall()
    return [
        ComparisonRow(
            str(cid),
            str(run),
            str(base),
            created,
            bool(regressed),
            int(n),
            int(to_h),
            int(to_c),
            str(message),
        )
        for cid, run, base, created, regressed, n, to_h, to_c, message in rows
    ]


def comparison(store: Store, comparison_id: str) -> dict[str, Any] | None:
    """One stored comparison, as :func:`juryflow.storage.comparisons.latest_comparison`
    gives a run's newest (``created_at`` left a datetime), or None."""
    with store.read() as con:
        return comparison_record(con, comparison_id)


def _json(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


def head_to_head_run(store: Store, pairs_file: str) -> str | None:
    """The newest completed run that judged the pairs file ``pairs_file`` (a head-to-head
    regression's pairwise run; its dataset is that file), or None."""
    with store.read() as con:
        row = con.execute(
            "SELECT run_id FROM runs WHERE status = 'completed' AND kind = 'evaluate' "
            "AND (dataset = ? OR ends_with(dataset, ?)) ORDER BY started_at DESC LIMIT 1",
            [pairs_file, "/" + pairs_file],
        ).fetchone()
    return None if row is None else str(row[0])
