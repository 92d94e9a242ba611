"""The reads behind intra-judge reliability: each judge's repeated samples of a run, as arrays.

A judge with ``samples: N > 1`` has one row per sample in ``judgment_samples`` (and its spans
in ``judgment_sample_spans``, migration 14) beside its reduced answer in ``judgments``. Here
they come out in the shapes :func:`juryflow.maths.samples.self_agreement.self_agreement`
takes, items in the order of :func:`juryflow.storage.reads.analysis.load_run_data` (row
order), so the arrays line up with the run's. Bound parameters only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import ItemSpans
from juryflow.storage.store import Store
from juryflow.storage.store.base import has_table

FloatArray = npt.NDArray[np.float64]

# Each item's position in the run, as load_run_data numbers them.
_ITEM_INDEX = """
    WITH item_index AS (
        SELECT item_id, (row_number() OVER (ORDER BY row_number, item_id) - 1)::BIGINT AS i
        FROM items WHERE run_id = $run
    )
"""

_SAMPLES = (
    _ITEM_INDEX
    + """
    SELECT s.judge_id, s.sample_index::BIGINT AS k, x.i,
           coalesce(s.score, 'NaN'::DOUBLE) AS score,
           CASE WHEN s.score IS NULL THEN 'NaN'::DOUBLE
                ELSE coalesce(s.verdict, false)::DOUBLE END AS verdict,
           s.score IS NOT NULL AND s.output_kind = 'spans' AS span_answer,
           s.output_kind
    FROM judgment_samples s JOIN item_index x USING (item_id)
    WHERE s.run_id = $run
    ORDER BY s.judge_id, k, x.i
"""
)

# Anchored spans only, in span order (the set's order does not change what it covers).
_SAMPLE_SPANS = (
    _ITEM_INDEX
    + """
    SELECT p.judge_id, p.sample_index::BIGINT AS k, x.i, p.char_start::BIGINT AS char_start,
           p.char_end::BIGINT AS char_end
    FROM judgment_sample_spans p JOIN item_index x USING (item_id)
    WHERE p.run_id = $run AND p.char_start IS NOT NULL AND p.char_end IS NOT NULL
      AND p.char_end >= greatest(p.char_start, 0)
    ORDER BY p.judge_id, k, x.i, p.span_index
"""
)


@dataclass(frozen=True, slots=True)
class JudgeSamples:
    """One judge's samples of a run: sample ``k`` of item ``i`` at ``[k, i]``."""

    judge_id: str
    output_kind: str
    scores: FloatArray
    """``(n_samples, n_items)``, NaN = unscored or not sampled."""
    verdicts: FloatArray
    """``(n_samples, n_items)`` 0/1, NaN where unscored."""
    span_sets: tuple[ItemSpans, ...]
    """One per sample; not answered where the sample gave no span answer."""


def has_sample_tables(store: Store) -> bool:
    """The store has the samples' tables (a read-only store older than migration 14 has not)."""
    with store.read() as con:
        return has_table(con, "judgment_samples")


def _column(rows: dict[str, Any], name: str, dtype: Any) -> Any:
    return np.asarray(rows[name], dtype=dtype)


def load_samples(store: Store, run_id: str, n_items: int) -> list[JudgeSamples]:
    """Every judge of the run that has samples, by judge id; ``n_items`` is the run's item
    count (the width of the arrays)."""
    if not has_sample_tables(store):
        return []
    with store.read() as con:
        rows = con.execute(_SAMPLES, {"run": run_id}).fetchnumpy()
        spans = con.execute(_SAMPLE_SPANS, {"run": run_id}).fetchnumpy()
    judges = [str(j) for j in rows["judge_id"].tolist()]
    if not judges:
        return []
    k, i = _column(rows, "k", np.int64), _column(rows, "i", np.int64)
    score, verdict = _column(rows, "score", np.float64), _column(rows, "verdict", np.float64)
    span_answer = _column(rows, "span_answer", bool)
    kinds = [str(o) for o in rows["output_kind"].tolist()]
    span_judges = np.asarray([str(j) for j in spans["judge_id"].tolist()], dtype=object)
    span_k, span_i = _column(spans, "k", np.int64), _column(spans, "i", np.int64)
    starts, ends = _column(spans, "char_start", np.int64), _column(spans, "char_end", np.int64)
    out: list[JudgeSamples] = []
    ids = np.asarray(judges, dtype=object)
    for judge_id in sorted(set(judges)):
        mine = ids == judge_id
        n_samples = int(k[mine].max()) + 1
        scores = np.full((n_samples, n_items), np.nan)
        verdicts = np.full((n_samples, n_items), np.nan)
        answered = np.zeros((n_samples, n_items), dtype=bool)
        scores[k[mine], i[mine]] = score[mine]
        verdicts[k[mine], i[mine]] = verdict[mine]
        answered[k[mine], i[mine]] = span_answer[mine]
        theirs = span_judges == judge_id
        sets = []
        for sample in range(n_samples):
            rows_k = theirs & (span_k == sample)
            # Spans of an unscored or score-only sample do not count.
            rows_k &= answered[sample, span_i] if span_i.size else rows_k
            sets.append(
                ItemSpans(
                    span_i[rows_k], np.maximum(starts[rows_k], 0), ends[rows_k], answered[sample]
                )
            )
        kind = max(set(np.asarray(kinds, dtype=object)[mine]), key=kinds.count)
        out.append(JudgeSamples(judge_id, str(kind), scores, verdicts, tuple(sets)))
    return out


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One sample of one judge on one item, as stored."""

    judge_id: str
    sample_index: int
    output_kind: str
    score: float | None
    verdict: bool | None
    unscored_reason: str | None
    spans: list[tuple[int | None, int | None, str]]
    """``(char_start, char_end, text)`` in span order; offsets None when unanchored."""


def item_samples(store: Store, run_id: str, item_ids: list[str]) -> dict[str, list[SampleRow]]:
    """The samples of ``item_ids`` (by item; judges by id, samples in order), for showing an
    item's samples side by side. Items without samples are absent."""
    if not item_ids or not has_sample_tables(store):
        return {}
    with store.read() as con:
        rows = con.execute(
            "SELECT s.item_id, s.judge_id, s.sample_index, s.output_kind, s.score, s.verdict, "
            "s.unscored_reason, list((p.char_start, p.char_end, p.text) ORDER BY p.span_index) "
            "FILTER (WHERE p.span_index IS NOT NULL) "
            "FROM judgment_samples s LEFT JOIN judgment_sample_spans p "
            "USING (run_id, item_id, judge_id, sample_index) "
            "WHERE s.run_id = ? AND list_contains(?, s.item_id) "
            "GROUP BY ALL ORDER BY s.item_id, s.judge_id, s.sample_index",
            [run_id, item_ids],
        ).fetchall()
    out: dict[str, list[SampleRow]] = {}
    for item_id, judge_id, index, kind, score, verdict, reason, spans in rows:
        out.setdefault(str(item_id), []).append(
            SampleRow(
                judge_id=str(judge_id),
                sample_index=int(index),
                output_kind=str(kind),
                score=None if score is None else float(score),
                verdict=None if verdict is None else bool(verdict),
                unscored_reason=reason,
                spans=[(start, end, str(text or "")) for start, end, text in spans or []],
            )
        )
    return out
