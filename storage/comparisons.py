"""Regression comparisons in the store: a run against its baseline, and what the two hold.

Bound parameters only. NaN statistics (nothing to pair, agreement undefined) are stored as
NULL, so that SQL aggregates and JSON exports never meet a NaN.
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from juryflow.maths.regression_stats import Comparison, Thresholds, compare
from juryflow.storage.store import Store


def _num(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


@dataclass(frozen=True, slots=True)
class RunScores:
    """What a comparison reads from one run: consensus scores, verdicts and judges' scores."""

    consensus: dict[str, float | None]
    verdicts: dict[str, bool | None]
    judges: dict[str, dict[str, float | None]]


def load_run_scores(store: Store, run_id: str) -> RunScores:
    with store.read() as con:
        consensus_rows = con.execute(
            "SELECT item_id, score_median, hallucinated FROM consensus WHERE run_id = ?",
            [run_id],
        ).fetchall()
        judgment_rows = con.execute(
            "SELECT judge_id, item_id, score FROM judgments WHERE run_id = ?", [run_id]
        ).fetchall()
    judges: dict[str, dict[str, float | None]] = {}
    for judge_id, item_id, score in judgment_rows:
        judges.setdefault(str(judge_id), {})[str(item_id)] = score
    return RunScores(
        consensus={str(i): s for i, s, _ in consensus_rows},
        verdicts={str(i): h for i, _, h in consensus_rows},
        judges=judges,
    )


def compare_stored(store: Store, baseline_run_id: str, run_id: str) -> Comparison:
    """``run_id`` compared item by item with ``baseline_run_id`` (nothing is stored)."""
    before, after = load_run_scores(store, baseline_run_id), load_run_scores(store, run_id)
    return compare(
        before.consensus,
        after.consensus,
        before.verdicts,
        after.verdicts,
        before.judges,
        after.judges,
    )


def judged_item_count(store: Store, run_id: str) -> int:
    """The items ``run_id`` judged (scored or not): what a comparison's pairs are out of."""
    with store.read() as con:
        row = con.execute("SELECT count(*) FROM items WHERE run_id = ?", [run_id]).fetchone()
    return int(row[0]) if row else 0


def last_good_run(store: Store, suite: str, exclude_run_id: str | None = None) -> str | None:
    """The newest completed run of ``suite`` that no comparison found regressed.

    A regressed run never silently becomes the next baseline: the next regression run is
    compared with the last run that passed (or had nothing to be compared with).
    """
    with store.read() as con:
        row = con.execute(
            "SELECT r.run_id FROM runs r WHERE r.suite = ? AND r.status = 'completed' "
            "AND r.run_id IS DISTINCT FROM ? "
            "AND NOT EXISTS (SELECT 1 FROM comparisons c "
            "                WHERE c.run_id = r.run_id AND c.regressed) "
            "ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1",
            [suite, exclude_run_id],
        ).fetchone()
    return str(row[0]) if row else None


def save_comparison(
    store: Store,
    run_id: str,
    baseline_run_id: str,
    comparison: Comparison,
    thresholds: Thresholds,
    problems: list[str],
    message: str,
) -> str:
    """Store the comparison and each judge's drift in one transaction; returns its id."""
    comparison_id = f"{run_id}~{baseline_run_id}~{secrets.token_hex(3)}"
    s = comparison.score
    with store.write() as con:
        con.execute(
            "INSERT INTO comparisons (comparison_id, run_id, baseline_run_id, created_at, "
            "n_paired, mean_delta, median_delta, ci_low, ci_high, wilcoxon_statistic, p_value, "
            "flips_to_hallucinated, flips_to_clean, agreement_before, agreement_after, "
            "regressed, message, thresholds, flipped_items) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                comparison_id,
                run_id,
                baseline_run_id,
                datetime.now(UTC),
                s.n_paired,
                _num(s.mean_delta),
                _num(s.median_delta),
                _num(s.ci_low),
                _num(s.ci_high),
                _num(s.statistic),
                _num(s.p_value),
                comparison.flips_to_hallucinated,
                comparison.flips_to_clean,
                _num(comparison.agreement_before),
                _num(comparison.agreement_after),
                bool(problems),
                message,
                json.dumps(thresholds.as_dict()),
                json.dumps(comparison.flipped_items),
            ],
        )
        if comparison.judges:
            con.executemany(
                "INSERT INTO comparison_judges (comparison_id, judge_id, drift, n_paired) "
                "VALUES (?, ?, ?, ?)",
                [[comparison_id, j.judge_id, _num(j.drift), j.n_paired] for j in comparison.judges],
            )
    return comparison_id


def latest_comparison(store: Store, run_id: str) -> dict[str, Any] | None:
    """The newest comparison of ``run_id`` as a JSON-serialisable dict, with ``judges``."""
    with store.read() as con:
        exists = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'comparisons'"
        ).fetchone()
        if not exists or not exists[0]:
            return None
        newest = con.execute(
            "SELECT comparison_id FROM comparisons WHERE run_id = ? "
            "ORDER BY created_at DESC LIMIT 1",
            [run_id],
        ).fetchone()
        record = None if newest is None else comparison_record(con, str(newest[0]))
    if record is not None:
        record["created_at"] = record["created_at"].isoformat()
    return record


def comparison_record(con: duckdb.DuckDBPyConnection, comparison_id: str) -> dict[str, Any] | None:
    """The stored comparison ``comparison_id`` (its columns, JSON ones decoded, and
    ``judges``: each judge's drift), or None."""
    cursor = con.execute("SELECT * FROM comparisons WHERE comparison_id = ?", [comparison_id])
    columns = [d[0] for d in cursor.description or ()]
    row = cursor.fetchone()
    if row is None:
        return None
    record = dict(zip(columns, row, strict=True))
    judges = con.execute(
        "SELECT judge_id, drift, n_paired FROM comparison_judges "
        "WHERE comparison_id = ? ORDER BY judge_id",
        [comparison_id],
    ).fetchall()
    for key in ("thresholds", "flipped_items"):
        if isinstance(record[key], str):
            record[key] = json.loads(record[key])
    record["judges"] = [{"judge_id": j, "drift": d, "n_paired": n} for j, d, n in judges]
    return record
