"""The end-of-run figures beyond the store's counts: time, speed, retries, unscored reasons,
and what the run spent on model calls as against what it reused from the cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from juryflow.storage.reads.run_queries import (
    cache_totals,
    cost_split,
    spent_totals,
    unscored_by_judge,
)
from juryflow.storage.store import Store

TOP_REASONS = 2


def spent_text(figures: Mapping[str, Any]) -> str:
    """What this run's own calls cost, in words, from :func:`cost_split`'s figures: the
    total, or, when some calls have no price, that the cost is unknown and which models to
    price (the priced calls' total beside it). Every face says it this way."""
    spent = f"${figures.get('cost_spent_usd') or 0:.4f}"
    unpriced = int(figures.get("unpriced_calls") or 0)
    if not unpriced:
        return f"{spent} spent in this run"
    models = ", ".join(figures.get("unpriced_models") or []) or "a model"
    calls = "call" if unpriced == 1 else "calls"
    return (
        f"unknown: {unpriced} {calls} to {models} have no price (add the model under prices: "
        f"in the panel); {spent} spent on the priced calls"
    )


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
