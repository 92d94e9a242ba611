"""A run's rows read back: items, judgments (and the cache's), row errors, the run's summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from juryflow.maths.records import GoldLabels, Item, Judgment
from juryflow.storage.datasets import RowError
from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.rows import _judgments_from_cursor, _spans_for


class ReadsMixin(StoreBase):
    def row_errors(self, run_id: str, limit: int = 20) -> list[RowError]:
        with self.read() as con:
            rows = con.execute(
                "SELECT row_number, item_id, error FROM row_errors WHERE run_id = ? "
                "ORDER BY row_number LIMIT ?",
                [run_id, limit],
            ).fetchall()
        return [RowError(int(n), item_id, error) for n, item_id, error in rows]

    def load_items(self, run_id: str) -> list[Item]:
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id, variables, gold_hallucinated, gold_spans, row_number, metadata "
                "FROM items WHERE run_id = ? ORDER BY row_number",
                [run_id],
            ).fetchall()
        items = []
        for item_id, variables, gold_h, gold_spans, row_number, metadata in rows:
            gold = None
            if gold_h is not None or gold_spans is not None:
                spans = tuple((int(a), int(b)) for a, b in json.loads(gold_spans or "[]"))
                gold = GoldLabels(hallucinated=gold_h, spans=spans)
            items.append(
                Item(item_id, json.loads(variables), gold, row_number, json.loads(metadata or "{}"))
            )
        return items

    def judged_pairs(self, run_id: str) -> set[tuple[str, str]]:
        """(item, judge) pairs that already have their row: what a resumed run skips."""
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id, judge_id FROM judgments WHERE run_id = ?", [run_id]
            ).fetchall()
        return {(str(a), str(b)) for a, b in rows}

    def skipped_pairs(self, run_id: str) -> set[tuple[str, str]]:
        """(item, judge) pairs an early-stopping run left out as decided: a resume skips them."""
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id, judge_id FROM skipped_judgments WHERE run_id = ?", [run_id]
            ).fetchall()
        return {(str(a), str(b)) for a, b in rows}

    def item_ids(self, run_id: str) -> set[str]:
        with self.read() as con:
            rows = con.execute("SELECT item_id FROM items WHERE run_id = ?", [run_id]).fetchall()
        return {str(r[0]) for r in rows}

    def consensus_item_ids(self, run_id: str) -> set[str]:
        with self.read() as con:
            rows = con.execute(
                "SELECT item_id FROM consensus WHERE run_id = ?", [run_id]
            ).fetchall()
        return {str(r[0]) for r in rows}

    def cached_judgments(self, cache_keys: Sequence[str]) -> dict[str, Judgment]:
        """Scored judgments already stored under these cache keys (newest wins)."""
        if not cache_keys:
            return {}
        with self.read() as con:
            rows = con.execute(
                "SELECT * EXCLUDE (rank) FROM ("
                "  SELECT j.*, row_number() OVER ("
                "    PARTITION BY cache_key ORDER BY created_at DESC) AS rank"
                "  FROM judgments j WHERE cache_key IN (SELECT unnest(?)) AND score IS NOT NULL"
                ") WHERE rank = 1",
                [list(cache_keys)],
            )
            judgments = _judgments_from_cursor(rows)
            spans = _spans_for(con, [(j.run_id, j.item_id, j.judge_id) for j in judgments])
        return {
            row.cache_key: row.to_judgment(spans.get((row.run_id, row.item_id, row.judge_id), ()))
            for row in judgments
            if row.cache_key
        }

    def load_judgments(self, run_id: str, *, without_consensus: bool = False) -> list[Judgment]:
        """A run's judgments with their spans; ``without_consensus``: only those of items
        that have no consensus row yet (what a resumed run still needs: at a million items
        the whole run's judgments would take gigabytes)."""
        where = "run_id = $run"
        if without_consensus:
            where += " AND item_id NOT IN (SELECT item_id FROM consensus WHERE run_id = $run)"
        with self.read() as con:
            rows = _judgments_from_cursor(
                con.execute(
                    f"SELECT * FROM judgments WHERE {where} ORDER BY item_id", {"run": run_id}
                )
            )
            spans = _spans_for(con, [(r.run_id, r.item_id, r.judge_id) for r in rows])
        return [r.to_judgment(spans.get((r.run_id, r.item_id, r.judge_id), ())) for r in rows]

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        """A read-only query: column names and rows."""
        with self.read() as con:
            cursor = con.execute(sql, list(parameters))
            columns = [d[0] for d in cursor.description or ()]
            return columns, cursor.fetchall()

    def run_summary(self, run_id: str) -> dict[str, Any]:
        with self.read() as con:
            judged = con.execute(
                "SELECT count(*), count(score), count(*) - count(score), "
                "count(*) FILTER (WHERE cached), sum(cost_usd), sum(input_tokens), "
                "sum(output_tokens), count(DISTINCT judge_id), sum(cache_write_tokens), "
                "sum(cache_read_tokens) "
                "FROM judgments WHERE run_id = ?",
                [run_id],
            ).fetchone()
            agreed = con.execute(
                "SELECT count(*), avg(hallucinated::INTEGER), avg(score_spread), "
                "count(*) FILTER (WHERE status = 'insufficient'), "
                "count(*) FILTER (WHERE coalesce(unlocalised, false)) "
                "FROM consensus WHERE run_id = ?",
                [run_id],
            ).fetchone()
            rejected = con.execute(
                "SELECT count(*) FROM row_errors WHERE run_id = ?", [run_id]
            ).fetchone()
            # Pairwise judges: their orders that disagree, and the consensus' preferences.
            pairwise = con.execute(
                "SELECT count(*), count(*) FILTER (WHERE unscored_reason LIKE 'inconsistent:%'), "
                "(SELECT count(*) FILTER (WHERE score < 0.25) FROM consensus "
                " WHERE run_id = $run AND status = 'ok'), "
                "(SELECT count(*) FILTER (WHERE score >= 0.25 AND score <= 0.75) FROM consensus "
                " WHERE run_id = $run AND status = 'ok'), "
                "(SELECT count(*) FILTER (WHERE score > 0.75) FROM consensus "
                " WHERE run_id = $run AND status = 'ok') "
                "FROM judgments WHERE run_id = $run AND output_kind = 'preference'",
                {"run": run_id},
            ).fetchone()
            early = con.execute(
                "SELECT (SELECT count(*) FROM skipped_judgments WHERE run_id = $run), "
                "(SELECT count(DISTINCT item_id) FROM skipped_judgments WHERE run_id = $run), "
                "(SELECT count(*) FROM audit_items WHERE run_id = $run), "
                "(SELECT count(DISTINCT item_id) FROM skipped_judgments "
                "WHERE run_id = $run AND reason = 'lossy')",
                {"run": run_id},
            ).fetchone()
        assert judged is not None and agreed is not None and rejected is not None
        assert early is not None and pairwise is not None
        return {
            "judgments": judged[0],
            "scored": judged[1],
            "unscored": judged[2],
            "cache_hits": judged[3],
            "cost_usd": judged[4],
            "input_tokens": judged[5],
            "output_tokens": judged[6],
            # of input_tokens: written to / served from the provider's prompt cache
            "cache_write_tokens": judged[8],
            "cache_read_tokens": judged[9],
            "judges": judged[7],
            "items": agreed[0],
            "hallucination_rate": agreed[1],
            "mean_spread": agreed[2],
            "insufficient": agreed[3],
            # the judges agree something is wrong, not where: no character won the span vote
            "unlocalised": agreed[4],
            "rejected_rows": rejected[0],
            "skipped_decided": early[0],
            "items_decided_early": early[1],
            "audit_items": early[2],
            # stopped on close agreement, not proved exact (lossy_agreement)
            "items_stopped_lossy": early[3],
            # pairwise judges (0 in other runs): judgments, orders that disagree, and the
            # consensus preferring A, neither, B
            "preference_judgments": pairwise[0],
            "inconsistent": pairwise[1],
            "preferred": {"A": pairwise[2], "tie": pairwise[3], "B": pairwise[4]},
        }
