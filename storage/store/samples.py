"""A sampled judge's samples (``samples: N > 1``): written with their reduced judgment, and
read back by cache key, so a re-run serves each sample from the cache and adding samples
calls only the new ones (migration 14's tables)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from juryflow.maths.records import Judgment, MatchKind, Span, Usage
from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.rows import _append


def sample_tables(run_id: str, judgments: Sequence[Judgment]) -> tuple[pa.Table, pa.Table]:
    """The Arrow tables of the samples the ``judgments`` carry, and of their spans.

    A span that casts no vote (unmatched, or ambiguous between places) is kept with NULL
    offsets: read back from the cache, a span with offsets votes."""
    rows = [(j, index, s) for j in judgments for index, s in enumerate(j.samples)]
    samples = pa.table(
        {
            "run_id": pa.array([run_id] * len(rows), pa.string()),
            "item_id": pa.array([j.item_id for j, _, _ in rows], pa.string()),
            "judge_id": pa.array([j.judge_id for j, _, _ in rows], pa.string()),
            "sample_index": pa.array([i for _, i, _ in rows], pa.int32()),
            "output_kind": pa.array([s.output_kind for _, _, s in rows], pa.string()),
            "score": pa.array([s.score for _, _, s in rows], pa.float64()),
            "verdict": pa.array([s.verdict for _, _, s in rows], pa.bool_()),
            "unscored_reason": pa.array([s.unscored_reason for _, _, s in rows], pa.string()),
            "raw_output": pa.array([s.raw_output for _, _, s in rows], pa.string()),
            "latency_ms": pa.array([s.latency_ms for _, _, s in rows], pa.float64()),
            "input_tokens": pa.array([s.usage.input_tokens for _, _, s in rows], pa.int64()),
            "output_tokens": pa.array([s.usage.output_tokens for _, _, s in rows], pa.int64()),
            "cost_usd": pa.array([s.usage.cost_usd for _, _, s in rows], pa.float64()),
            "cache_key": pa.array([s.cache_key for _, _, s in rows], pa.string()),
            "cached": pa.array([s.cached for _, _, s in rows], pa.bool_()),
        }
    )
    span_rows = [
        (j, index, n, span, span in s.voting_spans)
        for j, index, s in rows
        for n, span in enumerate(s.spans)
    ]
    spans = pa.table(
        {
            "run_id": pa.array([run_id] * len(span_rows), pa.string()),
            "item_id": pa.array([r[0].item_id for r in span_rows], pa.string()),
            "judge_id": pa.array([r[0].judge_id for r in span_rows], pa.string()),
            "sample_index": pa.array([r[1] for r in span_rows], pa.int32()),
            "span_index": pa.array([r[2] for r in span_rows], pa.int32()),
            "char_start": pa.array(
                [r[3].char_start if r[4] else None for r in span_rows], pa.int32()
            ),
            "char_end": pa.array([r[3].char_end if r[4] else None for r in span_rows], pa.int32()),
            "text": pa.array([r[3].text for r in span_rows], pa.string()),
        }
    )
    return samples, spans


def insert_samples(
    con: duckdb.DuckDBPyConnection, run_id: str, judgments: Sequence[Judgment]
) -> None:
    """Store the samples of the sampled judges among ``judgments`` (none for the others),
    in place of those the run stored before for the same (item, judge): a judgment a batch
    left waiting for a sample, sent again by ``--resume``, comes back with all of them."""
    if any(j.samples for j in judgments):
        pairs = [run_id, [j.item_id for j in judgments], [j.judge_id for j in judgments]]
        # Looked for first: a lake would record an empty delete as a snapshot of its own.
        if con.execute(f"SELECT 1 FROM judgment_samples {_OF_PAIRS} LIMIT 1", pairs).fetchone():
            for table in ("judgment_sample_spans", "judgment_samples"):
                con.execute(f"DELETE FROM {table} {_OF_PAIRS}", pairs)
        samples, spans = sample_tables(run_id, judgments)
        _append(con, "judgment_samples", samples)
        _append(con, "judgment_sample_spans", spans)


_OF_PAIRS = "WHERE run_id = ? AND (item_id, judge_id) IN (SELECT unnest(?), unnest(?))"
_CACHED_SAMPLES = (
    "SELECT run_id, item_id, judge_id, sample_index, output_kind, score, raw_output, "
    "latency_ms, input_tokens, output_tokens, cost_usd, cache_key, cached FROM ("
    "  SELECT *, row_number() OVER (PARTITION BY cache_key ORDER BY created_at DESC) AS rank"
    "  FROM judgment_samples WHERE cache_key IN (SELECT unnest(?)) AND score IS NOT NULL"
    ") WHERE rank = 1"
)
_RUN_SAMPLES = (
    "SELECT run_id, item_id, judge_id, sample_index, output_kind, score, raw_output, "
    "latency_ms, input_tokens, output_tokens, cost_usd, cache_key, cached FROM judgment_samples "
    "WHERE run_id = $run AND score IS NOT NULL "
    "AND item_id NOT IN (SELECT item_id FROM consensus WHERE run_id = $run)"
)
_SAMPLE_SPANS = (
    "SELECT s.run_id, s.item_id, s.judge_id, s.sample_index, s.char_start, s.char_end, s.text "
    "FROM judgment_sample_spans s JOIN (SELECT unnest(?) AS run_id, unnest(?) AS item_id, "
    "unnest(?) AS judge_id, unnest(?) AS sample_index) k "
    "USING (run_id, item_id, judge_id, sample_index) ORDER BY s.span_index"
)


class SamplesMixin(StoreBase):
    def cached_samples(self, cache_keys: Sequence[str]) -> dict[str, Judgment]:
        """Scored answers stored under these cache keys, as samples or as a judge's only
        answer (a sample 0 has the key a judge asked once has); newest wins. Their judge,
        item, prompt and provider are the caller's to set."""
        if not cache_keys:
            return {}
        keys = list(cache_keys)
        with self.read() as con:
            rows = con.execute(_CACHED_SAMPLES, [keys]).fetchall()
            made = _samples_of(con, rows)
        found = {judgment.cache_key or "": judgment for judgment in made.values()}
        missing = [k for k in keys if k not in found]
        found.update(self.cached_judgments(missing))  # type: ignore[attr-defined]
        return found

    def run_samples(self, run_id: str) -> dict[tuple[str, str], dict[int, Judgment]]:
        """The scored samples the run stored for items still without consensus, by (item,
        judge) and sample index: what a judgment left waiting for another sample (and
        forgotten by ``--resume``, to be judged again) had already paid for."""
        with self.read() as con:
            rows = con.execute(_RUN_SAMPLES, {"run": run_id}).fetchall()
            made = _samples_of(con, rows)
        found: dict[tuple[str, str], dict[int, Judgment]] = {}
        for (_, item_id, judge_id, index), judgment in made.items():
            found.setdefault((item_id, judge_id), {})[index] = judgment
        return found


