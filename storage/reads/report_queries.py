"""The reads behind the HTML report and the Prefect artifacts of a run (bound parameters only).

Cost here is what the run paid: judgments reused from the cache (or copied by a
re-aggregation) carry the cost of the run that made the call, and are left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from juryflow.storage.store import Store

_JUDGE_STATS_SQL = """
SELECT j.judge_id, any_value(j.provider) AS provider, any_value(j.model) AS model,
       count(*) AS judgments, count(j.score) AS scored, count(*) - count(j.score) AS unscored,
       avg(j.score) AS mean_score, avg(j.verdict::INTEGER) AS hallucinated_share,
       avg(abs(j.score - c.score_median)) AS mean_abs_diff_from_consensus,
       CASE WHEN count(j.cost_usd) > 0
            THEN coalesce(sum(j.cost_usd) FILTER (WHERE NOT j.cached), 0) END AS cost_usd,
       sum(j.input_tokens) FILTER (WHERE NOT j.cached) AS input_tokens,
       sum(j.output_tokens) FILTER (WHERE NOT j.cached) AS output_tokens,
       sum(j.cache_read_tokens) FILTER (WHERE NOT j.cached) AS cache_read_tokens,
       sum(j.cache_write_tokens) FILTER (WHERE NOT j.cached) AS cache_write_tokens
FROM judgments j LEFT JOIN consensus c USING (run_id, item_id)
WHERE j.run_id = ? GROUP BY j.judge_id ORDER BY j.judge_id
"""


def judge_stats(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Per judge: provider, model, counts, mean score, hallucinated share, mean |score -
    consensus median|, and the cost (None: no price known) and tokens of the calls this run
    made: input (every prompt token), output, and of the input those the provider's prompt
    cache served and those it wrote (None: not reported)."""
    columns, rows = store.query(_JUDGE_STATS_SQL, [run_id])
    return [dict(zip(columns, row, strict=True)) for row in rows]


def raw_scores(store: Store, run_id: str) -> tuple[dict[str, list[float]], list[float]]:
    """Each judge's scores and the consensus medians of a run, for histograms."""
    _, rows = store.query(
        "SELECT judge_id, score FROM judgments WHERE run_id = ? AND score IS NOT NULL",
        [run_id],
    )
    scores: dict[str, list[float]] = {}
    for judge_id, score in rows:
        scores.setdefault(str(judge_id), []).append(float(score))
    _, medians = store.query(
        "SELECT score_median FROM consensus WHERE run_id = ? AND score_median IS NOT NULL",
        [run_id],
    )
    return scores, [float(m) for (m,) in medians]


def item_variables(store: Store, run_id: str, item_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The variables of some items of a run (the reference data the judges were given, and
    the judged text), by item id; an item id the run lacks is absent."""
    if not item_ids:
        return {}
    _, rows = store.query(
        "SELECT item_id, variables FROM items WHERE run_id = ? AND list_contains(?, item_id)",
        [run_id, list(item_ids)],
    )
    out: dict[str, dict[str, Any]] = {}
    for item_id, variables in rows:
        parsed = json.loads(variables) if isinstance(variables, str) else variables
        out[str(item_id)] = parsed if isinstance(parsed, dict) else {"variables": parsed}
    return out
