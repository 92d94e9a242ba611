"""Questions about whole runs: which runs there are, which run a typed id means, and every
item of a run with its judgments and consensus as one exportable table.

Bound parameters only: run ids, statuses and output paths never become SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from juryflow.storage.store import Store
from juryflow.storage.store.base import has_table
from juryflow.storage.store.liveness import is_live

SHOWN_CANDIDATES = 5


class RunIdError(ValueError):
    """The text names no run, or more than one; the message says what to type instead."""


@dataclass(frozen=True, slots=True)
class RunListing:
    columns: list[str]
    rows: list[tuple[Any, ...]]


RUNS_SQL = """
WITH i AS (SELECT run_id, count(*) AS items FROM items GROUP BY run_id),
     j AS (
        SELECT run_id, count(*) AS judgments, count(*) - count(score) AS unscored,
               -- what the run paid: a judgment reused from the cache keeps the cost of the
               -- call that first made it, which this run did not pay (0 when all cached)
               CASE WHEN count(cost_usd) > 0
                    THEN coalesce(sum(cost_usd) FILTER (WHERE NOT cached), 0) END AS cost_usd,
               sum(cost_usd) FILTER (WHERE cached) AS saved_usd,
               -- input tokens of this run's calls that the provider served from its cache
               sum(cache_read_tokens) FILTER (WHERE NOT cached) AS cache_read_tokens
        FROM judgments GROUP BY run_id
     )
SELECT r.run_id, r.status, r.kind, r.panel_name AS panel, r.dataset,
       coalesce(i.items, 0) AS items, coalesce(j.judgments, 0) AS judgments,
       coalesce(j.unscored, 0) AS unscored, j.cost_usd, j.saved_usd, j.cache_read_tokens,
       r.started_at,
       -- a run still going counts until now, so a stuck one shows how long it has hung
       epoch(coalesce(r.finished_at, now()) - r.started_at) AS duration_s
FROM runs r LEFT JOIN i USING (run_id) LEFT JOIN j USING (run_id)
WHERE ($status IS NULL OR r.status = $status)
ORDER BY r.started_at DESC, r.run_id DESC
LIMIT $limit
"""


def list_runs(store: Store, *, limit: int, status: str | None = None) -> RunListing:
    """The newest ``limit`` runs (optionally of one status), one row each.

    A `running` row whose process is gone (killed, or its store failed under it so that it
    could not record its end; see :mod:`juryflow.storage.store.liveness`) is listed as
    `interrupted`: what it is, and what ``--resume`` continues.
    """
    with store.read() as con:
        if not has_table(con, "runs"):
            # A DuckDB file no run has written to yet (made empty, or a run stopped before
            # its tables): a store with no runs, not an error.
            return RunListing([], [])
        cursor = con.execute(RUNS_SQL, {"status": status, "limit": limit})
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchall()
    if isinstance(store.path, Path):
        at = columns.index("status")
        gone = {
            row[0]
            for row in rows
            if row[at] == "running" and is_live(store.path, str(row[0])) is False
        }
        rows = [
            (*row[:at], "interrupted", *row[at + 1 :]) if row[0] in gone else row
            for row in rows
            if not (status == "running" and row[0] in gone)
        ]
    return RunListing(columns, rows)


def resolve_run_id(store: Store, text: str) -> str:
    """The run ``text`` names: its exact id, else the one run whose id starts with it.

    Raises :class:`RunIdError` when no run or several runs match.
    """
    with store.read() as con:
        return resolve_run_id_in(con, text, str(store.path))


def resolve_run_id_in(con: duckdb.DuckDBPyConnection, text: str, where: str) -> str:
    """:func:`resolve_run_id` on an open connection (``where``: the store, for messages)."""
    if con.execute("SELECT 1 FROM runs WHERE run_id = ?", [text]).fetchone():
        return text
    # starts_with, not LIKE: a % or _ in the text is a character, not a wildcard
    found = con.execute(
        "SELECT run_id FROM runs WHERE starts_with(run_id, ?) "
        "ORDER BY started_at DESC, run_id DESC LIMIT ?",
        [text, SHOWN_CANDIDATES + 1],
    ).fetchall()
    if len(found) == 1:
        return str(found[0][0])
    if not found:
        raise RunIdError(f"no run {text!r} in {where}; `juryflow runs` lists them")
    shown = ", ".join(str(row[0]) for row in found[:SHOWN_CANDIDATES])
    more = ", ..." if len(found) > SHOWN_CANDIDATES else ""
    raise RunIdError(
        f"run id {text!r} is ambiguous in {where}: it starts {shown}{more}; give more of the id"
    )


# -- export -------------------------------------------------------------------------------

EXPORT_FORMATS = {"parquet": "parquet", "csv": "csv", "jsonl": "json"}

_EXPORT_SQL = """
WITH js AS (
    SELECT item_id, judge_id,
           list({{'char_start': char_start, 'char_end': char_end, 'text': text,
                  'match_kind': match_kind}} ORDER BY span_index) AS spans
    FROM judgment_spans WHERE run_id = $run GROUP BY item_id, judge_id
), cs AS (
    SELECT item_id,
           list({{'char_start': char_start, 'char_end': char_end, 'text': text,
                  'votes': votes}} ORDER BY span_index) AS spans
    FROM consensus_spans WHERE run_id = $run GROUP BY item_id
)
SELECT i.run_id, i.item_id, i.row_number, i.variables, i.metadata,
       i.gold_hallucinated, i.gold_spans,
       j.judge_id, j.provider, j.model, j.prompt_name, j.output_kind, j.score, j.verdict,
       j.unscored_reason, j.reasoning, {judge_spans} AS judge_spans, j.latency_ms,
       j.input_tokens, j.output_tokens, j.cache_write_tokens, j.cache_read_tokens, j.cost_usd,
       j.cached, c.status AS consensus_status, c.n_answered AS consensus_n_answered,
       c.score_median AS consensus_score, c.score_spread AS consensus_spread,
       c.hallucinated AS consensus_hallucinated, {consensus_spans} AS consensus_spans
