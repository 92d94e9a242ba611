"""The end-of-run figures beyond the store's counts: time, speed, retries, unscored reasons,
and what the run spent on model calls as against what it reused from the cache."""

from __future__ import annotations

from typing import Any

from storage.store import Store

TOP_REASONS = 2


def run_figures(
    store: Store, run_id: str, seconds: float, judged_before: int = 0
) -> dict[str, Any]:
    """Figures for the summary; ``judged_before`` judgments were stored before this invocation
    (a ``--resume``) and count in neither its speed nor its time."""
    _, totals = store.query(
        "SELECT count(*), "
        "coalesce(sum(attempts - 1) FILTER (WHERE NOT cached AND attempts > 1), 0), "
        "coalesce(sum(input_tokens) FILTER (WHERE NOT cached), 0), "
        "coalesce(sum(output_tokens) FILTER (WHERE NOT cached), 0) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    judgments, retries, tokens_in, tokens_out = totals[0]
    judged_now = max(int(judgments) - judged_before, 0)
    return {
        "duration_seconds": seconds,
        "judgments_per_second": judged_now / seconds if seconds > 0 else None,
        **cost_split(store, run_id),
        "retries": int(retries),
        "input_tokens_spent": int(tokens_in),
        "output_tokens_spent": int(tokens_out),
        "unscored_by_judge": unscored_by_judge(store, run_id),
    }


def cost_split(store: Store, run_id: str) -> dict[str, float]:
    """``cost_spent_usd``: the run's model calls; ``cost_reused_usd``: what the judgments it
    took from the cache (or copied, for ``reaggregate``) cost when they were first made."""
    _, rows = store.query(
        "SELECT coalesce(sum(cost_usd) FILTER (WHERE NOT cached), 0), "
        "coalesce(sum(cost_usd) FILTER (WHERE cached), 0) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    spent, reused = rows[0]
    return {"cost_spent_usd": float(spent), "cost_reused_usd": float(reused)}


def unscored_by_judge(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Per judge with unscored judgments: how many, and its most frequent reasons."""
    _, rows = store.query(
        "SELECT judge_id, unscored_reason, count(*) AS n, "
        "sum(count(*)) OVER (PARTITION BY judge_id) AS total, "
        "row_number() OVER (PARTITION BY judge_id ORDER BY count(*) DESC, unscored_reason) "
        "AS rank "
        "FROM judgments WHERE run_id = ? AND score IS NULL "
        "GROUP BY judge_id, unscored_reason QUALIFY rank <= ? ORDER BY judge_id, rank",
        [run_id, TOP_REASONS],
    )
    judges: dict[str, dict[str, Any]] = {}
    for judge_id, reason, n, total, _rank in rows:
        entry = judges.setdefault(
            str(judge_id), {"judge_id": str(judge_id), "unscored": int(total), "reasons": []}
        )
        entry["reasons"].append({"reason": str(reason or ""), "count": int(n)})
    return list(judges.values())
