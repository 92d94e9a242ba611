"""Span sets and their overlaps, kept beside the rows that make them (``span_sets``,
``span_overlaps``) so the span views only add up rows; and migration 5's backfill of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from juryflow.maths import span_overlaps as so
from juryflow.maths.records import Consensus, Item, Judgment
from juryflow.storage.store.rows import _append

_KINDS = ("judge", "consensus", "gold")


_PAIR_KINDS = np.array([f"{a}-{b}" for a in _KINDS for b in _KINDS], dtype=object)


@dataclass(frozen=True, slots=True)
class _Sets:
    """Span sets (one per row of ``item_ids``) and their intervals, ``owner`` indexing rows."""

    item_ids: list[str]
    kind: np.ndarray
    judge_ids: list[str]
    owner: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _from_spans(
    item_ids: list[str],
    judge_ids: list[str],
    kind: int,
    counts: np.ndarray,
    eligible: np.ndarray,
    spans: pa.Table,
    clip: bool,
) -> tuple[_Sets, np.ndarray]:
    """The non-empty sets among rows whose spans are the consecutive rows of ``spans``, and
    every row's size (0 where not eligible)."""
    owner = np.repeat(np.arange(len(item_ids), dtype=np.int64), counts)
    start_col, end_col = spans["char_start"], spans["char_end"]
    valid = pc.and_(pc.is_valid(start_col), pc.is_valid(end_col)).to_numpy(zero_copy_only=False)
    starts = pc.fill_null(start_col, 0).to_numpy().astype(np.int64)
    ends = pc.fill_null(end_col, 0).to_numpy().astype(np.int64)
    if clip:
        starts = np.maximum(starts, 0)
    keep = valid & eligible[owner]
    merged = so.disjoint(owner[keep], starts[keep], ends[keep])
    sizes = so.set_sizes(merged, len(item_ids))
    flagging = np.flatnonzero(sizes > 0)
    sets = _Sets(
        [item_ids[i] for i in flagging],
        np.full(len(flagging), kind, dtype=np.int64),
        [judge_ids[i] for i in flagging],
        np.searchsorted(flagging, merged.owner),
        merged.starts,
        merged.ends,
    )
    return sets, sizes


def _judgment_sets(
    judgments: Sequence[Judgment], spans: pa.Table
) -> tuple[_Sets, np.ndarray, np.ndarray]:
    """Scored span answers' anchored spans (a negative start clipped to 0)."""
    counts = np.fromiter((len(j.spans) for j in judgments), np.int64, len(judgments))
    eligible = np.fromiter(
        (j.score is not None and j.output_kind == "spans" for j in judgments),
        bool,
        len(judgments),
    )
    sets, sizes = _from_spans(
        [j.item_id for j in judgments],
        [j.judge_id for j in judgments],
        0,
        counts,
        eligible,
        spans,
        clip=True,
    )
    return sets, sizes, eligible


def _consensus_sets(results: Sequence[Consensus], spans: pa.Table) -> _Sets:
    counts = np.fromiter((len(c.spans) for c in results), np.int64, len(results))
    eligible = np.fromiter((c.status == "ok" for c in results), bool, len(results))
    item_ids = [c.item_id for c in results]
    return _from_spans(item_ids, [""] * len(results), 1, counts, eligible, spans, clip=False)[0]


def _stored_sets(table: pa.Table) -> _Sets:
    """Rows of ``span_sets`` (or gold intervals, one row per interval) as sets."""
    starts, ends = table["starts"].combine_chunks(), table["ends"].combine_chunks()
    counts = pc.list_value_length(starts).to_numpy(zero_copy_only=False).astype(np.int64)
    kinds = {name: code for code, name in enumerate(_KINDS)}
    return _Sets(
        table["item_id"].to_pylist(),
        np.array([kinds[k] for k in table["kind"].to_pylist()], dtype=np.int64),
        table["judge_id"].to_pylist(),
        np.repeat(np.arange(len(table), dtype=np.int64), counts),
        pc.list_flatten(starts).to_numpy(zero_copy_only=False).astype(np.int64),
        pc.list_flatten(ends).to_numpy(zero_copy_only=False).astype(np.int64),
    )


_STORED_SETS_SQL = (
    "SELECT s.item_id, s.kind, s.judge_id, s.starts, s.ends "
    "FROM span_sets s JOIN span_lookup l USING (run_id, item_id)"
)


# An item's gold spans as the gold_intervals view reads them (negative starts clipped).
_GOLD_SETS_SQL = """
    SELECT item_id, 'gold' AS kind, '' AS judge_id,
           list(greatest(g[1], 0)) AS starts, list(g[2]) AS ends
    FROM (
        SELECT i.item_id, unnest(json_transform(i.gold_spans, '[["BIGINT"]]')) AS g
        FROM items i JOIN span_lookup l USING (run_id, item_id)
        WHERE i.gold_spans IS NOT NULL
    )
    WHERE g[2] > greatest(g[1], 0)
    GROUP BY item_id
"""