FROM items i
LEFT JOIN judgments j ON j.run_id = i.run_id AND j.item_id = i.item_id
LEFT JOIN js ON js.item_id = i.item_id AND js.judge_id = j.judge_id
LEFT JOIN consensus c ON c.run_id = i.run_id AND c.item_id = i.item_id
LEFT JOIN cs ON cs.item_id = i.item_id
WHERE i.run_id = $run
ORDER BY i.row_number, i.item_id, j.judge_id
"""


def export_sql(fmt: str) -> str:
    """The export query of one run (parameter ``$run``), in long ("tidy") form.

    One row per item × judge: the item's columns, that judge's judgment and the item's
    consensus (repeated on each of its judges' rows); an item no judge has answered yet
    keeps one row with empty judge columns. A pandas user pivots it to wide form with
    ``df.pivot(index="item_id", columns="judge_id", values="score")``, which the long form
    allows for any panel, where a wide file would need one column set per judge.

    Spans are lists of structs; CSV has no nested values, so there they are JSON text.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"--format {fmt}: choose {', '.join(EXPORT_FORMATS)}")
    wrap = "to_json({})" if fmt == "csv" else "{}"
    return _EXPORT_SQL.format(
        judge_spans=wrap.format("js.spans"), consensus_spans=wrap.format("cs.spans")
    )


def export_run(store: Store, run_id: str, fmt: str, path: Path) -> int:
    """Write run ``run_id`` to ``path`` (which the caller chose and checked); returns rows.

    The store connection is the ordinary one, not ``juryflow sql``'s confined one, so
    DuckDB's COPY may write the file.
    """
    options = "FORMAT csv, HEADER" if fmt == "csv" else f"FORMAT {EXPORT_FORMATS[fmt]}"
    query = export_sql(fmt)
    with store.read() as con:
        row = con.execute(
            f"COPY ({query}) TO $path ({options})", {"run": run_id, "path": str(path)}
        ).fetchone()
    return int(row[0]) if row else 0  # COPY answers with the number of rows it wrote


def spent_totals(store: Store, run_id: str) -> tuple[int, int, int, int]:
    """Judgments, retries, input and output tokens of the calls this run made itself
    (cached judgments excluded). A sampled judge's judgment sums the attempts of the samples
    this run paid for, so its retries are those attempts beyond one per paid sample: its
    samples are calls asked for, not retries."""
    _, totals = store.query(
        "WITH calls AS (SELECT item_id, judge_id, "
        "coalesce(nullif(count(*) FILTER (WHERE NOT cached), 0), count(*)) AS calls "
        "FROM judgment_samples WHERE run_id = ? GROUP BY item_id, judge_id) "
        "SELECT count(*), "
        "coalesce(sum(attempts - coalesce(c.calls, 1)) "
        "FILTER (WHERE NOT cached AND attempts > coalesce(c.calls, 1)), 0), "
        "coalesce(sum(input_tokens) FILTER (WHERE NOT cached), 0), "
        "coalesce(sum(output_tokens) FILTER (WHERE NOT cached), 0) "
        "FROM judgments j LEFT JOIN calls c USING (item_id, judge_id) WHERE j.run_id = ?",
        [run_id, run_id],
    )
    judgments, retries, tokens_in, tokens_out = totals[0]
    return int(judgments), int(retries), int(tokens_in), int(tokens_out)