def _samples_of(
    con: duckdb.DuckDBPyConnection, rows: list[Any]
) -> dict[tuple[str, str, str, int], Judgment]:
    """Sample rows (as :data:`_CACHED_SAMPLES` selects them) with their spans, as
    judgments by (run, item, judge, sample index)."""
    owners = [(r[0], r[1], r[2], r[3]) for r in rows]
    span_rows = (
        con.execute(_SAMPLE_SPANS, [list(col) for col in zip(*owners, strict=True)]).fetchall()
        if owners
        else []
    )
    spans: dict[tuple[str, str, str, int], list[Span]] = {}
    for run_id, item_id, judge_id, index, start, end, text in span_rows:
        match: MatchKind = "exact" if start is not None and end is not None else "unmatched"
        span = Span(start, end, text, match, requested=text)
        spans.setdefault((run_id, item_id, judge_id, index), []).append(span)
    return {
        (run_id, item_id, judge_id, index): Judgment(
            item_id=item_id,
            judge_id=judge_id,
            output_kind=kind,
            score=score,
            spans=tuple(spans.get((run_id, item_id, judge_id, index), ())),
            raw_output=raw,
            latency_ms=latency or 0.0,
            usage=Usage(input_tokens=ins, output_tokens=outs, cost_usd=cost),
            cache_key=key,
            cached=cached,
        )
        for (
            run_id,
            item_id,
            judge_id,
            index,
            kind,
            score,
            raw,
            latency,
            ins,
            outs,
            cost,
            key,
            cached,
        ) in rows
    }
