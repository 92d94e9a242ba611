"""Whether a finished run is fit to use: judges stopped, items that missed the quorum.

A run with a stopped judge or with most items short of the quorum is stored as completed
(its scored rows are good and reused from the cache by the next run), but it must not look
like a success: the command line exits 1 on what :func:`health` reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from juryflow.judges.breaker import StoppedJudge
from juryflow.storage.reads.run_queries import quorum_miss_reasons
from juryflow.storage.store import Store

QUORUM_MISS_SHARE = 0.5
"""More than this share of items without a consensus makes the run a failure."""

_TOP_REASONS = 3


def health(
    store: Store, run_id: str, summary: dict[str, Any], stopped: Iterable[StoppedJudge]
) -> dict[str, Any]:
    """Summary keys for the run's end: ``stopped_judges`` and ``quorum_missed`` (or None)."""
    items = int(summary.get("items") or 0)
    missed = int(summary.get("insufficient") or 0)
    quorum_missed: dict[str, Any] | None = None
    if items and missed > items * QUORUM_MISS_SHARE:
        reasons = quorum_miss_reasons(store, run_id, _TOP_REASONS)
        quorum_missed = {
            "items": missed,
            "of": items,
            "reasons": reasons,
            "line": _quorum_line(missed, items, reasons),
        }
    return {
        "stopped_judges": [s.as_dict() for s in sorted(stopped, key=lambda s: s.judge_id)],
        "quorum_missed": quorum_missed,
    }


def _quorum_line(missed: int, items: int, reasons: list[dict[str, Any]]) -> str:
    why = "; ".join(f"judge {r['judge_id']!r}: {r['reason']} ({r['count']})" for r in reasons)
    return (
        f"{missed} of {items} items ({missed / items:.0%}) missed the quorum: too few judges "
        f"answered them. Top reasons: {why or 'none recorded'}"
    )


def failure_lines(summary: dict[str, Any]) -> list[str]:
    """One line per stopped judge and one for a quorum miss; empty for a healthy run."""
    lines = [str(s["line"]) for s in summary.get("stopped_judges") or ()]
    missed = summary.get("quorum_missed")
    if missed:
        lines.append(str(missed["line"]))
    return lines