def _record_span_sets(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    items: Sequence[Item] = (),
    judge_sets: _Sets | None = None,
    consensus_sets: _Sets | None = None,
) -> None:
    """Add the span sets of rows just written, and their overlaps with every set already
    stored for the same items, to ``span_sets`` / ``span_overlaps`` (the caller's
    transaction), so the span views only add up rows.

    Items already stored are not written again, so their gold sets are read back from the
    table, and only for items that have none yet.
    """
    new = [s for s in (judge_sets, consensus_sets) if s is not None]
    wanted = dict.fromkeys(i for sets in new for i in sets.item_ids)
    wanted.update(dict.fromkeys(i.item_id for i in items))
    if not wanted:
        return
    con.register(
        "span_lookup",
        pa.table({"run_id": [run_id] * len(wanted), "item_id": list(wanted)}),
    )
    try:
        stored = _stored_sets(con.execute(_STORED_SETS_SQL).to_arrow_table())
        if items:
            gold = _stored_sets(con.execute(_GOLD_SETS_SQL).to_arrow_table())
            have = {i for i, k in zip(stored.item_ids, stored.kind, strict=True) if k == 2}
            if have:
                fresh = np.array([i not in have for i in gold.item_ids], dtype=bool)
                gold = _subset(gold, fresh)
            new.append(_merged(gold))
    finally:
        con.unregister("span_lookup")
    if not any(s.item_ids for s in new):
        return
    sets_rows, overlap_rows = _set_rows(run_id, new, stored)
    if len(sets_rows):
        _append(con, "span_sets", sets_rows)
    if len(overlap_rows):
        _append(con, "span_overlaps", overlap_rows)


# The sets of rows written before migration 5, read back the way the views read them.
_BACKFILL_SETS_SQL = """
    SELECT s.item_id, 'judge' AS kind, s.judge_id,
           list(greatest(s.char_start, 0)::BIGINT) AS starts, list(s.char_end::BIGINT) AS ends
    FROM judgment_spans s
    JOIN judgments j USING (run_id, item_id, judge_id)
    JOIN span_lookup l USING (run_id, item_id)
    WHERE j.score IS NOT NULL AND j.output_kind = 'spans'
      AND s.char_start IS NOT NULL AND s.char_end IS NOT NULL
    GROUP BY s.item_id, s.judge_id
    UNION ALL
    SELECT s.item_id, 'consensus', '', list(s.char_start::BIGINT), list(s.char_end::BIGINT)
    FROM consensus_spans s
    JOIN consensus c USING (run_id, item_id)
    JOIN span_lookup l USING (run_id, item_id)
    WHERE c.status = 'ok'
    GROUP BY s.item_id
"""


_BACKFILL_CHUNK = 20_000


def _backfill_span_sets(con: duckdb.DuckDBPyConnection) -> None:
    """Migration 5: ``span_sets`` / ``span_overlaps`` of every stored run, a chunk of items
    at a time (one query over a whole large run does not fit the memory limit)."""
    keys = con.execute(
        "SELECT DISTINCT run_id, item_id FROM ("
        "SELECT run_id, item_id FROM judgment_spans UNION ALL "
        "SELECT run_id, item_id FROM consensus_spans UNION ALL "
        "SELECT run_id, item_id FROM items WHERE gold_spans IS NOT NULL) ORDER BY ALL"
    ).fetchall()
    by_run: dict[str, list[str]] = {}
    for run_id, item_id in keys:
        by_run.setdefault(str(run_id), []).append(str(item_id))
    for run_id, item_ids in by_run.items():
        for start in range(0, len(item_ids), _BACKFILL_CHUNK):
            chunk = item_ids[start : start + _BACKFILL_CHUNK]
            con.register(
                "span_lookup", pa.table({"run_id": [run_id] * len(chunk), "item_id": chunk})
            )
            try:
                spans = con.execute(_BACKFILL_SETS_SQL).to_arrow_table()
                gold = con.execute(_GOLD_SETS_SQL).to_arrow_table()
            finally:
                con.unregister("span_lookup")
            new = [_merged(_stored_sets(spans)), _merged(_stored_sets(gold))]
            sets_rows, overlap_rows = _set_rows(run_id, new, _no_sets())
            if len(sets_rows):
                _append(con, "span_sets", sets_rows)
            if len(overlap_rows):
                _append(con, "span_overlaps", overlap_rows)
    con.execute(
        "UPDATE judgments j SET span_chars = coalesce(("
        "SELECT s.n_chars FROM span_sets s WHERE s.kind = 'judge' AND s.run_id = j.run_id "
        "AND s.item_id = j.item_id AND s.judge_id = j.judge_id), 0) "
        "WHERE j.score IS NOT NULL AND j.output_kind = 'spans'"
    )