def cache_totals(store: Store, run_id: str) -> tuple[int, int]:
    """Input tokens of this run's calls (cached judgments excluded) that the provider wrote
    to its prompt cache and read from it."""
    _, totals = store.query(
        "SELECT coalesce(sum(cache_write_tokens) FILTER (WHERE NOT cached), 0), "
        "coalesce(sum(cache_read_tokens) FILTER (WHERE NOT cached), 0) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    written, read = totals[0]
    return int(written), int(read)


def cost_split(store: Store, run_id: str) -> dict[str, Any]:
    """``cost_spent_usd``: the run's priced model calls; ``cost_reused_usd``: what the
    judgments it took from the cache (or copied, for ``reaggregate``) cost when they were
    first made; ``unpriced_calls`` / ``unpriced_models``: this run's calls that reported
    their usage but whose model has no price, which make the spending unknown (a run of an
    unpriced model is not free)."""
    _, rows = store.query(
        "SELECT coalesce(sum(cost_usd) FILTER (WHERE NOT cached), 0), "
        "coalesce(sum(cost_usd) FILTER (WHERE cached), 0), "
        "count(*) FILTER (WHERE NOT cached AND cost_usd IS NULL AND input_tokens IS NOT NULL), "
        "list(DISTINCT model ORDER BY model) FILTER (WHERE NOT cached AND cost_usd IS NULL "
        "AND input_tokens IS NOT NULL AND model IS NOT NULL) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    spent, reused, unpriced, models = rows[0]
    return {
        "cost_spent_usd": float(spent),
        "cost_reused_usd": float(reused),
        "unpriced_calls": int(unpriced),
        "unpriced_models": list(models or []),
    }


def unscored_by_judge(store: Store, run_id: str, top: int) -> list[dict[str, Any]]:
    """Per judge with unscored judgments: how many, and its ``top`` most frequent reasons."""
    _, rows = store.query(
        "SELECT judge_id, unscored_reason, count(*) AS n, "
        "sum(count(*)) OVER (PARTITION BY judge_id) AS total, "
        "row_number() OVER (PARTITION BY judge_id ORDER BY count(*) DESC, unscored_reason) "
        "AS rank "
        "FROM judgments WHERE run_id = ? AND score IS NULL "
        "GROUP BY judge_id, unscored_reason QUALIFY rank <= ? ORDER BY judge_id, rank",
        [run_id, top],
    )
    judges: dict[str, dict[str, Any]] = {}
    for judge_id, reason, n, total, _rank in rows:
        entry = judges.setdefault(
            str(judge_id), {"judge_id": str(judge_id), "unscored": int(total), "reasons": []}
        )
        entry["reasons"].append({"reason": str(reason or ""), "count": int(n)})
    return list(judges.values())


# Reasons quote item-specific detail after their first colon; provider errors keep their
# kind (auth, server, ...) and lose the attempt count, so that alike failures group.
_QUORUM_MISS_REASONS = (
    "SELECT judge_id, regexp_replace("
    "  CASE WHEN unscored_reason LIKE 'provider error%' "
    "    THEN split_part(unscored_reason, ':', 1) || ':' || split_part(unscored_reason, ':', 2) "
    "    ELSE split_part(unscored_reason, ':', 1) END, "
    "  ' after [0-9]+ attempts?', '') AS why, count(*) AS n "
    "FROM judgments j JOIN consensus c USING (run_id, item_id) "
    "WHERE j.run_id = ? AND c.status = 'insufficient' AND j.score IS NULL "
    "GROUP BY ALL ORDER BY n DESC, judge_id, why LIMIT ?"
)


def quorum_miss_reasons(store: Store, run_id: str, top: int) -> list[dict[str, Any]]:
    """The ``top`` (judge, reason kind) pairs behind the items that missed the quorum."""
    _, rows = store.query(_QUORUM_MISS_REASONS, [run_id, top])
    return [{"judge_id": r[0], "reason": r[1].strip(), "count": int(r[2])} for r in rows]


def typical_output_tokens(
    store: Store, pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[float, int]]:
    """Per (model, prompt hash): the mean output tokens of the calls the store has seen and
    how many there were (cached copies left out: they repeat one call)."""
    if not pairs:
        return {}
    _, rows = store.query(
        "SELECT model, prompt_hash, avg(output_tokens), count(*) FROM judgments "
        "WHERE NOT cached AND output_tokens IS NOT NULL "
        "AND model || '|' || prompt_hash IN (SELECT unnest(?)) GROUP BY ALL",
        [[f"{model}|{sha}" for model, sha in pairs]],
    )
    return {(str(m), str(h)): (float(mean), int(n)) for m, h, mean, n in rows}


def cached_keys(store: Store, keys: list[str]) -> set[str]:
    """The cache keys the store holds a scored judgment for (what a run would reuse)."""
    if not keys:
        return set()
    _, rows = store.query(
        "SELECT DISTINCT cache_key FROM judgments "
        "WHERE cache_key IN (SELECT unnest(?)) AND score IS NOT NULL",
        [keys],
    )
    return {str(row[0]) for row in rows}
