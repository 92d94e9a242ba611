"""Rows as Arrow tables and back: what one insert of judgments or consensus writes, judgments
read from a cursor with their spans, and the one bulk append every write goes through."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from juryflow.maths.records import Consensus, Judgment, Span, Usage


def _append(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: pa.Table,
    select: str = "SELECT * FROM incoming_rows",
    parameters: Sequence[Any] = (),
) -> None:
    """Bulk-append an Arrow table; ``table`` and ``select`` (a query of ``incoming_rows``)
    are this module's constants."""
    con.register("incoming_rows", rows)
    try:
        # BY NAME: columns added by later migrations sit at the end of the table, wherever
        # the Arrow table has them; columns it leaves out take their defaults.
        con.execute(f"INSERT INTO {table} BY NAME {select}", list(parameters))
    finally:
        con.unregister("incoming_rows")


_JUDGMENT_FIELDS = [
    "run_id",
    "item_id",
    "judge_id",
    "provider",
    "model",
    "prompt_name",
    "prompt_hash",
    "output_kind",
    "score",
    "verdict",
    "unscored_reason",
    "reasoning",
    "raw_output",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "attempts",
    "cache_key",
    "cached",
    "created_at",
    "verdict_threshold",
    "cache_write_tokens",
    "cache_read_tokens",
    "batch_id",
]


@dataclass(frozen=True, slots=True)
class _JudgmentRow:
    run_id: str
    item_id: str
    judge_id: str
    provider: str
    model: str | None
    prompt_name: str | None
    prompt_hash: str | None
    output_kind: Any
    score: float | None
    verdict: bool | None
    unscored_reason: str | None
    reasoning: str | None
    raw_output: str | None
    latency_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    attempts: int
    cache_key: str | None
    cached: bool
    created_at: Any
    verdict_threshold: float | None
    cache_write_tokens: int | None
    cache_read_tokens: int | None
    batch_id: str | None

    def to_judgment(self, spans: tuple[Span, ...]) -> Judgment:
        return Judgment(
            item_id=self.item_id,
            judge_id=self.judge_id,
            output_kind=self.output_kind,
            score=self.score,
            spans=spans,
            reasoning=self.reasoning,
            raw_output=self.raw_output,
            unscored_reason=self.unscored_reason,
            latency_ms=self.latency_ms or 0.0,
            prompt_name=self.prompt_name,
            prompt_hash=self.prompt_hash,
            provider=self.provider,
            model=self.model,
            usage=Usage(
                self.input_tokens,
                self.output_tokens,
                self.cost_usd,
                self.cache_write_tokens,
                self.cache_read_tokens,
            ),
            attempts=self.attempts,
            cache_key=self.cache_key,
            cached=self.cached,
            verdict_threshold=(
                self.verdict_threshold if self.verdict_threshold is not None else 0.5
            ),
            batch_id=self.batch_id,
        )


def _judgments_from_cursor(cursor: duckdb.DuckDBPyConnection) -> list[_JudgmentRow]:
    names = [d[0] for d in cursor.description or ()]
    order = [names.index(f) for f in _JUDGMENT_FIELDS]
    return [_JudgmentRow(*(row[i] for i in order)) for row in cursor.fetchall()]


def _spans_for(
    con: duckdb.DuckDBPyConnection, keys: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], tuple[Span, ...]]:
    wanted = list(set(keys))
    if not wanted:
        return {}
    table = pa.table(
        {
            "run_id": [k[0] for k in wanted],
            "item_id": [k[1] for k in wanted],
            "judge_id": [k[2] for k in wanted],
        }
    )
    con.register("wanted_spans", table)
    rows = con.execute(
        "SELECT s.run_id, s.item_id, s.judge_id, s.char_start, s.char_end, s.text, "
        "s.match_kind, s.requested, s.similarity FROM judgment_spans s "
        "JOIN wanted_spans w USING (run_id, item_id, judge_id) "
        "ORDER BY s.run_id, s.item_id, s.judge_id, s.span_index"
    ).fetchall()
    con.unregister("wanted_spans")
    spans: dict[tuple[str, str, str], list[Span]] = {}
    for run_id, item_id, judge_id, start, end, text, match, requested, similarity in rows:
        spans.setdefault((run_id, item_id, judge_id), []).append(
            Span(start, end, text, match, requested or "", similarity)
        )
    return {k: tuple(v) for k, v in spans.items()}


