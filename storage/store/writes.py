"""A run's rows written: a chunk of items, judgments and consensus in one transaction, row
errors, a consensus made again, a run's rows copied for a re-aggregation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from juryflow.maths.records import Consensus, Item, Judgment
from juryflow.storage.connection import chunk_write_memory_limit
from juryflow.storage.datasets import RowError
from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.rows import _append, consensus_tables, judgment_tables
from juryflow.storage.store.samples import insert_samples
from juryflow.storage.store.span_sets import (
    _consensus_sets,
    _judgment_sets,
    _record_span_sets,
    _Sets,
)


class _PoolTooSmall(Exception):
    """A chunk write ran out of the small buffer pool of chunk writes, inside its
    transaction (rolled back)."""


# The chunk's items that the run has not stored yet: ``items`` has no key (schema
# migration 7), so this anti-join is what keeps one row per (run_id, item_id).
_NEW_ITEMS = (
    "SELECT n.* FROM incoming_rows n ANTI JOIN "
    "(SELECT item_id FROM items WHERE run_id = ?) s USING (item_id)"
)


def _insert_items(con: duckdb.DuckDBPyConnection, run_id: str, items: Sequence[Item]) -> None:
    """Append the items the run has not stored yet (a resumed run writes again the chunk of
    an item it had already stored; of one id given twice, the first is kept)."""
    first: dict[str, Item] = {}
    for item in items:
        first.setdefault(item.item_id, item)
    items = list(first.values())
    table = pa.table(
        {
            "run_id": pa.array([run_id] * len(items), pa.string()),
            "item_id": pa.array([i.item_id for i in items], pa.string()),
            "row_number": pa.array([i.row_number for i in items], pa.int32()),
            "variables": pa.array([json.dumps(i.variables) for i in items], pa.string()),
            "gold_hallucinated": pa.array(
                [i.gold.hallucinated if i.gold else None for i in items], pa.bool_()
            ),
            "gold_spans": pa.array(
                [json.dumps([list(s) for s in i.gold.spans]) if i.gold else None for i in items],
                pa.string(),
            ),
            "metadata": pa.array([json.dumps(i.metadata) for i in items], pa.string()),
        }
    )
    _append(con, "items", table, select=_NEW_ITEMS, parameters=[run_id])


def _insert_judgments(
    con: duckdb.DuckDBPyConnection, run_id: str, judgments: Sequence[Judgment]
) -> _Sets:
    """Append ``judgments`` and their spans; returns their span sets for
    :func:`_record_span_sets`, whose sizes also fill ``judgments.span_chars``."""
    judgment_table, span_table = judgment_tables(run_id, judgments)
    sets, sizes, eligible = _judgment_sets(judgments, span_table)
    span_chars = pa.array(sizes, pa.int64(), mask=~eligible)
    _append(con, "judgments", judgment_table.append_column("span_chars", span_chars))
    _append(con, "judgment_spans", span_table)
    insert_samples(con, run_id, judgments)
    return sets


def _insert_consensus(
    con: duckdb.DuckDBPyConnection, run_id: str, results: Sequence[Consensus]
) -> _Sets:
    consensus_table, span_table = consensus_tables(run_id, results)
    _append(con, "consensus", consensus_table)
    _append(con, "consensus_spans", span_table)
    return _consensus_sets(results, span_table)


def _insert_skipped(
    con: duckdb.DuckDBPyConnection, run_id: str, skipped: Sequence[tuple[str, str, str]]
) -> None:
    table = pa.table(
        {
            "run_id": pa.array([run_id] * len(skipped), pa.string()),
            "item_id": pa.array([item for item, _, _ in skipped], pa.string()),
            "judge_id": pa.array([judge for _, judge, _ in skipped], pa.string()),
            "reason": pa.array([reason for _, _, reason in skipped], pa.string()),
        }
    )
    _append(con, "skipped_judgments", table)


def _insert_audit(con: duckdb.DuckDBPyConnection, run_id: str, audit: Sequence[str]) -> None:
    table = pa.table(
        {
            "run_id": pa.array([run_id] * len(audit), pa.string()),
            "item_id": pa.array(list(audit), pa.string()),
        }
    )
    _append(con, "audit_items", table)


def insert_run_rows(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    items: Sequence[Item],
    judgments: Sequence[Judgment],
    consensus: Sequence[Consensus],
    errors: Sequence[RowError] = (),
) -> None:
    """A whole run's items, judgments, consensus and row errors, with their span sets,
    inside the caller's transaction (an import writes its run so: all of it or nothing)."""
    if items:
        _insert_items(con, run_id, items)
    judge_sets = _insert_judgments(con, run_id, judgments) if judgments else None
    consensus_sets = _insert_consensus(con, run_id, consensus) if consensus else None
    _record_span_sets(con, run_id, items, judge_sets, consensus_sets)
    if errors:
        table = pa.table(
            {
                "run_id": pa.array([run_id] * len(errors), pa.string()),
                "row_number": pa.array([e.row_number for e in errors], pa.int32()),
                "item_id": pa.array([e.item_id for e in errors], pa.string()),
                "error": pa.array([e.error for e in errors], pa.string()),
            }
        )
        _append(con, "row_errors", table)