BACKFILLS = {5: _backfill_span_sets}
"""Python steps of a migration, run right after its DDL in the same transaction."""


def _no_sets() -> _Sets:
    none = np.zeros(0, dtype=np.int64)
    return _Sets([], none, [], none, none, none)


def _subset(sets: _Sets, keep: np.ndarray) -> _Sets:
    rows = np.flatnonzero(keep)
    on = keep[sets.owner]
    return _Sets(
        [sets.item_ids[i] for i in rows],
        sets.kind[rows],
        [sets.judge_ids[i] for i in rows],
        np.searchsorted(rows, sets.owner[on]),
        sets.starts[on],
        sets.ends[on],
    )


def _merged(sets: _Sets) -> _Sets:
    """Gold spans read back as written: merged, and sets with no character dropped."""
    merged = so.disjoint(sets.owner, sets.starts, sets.ends)
    flagging = so.set_sizes(merged, len(sets.item_ids)) > 0
    return _subset(_Sets(sets.item_ids, sets.kind, sets.judge_ids, *_fields(merged)), flagging)


def _fields(iv: so.Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return iv.owner, iv.starts, iv.ends


def _set_rows(run_id: str, new: list[_Sets], stored: _Sets) -> tuple[pa.Table, pa.Table]:
    """The ``span_sets`` rows of the new sets, and the ``span_overlaps`` rows of every pair
    of sets on one item with at least one of them new."""
    parts = [*new, stored]
    item_ids = [i for s in parts for i in s.item_ids]
    judge_ids = np.array([j for s in parts for j in s.judge_ids], dtype=object)
    kind = np.concatenate([s.kind for s in parts])
    is_new = np.concatenate([np.full(len(s.item_ids), s is not stored, dtype=bool) for s in parts])
    base = np.cumsum([0, *(len(s.item_ids) for s in parts)])[:-1]
    owner = np.concatenate([s.owner + b for s, b in zip(parts, base, strict=True)])
    codes: dict[str, int] = {}
    item_code = np.fromiter((codes.setdefault(i, len(codes)) for i in item_ids), np.int64)
    # sets of one item side by side: pairs are then neighbours in one array pass
    order = np.argsort(item_code, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    n_sets = len(order)
    item_code, kind, judge_ids, is_new = (
        item_code[order],
        kind[order],
        judge_ids[order],
        is_new[order],
    )
    iv = so.disjoint(
        rank[owner],
        np.concatenate([s.starts for s in parts]),
        np.concatenate([s.ends for s in parts]),
    )
    sizes = so.set_sizes(iv, n_sets)
    counts = np.bincount(iv.owner, minlength=n_sets)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    fresh = np.flatnonzero(is_new)
    ids = np.array(list(codes), dtype=object)
    sets_rows = pa.table(
        {
            "run_id": pa.array([run_id] * len(fresh), pa.string()),
            "item_id": pa.array(ids[item_code[fresh]], pa.string()),
            "kind": pa.array(np.array(_KINDS, dtype=object)[kind[fresh]], pa.string()),
            "judge_id": pa.array(judge_ids[fresh], pa.string()),
            "n_chars": pa.array(sizes[fresh], pa.int64()),
            "starts": pa.ListArray.from_arrays(offsets, pa.array(iv.starts)).take(fresh),
            "ends": pa.ListArray.from_arrays(offsets, pa.array(iv.ends)).take(fresh),
        }
    )
    a, b = so.pairs_within(item_code)
    ka, kb = kind[a], kind[b]
    wanted = (is_new[a] | is_new[b]) & ((ka != kb) | (ka == 0))
    wanted &= ~((ka == 0) & (kb == 0) & (judge_ids[a] == judge_ids[b]))
    a, b = a[wanted], b[wanted]
    # judge before consensus before gold; two judges in id order, as the views compare them
    swap = (kind[a] > kind[b]) | ((kind[a] == kind[b]) & (judge_ids[a] > judge_ids[b]).astype(bool))
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    shared = so.overlaps(iv, n_sets, a, b)
    hit = shared > 0
    a, b, shared = a[hit], b[hit], shared[hit]
    overlap_rows = pa.table(
        {
            "run_id": pa.array([run_id] * len(a), pa.string()),
            "item_id": pa.array(ids[item_code[a]], pa.string()),
            "kind": pa.array(_PAIR_KINDS[kind[a] * 3 + kind[b]], pa.string()),
            "judge_a": pa.array(judge_ids[a], pa.string()),
            "judge_b": pa.array(judge_ids[b], pa.string()),
            "overlap_chars": pa.array(shared, pa.int64()),
        }
    )
    return sets_rows, overlap_rows