def judgment_tables(run_id: str, judgments: Sequence[Judgment]) -> tuple[pa.Table, pa.Table]:
    """The Arrow tables one insert of ``judgments`` (and their spans) writes."""
    n = len(judgments)
    judgment_table = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "item_id": pa.array([j.item_id for j in judgments], pa.string()),
            "judge_id": pa.array([j.judge_id for j in judgments], pa.string()),
            "provider": pa.array([j.provider for j in judgments], pa.string()),
            "model": pa.array([j.model for j in judgments], pa.string()),
            "prompt_name": pa.array([j.prompt_name for j in judgments], pa.string()),
            "prompt_hash": pa.array([j.prompt_hash for j in judgments], pa.string()),
            "output_kind": pa.array([j.output_kind for j in judgments], pa.string()),
            "score": pa.array([j.score for j in judgments], pa.float64()),
            "verdict": pa.array([j.verdict for j in judgments], pa.bool_()),
            "unscored_reason": pa.array([j.unscored_reason for j in judgments], pa.string()),
            "reasoning": pa.array([j.reasoning for j in judgments], pa.string()),
            "raw_output": pa.array([j.raw_output for j in judgments], pa.string()),
            "latency_ms": pa.array([j.latency_ms for j in judgments], pa.float64()),
            "input_tokens": pa.array([j.usage.input_tokens for j in judgments], pa.int64()),
            "output_tokens": pa.array([j.usage.output_tokens for j in judgments], pa.int64()),
            "cost_usd": pa.array([j.usage.cost_usd for j in judgments], pa.float64()),
            "attempts": pa.array([j.attempts for j in judgments], pa.int32()),
            "cache_key": pa.array([j.cache_key for j in judgments], pa.string()),
            "cached": pa.array([j.cached for j in judgments], pa.bool_()),
            "verdict_threshold": pa.array([j.verdict_threshold for j in judgments], pa.float64()),
            "cache_write_tokens": pa.array(
                [j.usage.cache_write_tokens for j in judgments], pa.int64()
            ),
            "cache_read_tokens": pa.array(
                [j.usage.cache_read_tokens for j in judgments], pa.int64()
            ),
            "batch_id": pa.array([j.batch_id for j in judgments], pa.string()),
        }
    )
    span_rows = [
        (j.item_id, j.judge_id, index, s) for j in judgments for index, s in enumerate(j.spans)
    ]
    span_table = pa.table(
        {
            "run_id": pa.array([run_id] * len(span_rows), pa.string()),
            "item_id": pa.array([r[0] for r in span_rows], pa.string()),
            "judge_id": pa.array([r[1] for r in span_rows], pa.string()),
            "span_index": pa.array([r[2] for r in span_rows], pa.int32()),
            "char_start": pa.array([r[3].char_start for r in span_rows], pa.int32()),
            "char_end": pa.array([r[3].char_end for r in span_rows], pa.int32()),
            "text": pa.array([r[3].text for r in span_rows], pa.string()),
            "match_kind": pa.array([r[3].match for r in span_rows], pa.string()),
            "requested": pa.array([r[3].requested for r in span_rows], pa.string()),
            "similarity": pa.array([r[3].similarity for r in span_rows], pa.float64()),
        }
    )
    return judgment_table, span_table


def consensus_tables(run_id: str, results: Sequence[Consensus]) -> tuple[pa.Table, pa.Table]:
    n = len(results)
    consensus_table = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "item_id": pa.array([c.item_id for c in results], pa.string()),
            "status": pa.array([c.status for c in results], pa.string()),
            "n_judges": pa.array([c.n_judges for c in results], pa.int32()),
            "n_answered": pa.array([c.n_answered for c in results], pa.int32()),
            "n_scored": pa.array([c.n_scored for c in results], pa.int32()),
            "n_span_judges": pa.array([c.n_span_judges for c in results], pa.int32()),
            "score_median": pa.array([c.score_median for c in results], pa.float64()),
            "score_min": pa.array([c.score_min for c in results], pa.float64()),
            "score_max": pa.array([c.score_max for c in results], pa.float64()),
            "score_spread": pa.array([c.score_spread for c in results], pa.float64()),
            "hallucinated": pa.array([c.hallucinated for c in results], pa.bool_()),
            "chars_any": pa.array([c.chars_any for c in results], pa.int32()),
            "chars_all": pa.array([c.chars_all for c in results], pa.int32()),
            "score": pa.array([c.score for c in results], pa.float64()),
            "verdict_rule": pa.array([c.verdict_rule for c in results], pa.string()),
            "unlocalised": pa.array([c.unlocalised for c in results], pa.bool_()),
        }
    )
    span_rows = [(c.item_id, i, s) for c in results for i, s in enumerate(c.spans)]
    span_table = pa.table(
        {
            "run_id": pa.array([run_id] * len(span_rows), pa.string()),
            "item_id": pa.array([r[0] for r in span_rows], pa.string()),
            "span_index": pa.array([r[1] for r in span_rows], pa.int32()),
            "char_start": pa.array([r[2].char_start for r in span_rows], pa.int32()),
            "char_end": pa.array([r[2].char_end for r in span_rows], pa.int32()),
            "text": pa.array([r[2].text for r in span_rows], pa.string()),
            "votes": pa.array([r[2].votes for r in span_rows], pa.int32()),
            "min_votes": pa.array([r[2].min_votes for r in span_rows], pa.int32()),
        }
    )
    return consensus_table, span_table
