"""The end-of-run figures beyond the store's counts: time, speed, retries, unscored reasons,
and what the run spent on model calls as against what it reused from the cache."""

from __future__ import annotations

from typing import Any

from juryflow.storage.reads.run_queries import (
    cache_totals,
    cost_split,
    spent_totals,
    unscored_by_judge,
)
from juryflow.storage.store import Store

TOP_REASONS = 2


def run_figures(
    store: Store, run_id: str, seconds: float, judged_before: int = 0
) -> dict[str, Any]:
    """Figures for the summary; ``judged_before`` judgments were stored before this invocation
    (a ``--resume``) and count in neither its speed nor its time."""
    judgments, retries, tokens_in, tokens_out = spent_totals(store, run_id)
    cache_written, cache_read = cache_totals(store, run_id)
    judged_now = max(judgments - judged_before, 0)
    return {
        "duration_seconds": seconds,
        "judgments_per_second": judged_now / seconds if seconds > 0 else None,
        **cost_split(store, run_id),
        "retries": retries,
        "input_tokens_spent": tokens_in,
        "output_tokens_spent": tokens_out,
        # of input_tokens_spent: written to / served from the provider's prompt cache
        "cache_write_tokens_spent": cache_written,
        "cache_read_tokens_spent": cache_read,
        "unscored_by_judge": unscored_by_judge(store, run_id, TOP_REASONS),
    }
