"""One run's rows as Arrow tables, for the Python API (:mod:`juryflow.api`).

A table per record kind, one row per record, spans nested as lists of structs: what a
notebook user filters, joins and pivots. (``juryflow export`` writes the long item × judge
join of the same rows to a file.)
"""

from __future__ import annotations

import pyarrow as pa

from juryflow.storage.reads.run_queries import RUNS_SQL
from juryflow.storage.store import Store

_ITEMS_SQL = """
SELECT item_id, row_number, variables, metadata, gold_hallucinated, gold_spans
FROM items WHERE run_id = $run ORDER BY row_number, item_id
"""

_JUDGMENTS_SQL = """
WITH js AS (
    SELECT item_id, judge_id,
           list({'char_start': char_start, 'char_end': char_end, 'text': text,
                 'match_kind': match_kind} ORDER BY span_index) AS spans
    FROM judgment_spans WHERE run_id = $run GROUP BY item_id, judge_id
)
SELECT j.item_id, i.row_number, j.judge_id, j.provider, j.model, j.prompt_name,
       j.prompt_hash, j.output_kind, j.score, j.verdict, j.unscored_reason, j.reasoning,
       js.spans, j.latency_ms, j.input_tokens, j.output_tokens, j.cache_write_tokens,
       j.cache_read_tokens, j.cost_usd, j.attempts, j.cached
FROM judgments j
JOIN items i ON i.run_id = j.run_id AND i.item_id = j.item_id
LEFT JOIN js ON js.item_id = j.item_id AND js.judge_id = j.judge_id
WHERE j.run_id = $run
ORDER BY i.row_number, j.item_id, j.judge_id
"""

_CONSENSUS_SQL = """
WITH cs AS (
    SELECT item_id,
           list({'char_start': char_start, 'char_end': char_end, 'text': text,
                 'votes': votes} ORDER BY span_index) AS spans
    FROM consensus_spans WHERE run_id = $run GROUP BY item_id
)
SELECT c.item_id, i.row_number, c.status, c.n_judges, c.n_answered, c.n_scored,
       c.n_span_judges, c.score_median, c.score_min, c.score_max, c.score_spread,
       c.hallucinated, cs.spans, c.chars_any, c.chars_all,
       i.gold_hallucinated, i.gold_spans
FROM consensus c
JOIN items i ON i.run_id = c.run_id AND i.item_id = c.item_id
LEFT JOIN cs ON cs.item_id = c.item_id
WHERE c.run_id = $run
ORDER BY i.row_number, c.item_id
"""

_TABLES = {"items": _ITEMS_SQL, "judgments": _JUDGMENTS_SQL, "consensus": _CONSENSUS_SQL}


def run_table(store: Store, run_id: str, kind: str) -> pa.Table:
    """``items``, ``judgments`` or ``consensus`` of run ``run_id`` as one Arrow table."""
    with store.read() as con:
        return con.execute(_TABLES[kind], {"run": run_id}).to_arrow_table()


def runs_table(store: Store, status: str | None = None) -> pa.Table:
    """Every run of the store (or those of one status), newest first: the rows of
    ``juryflow runs``."""
    with store.read() as con:
        return con.execute(RUNS_SQL, {"status": status, "limit": None}).to_arrow_table()