class WritesMixin(StoreBase):
    def insert_items(self, run_id: str, items: Sequence[Item]) -> None:
        if items:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                _insert_items(con, run_id, items)
                _record_span_sets(con, run_id, items=items)

            self.transact(_body)

    def write_chunk(
        self,
        run_id: str,
        items: Sequence[Item],
        judgments: Sequence[Judgment],
        consensus: Sequence[Consensus],
        skipped: Sequence[tuple[str, str, str]] = (),
        audit: Sequence[str] = (),
    ) -> None:
        """A finished chunk in one transaction: its items, judgments and consensus, and with
        early stopping the (item, judge) pairs left out as decided and the audit items."""
        # A held session keeps its own buffer pool; a chunk's own connection gets the small
        # one of chunk writes (see chunk_write_memory_limit). A lake's connection is the
        # process's for good, so it keeps its own too.
        own_connection = self._held is None and self.lake is None
        limit = chunk_write_memory_limit() if own_connection else None
        extra = (skipped, audit)
        try:
            self._write_chunk(run_id, items, judgments, consensus, limit, extra)
        except _PoolTooSmall:
            # Long texts can need more than the small pool; the transaction was rolled
            # back, so the chunk is written again, with the store's own limit.
            self._write_chunk(run_id, items, judgments, consensus, None, extra)

    def _write_chunk(
        self,
        run_id: str,
        items: Sequence[Item],
        judgments: Sequence[Judgment],
        consensus: Sequence[Consensus],
        memory_limit: str | None,
        early: tuple[Sequence[tuple[str, str, str]], Sequence[str]] = ((), ()),
    ) -> None:
        skipped, audit = early

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            if memory_limit is not None:
                # The setting outlives the transaction until this connection closes, so
                # it bounds the checkpoint at the close too.
                con.execute(f"SET memory_limit = '{memory_limit}'")
            try:
                if items:
                    _insert_items(con, run_id, items)
                judge_sets = _insert_judgments(con, run_id, judgments) if judgments else None
                consensus_sets = _insert_consensus(con, run_id, consensus) if consensus else None
                if skipped:
                    _insert_skipped(con, run_id, skipped)
                if audit:
                    _insert_audit(con, run_id, audit)
                _record_span_sets(con, run_id, items, judge_sets, consensus_sets)
            except duckdb.OutOfMemoryException as error:
                if memory_limit is None:
                    raise
                raise _PoolTooSmall from error  # before COMMIT: nothing of it is stored

        self.transact(_body)

    def insert_row_errors(self, run_id: str, errors: Sequence[RowError]) -> None:
        if not errors:
            return

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM row_errors WHERE run_id = ?", [run_id])
            con.executemany(
                "INSERT INTO row_errors VALUES (?, ?, ?, ?)",
                [[run_id, e.row_number, e.item_id, e.error] for e in errors],
            )

        self.transact(_body)

    def insert_judgments(self, run_id: str, judgments: Sequence[Judgment]) -> None:
        """One transaction for the judgments and their spans, so a crash keeps both or neither."""
        if judgments:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                sets = _insert_judgments(con, run_id, judgments)
                _record_span_sets(con, run_id, judge_sets=sets)

            self.transact(_body)

    def forget_unscored(self, run_id: str, pairs: Sequence[tuple[str, str]]) -> None:
        """Drop the unscored rows of these (item, judge) pairs, to be judged again: a
        request a batch left unanswered (expired, say), which ``--resume`` sends anew.
        Their items have no consensus yet; a scored row is never dropped."""
        if pairs:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                # An unscored row has no span set; its spans, if any, go with it.
                for table in ("judgment_spans", "judgments"):
                    con.executemany(
                        f"DELETE FROM {table} WHERE run_id = ? AND item_id = ? AND "
                        "judge_id = ? AND (run_id, item_id, judge_id) IN (SELECT run_id, "
                        "item_id, judge_id FROM judgments WHERE score IS NULL)",
                        [[run_id, item_id, judge_id] for item_id, judge_id in pairs],
                    )

            self.transact(_body)

    def insert_consensus(self, run_id: str, results: Sequence[Consensus]) -> None:
        if results:

            def _body(con: duckdb.DuckDBPyConnection) -> None:
                sets = _insert_consensus(con, run_id, results)
                _record_span_sets(con, run_id, consensus_sets=sets)

            self.transact(_body)

    def replace_consensus(
        self, run_id: str, results: Sequence[Consensus], rule: dict[str, Any]
    ) -> None:
        """A run's whole consensus made again (a rule fitted over the run), in one transaction."""

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM consensus_spans WHERE run_id = ?", [run_id])
            con.execute("DELETE FROM consensus WHERE run_id = ?", [run_id])
            # the consensus's sets and everything they overlap go with it
            con.execute("DELETE FROM span_sets WHERE run_id = ? AND kind = 'consensus'", [run_id])
            con.execute(
                "DELETE FROM span_overlaps WHERE run_id = ? "
                "AND kind IN ('judge-consensus', 'consensus-gold')",
                [run_id],
            )
            if results:
                sets = _insert_consensus(con, run_id, results)
                _record_span_sets(con, run_id, consensus_sets=sets)
            con.execute(
                "UPDATE runs SET consensus = ? WHERE run_id = ?", [json.dumps(rule), run_id]
            )

        self.transact(_body)

    def copy_run_rows(self, source_run_id: str, run_id: str) -> None:
        """Copy items, judgments and their spans of one run under another id (one
        transaction), for a re-aggregation.

        The copied judgments are marked ``cached``: the new run reused them and paid for
        none, so no sum of its cost counts them as spent again. ``run_id`` is a run just
        created, with no rows yet: nothing here is written twice.
        """

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            for table, replaced, where in (
                ("items", "", ""),
                ("judgments", ", TRUE AS cached", ""),
                ("judgment_spans", "", ""),
                ("judgment_samples", ", TRUE AS cached", ""),
                ("judgment_sample_spans", "", ""),
                ("skipped_judgments", "", ""),
                ("audit_items", "", ""),
                # the sets travel with their rows; the consensus is made anew
                ("span_sets", "", " AND kind <> 'consensus'"),
                ("span_overlaps", "", " AND kind IN ('judge-judge', 'judge-gold')"),
            ):
                con.execute(
                    f"INSERT INTO {table} SELECT * REPLACE (?::VARCHAR AS run_id{replaced}) "
                    f"FROM {table} WHERE run_id = ?{where}",
                    [run_id, source_run_id],
                )

        self.transact(_body)
