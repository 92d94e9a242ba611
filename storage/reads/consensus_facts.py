"""What the faces need to say which rule made a consensus: the run's stored rule, and per
item the stored verdict with the counts its rule went by (bound parameters only).

Nothing is decided here: the verdict, ``unlocalised`` and the verdict rule are the rows
the run wrote; the counts are of the stored judgments and consensus spans.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb


@dataclass(frozen=True, slots=True)
class ConsensusFacts:
    """One item's stored consensus, with the counts that explain its verdict."""

    hallucinated: bool | None
    verdict_rule: str | None
    """The verdict rule the item was decided by (``auto`` resolved), as stored."""
    unlocalised: bool
    """The judges agreed something is wrong, but no character won the span vote."""
    n_consensus_spans: int
    n_span_judges: int
    """Span judges that answered (an unscored judge has no say)."""
    n_scored: int
    n_said_hallucinated: int
    """Answering judges whose own verdict was hallucinated."""
    score: float | None = None
    """The consensus score (the rule's score reducer)."""


def run_rule(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """The consensus rule stored with the run (``ConsensusRule.to_dict()``), or None."""
    row = con.execute("SELECT consensus FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if row is None or row[0] is None:
        return None
    value = json.loads(row[0]) if isinstance(row[0], str) else row[0]
    return value if isinstance(value, dict) else None


def run_verdict_rules(con: duckdb.DuckDBPyConnection, run_id: str) -> list[str]:
    """The verdict rules the run's items were decided by (one, unless re-aggregated oddly)."""
    return [
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT verdict_rule FROM consensus "
            "WHERE run_id = ? AND verdict_rule IS NOT NULL ORDER BY 1",
            [run_id],
        ).fetchall()
    ]


def consensus_facts(
    con: duckdb.DuckDBPyConnection, run_id: str, item_ids: Sequence[str]
) -> dict[str, ConsensusFacts]:
    """Item id -> its consensus facts, for the items of ``item_ids`` that have a consensus."""
    if not item_ids:
        return {}
    rows = con.execute(
        "WITH wanted AS (SELECT * FROM consensus "
        "WHERE run_id = $run AND item_id IN (SELECT unnest($ids))), "
        "spans AS (SELECT item_id, count(*) AS n FROM consensus_spans "
        "WHERE run_id = $run AND item_id IN (SELECT unnest($ids)) GROUP BY item_id), "
        "said AS (SELECT item_id, count(*) AS n FROM judgments "
        "WHERE run_id = $run AND item_id IN (SELECT unnest($ids)) "
        "AND score IS NOT NULL AND verdict GROUP BY item_id) "
        "SELECT w.item_id, w.hallucinated, w.verdict_rule, coalesce(w.unlocalised, false), "
        "coalesce(s.n, 0), w.n_span_judges, w.n_scored, coalesce(d.n, 0), w.score "
        "FROM wanted w LEFT JOIN spans s USING (item_id) LEFT JOIN said d USING (item_id)",
        {"run": run_id, "ids": list(item_ids)},
    ).fetchall()
    return {
        str(item_id): ConsensusFacts(
            hallucinated=None if hallucinated is None else bool(hallucinated),
            verdict_rule=None if rule is None else str(rule),
            unlocalised=bool(unlocalised),
            n_consensus_spans=int(n_spans),
            n_span_judges=int(n_span_judges),
            n_scored=int(n_scored),
            n_said_hallucinated=int(n_said),
            score=None if score is None else float(score),
        )
        for item_id, hallucinated, rule, unlocalised, n_spans, n_span_judges, n_scored, n_said, score in rows  # noqa: E501
    }
