"""The reads behind the viewer's items and item pages: one page of a run's items (sorted,
filtered, searched), an item's neighbours in that order, and everything about one item.

SQL text is fixed: sort keys and filters pick fragments from the dicts below, and every
value from a request is a bound parameter.

The measures come from the ``item_disagreement_measures`` view (storage/views.py), read
for one run: ``item_disagreement`` adds to it a ``disagreement_rank`` window over the whole
run, which took most of a page's 230 ms at 100,000 items and which a page never needs (the
same order comes from ORDER BY on the columns the rank is defined by); without it a page
takes 40-60 ms (``bench/bench_viewer.py``).
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from juryflow.storage.views import DISAGREEMENT_RANK_ORDER

# Per item of the run ``$run``: the ``item_disagreement_measures`` view (storage/views.py),
# whose run filter reaches its table scans, plus ``gold_mismatch`` (the consensus verdict
# is not the dataset's).
_MEASURES = """
WITH measures AS (
    SELECT *, coalesce(consensus_hallucinated <> gold_hallucinated, false) AS gold_mismatch
    FROM item_disagreement_measures WHERE run_id = $run
)
"""

# Every sort ends with the rank's order, so that the order is total and prev/next walk
# every item once.
_RANK_ORDER = DISAGREEMENT_RANK_ORDER

SORTS: dict[str, str] = {
    "disagreement": "disagreement",
    "score_spread": "score_spread",
    "verdict_split": "verdict_split",
    "span_disagreement": "span_disagreement",
    "consensus_score": "consensus_score",
    "consensus_verdict": "consensus_hallucinated",
    "gold_mismatch": "CASE WHEN gold_hallucinated IS NOT NULL "
    "AND consensus_hallucinated IS NOT NULL THEN gold_mismatch END",
    "item": "item_id",
}
"""Sort key (as the URL says it) -> the column it orders by. Missing values sort last."""

_DIRECTIONS = {True: "DESC", False: "ASC"}

# The judged text of an item, as storage/reads/analysis.py ``item_details`` takes it.
_TEXT = (
    "coalesce(json_extract_string(i.variables, '$.response'), "
    "json_extract_string(i.variables, '$.output'), '')"
)

_FILTERS: dict[str, str] = {
    "split": "split_verdict",
    "unscored": "n_scored < n_judgments",
    "gold_mismatch": "gold_mismatch",
    "insufficient": "coalesce(consensus_status, '') <> 'ok'",
    "verdict": (
        "item_id IN (SELECT item_id FROM judgments "
        "WHERE run_id = $run AND judge_id = $verdict_judge AND verdict = $verdict)"
    ),
    # ILIKE took 0.7 s over 100,000 responses; RE2 with (?i) 0.1 s for the same matches.
    "q": (
        "item_id IN (SELECT i.item_id FROM items i "
        f"WHERE i.run_id = $run AND regexp_matches({_TEXT}, $pattern))"
    ),
    # The same, for a query whose characters JSON writes as themselves: the raw JSON of
    # the variables holds any match verbatim, so only the rows it matches (a third of the
    # time) have their JSON parsed.
    "q_raw": (
        "item_id IN (SELECT i.item_id FROM items i "
        "WHERE i.run_id = $run AND regexp_matches(i.variables::VARCHAR, $pattern) "
        f"AND regexp_matches({_TEXT}, $pattern))"
    ),
}

_ROW_COLUMNS = (
    "item_id", "row_number", "n_judgments", "n_scored", "score_spread", "score_stddev",
    "n_hallucinated_verdicts", "n_clean_verdicts", "split_verdict", "verdict_split",
    "span_disagreement", "disagreement", "consensus_status", "consensus_score",
    "consensus_hallucinated", "gold_hallucinated", "gold_mismatch",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ItemFilter:
    """Which items of a run to list; every field optional (None / False = no filter)."""

    verdict_judge: str | None = None
    verdict: bool | None = None
    """With ``verdict_judge``: the items that judge called hallucinated (True) / clean."""
    split: bool = False
    unscored: bool = False
    gold_mismatch: bool = False
    insufficient: bool = False
    q: str | None = None
    """Case-insensitive text searched for in the judged text."""


@dataclass(frozen=True, slots=True)
class ItemOrder:
    sort: str = "disagreement"
    descending: bool = True


@dataclass(frozen=True, slots=True)
class ItemRow:
    """One item of the items page: its measures, text, and each judge's verdict."""

    item_id: str
    row_number: int
    measures: dict[str, Any]
    text: str
    verdicts: dict[str, bool | None]
    """judge_id -> verdict (None: unscored); judges with no judgment are absent."""


@dataclass(frozen=True, slots=True)
class ItemPage:
    rows: list[ItemRow]
    total: int
    """Items matching the filter (all pages)."""


@dataclass(frozen=True, slots=True)
class Neighbours:
    previous: str | None
    next: str | None
    position: int
    """1-based place of the item in the filtered, sorted list (0: not in it)."""
    total: int
    measures: dict[str, Any]
    """The item's measures (the items page's columns); {} when the run has no such item."""


# Characters json.dumps writes unchanged (printable ASCII but the quote and the backslash).
_SELF_ENCODED = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}


def search_pattern(text: str) -> str:
    """An RE2 pattern matching ``text`` literally, case-insensitively.

    Every ASCII punctuation character is escaped (RE2 takes ``\\`` before any of them as
    the character itself); letters, digits, spaces and non-ASCII characters stand as they
    are, so nothing in ``text`` can act as regex syntax.
    """
    escaped = "".join("\\" + c if c in string.punctuation else c for c in text)
    return "(?si)" + escaped


def _where(f: ItemFilter, params: dict[str, Any]) -> str:
    clauses = []
    for name in ("split", "unscored", "gold_mismatch", "insufficient"):
        if getattr(f, name):
            clauses.append(_FILTERS[name])
    if f.verdict_judge is not None and f.verdict is not None:
        clauses.append(_FILTERS["verdict"])
        params["verdict_judge"] = f.verdict_judge
        params["verdict"] = f.verdict
    if f.q:
        clauses.append(_FILTERS["q_raw" if _SELF_ENCODED.issuperset(f.q) else "q"])
        params["pattern"] = search_pattern(f.q)
    return " AND ".join(clauses) or "true"


def _order(order: ItemOrder) -> str:
    column = SORTS[order.sort]  # KeyError = a caller skipped validation: a bug, not input
    return f"{column} {_DIRECTIONS[order.descending]} NULLS LAST, {_RANK_ORDER}"


def run_judges(con: duckdb.DuckDBPyConnection, run_id: str) -> list[str]:
    """The run's judges in panel order; for a run whose panel lists none, the judges with
    judgments in the run (a scan of the run's judgments, which a page otherwise skips)."""
    row = con.execute("SELECT panel FROM runs WHERE run_id = ?", [run_id]).fetchone()
    panel = json.loads(row[0]) if row and isinstance(row[0], str) else (row[0] if row else {})
    judges = [
        str(j["id"]) for j in (panel or {}).get("judges", []) if isinstance(j, dict) and "id" in j
    ]
    if judges:
        return judges
    found = con.execute(
        "SELECT DISTINCT judge_id FROM judgments WHERE run_id = ? ORDER BY judge_id", [run_id]
    ).fetchall()
    return [str(j) for (j,) in found]


def run_exists(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
    return con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone() == (1,)


def items_page(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    item_filter: ItemFilter,
    order: ItemOrder,
    *,
    limit: int,
    offset: int,
) -> ItemPage:
    """One page of the run's items in ``order``, with the number of items matching."""
    params: dict[str, Any] = {"run": run_id, "limit": limit, "offset": offset}
    where = _where(item_filter, params)
    columns = ", ".join(_ROW_COLUMNS)
    order_by = _order(order)
    if item_filter.q:
        # The search is the costly part: one statement, so that it runs once, its matches
        # kept for the count and the page.
        found = con.execute(
            f"{_MEASURES}, matched AS MATERIALIZED (SELECT {columns} FROM measures WHERE {where}) "
            f"SELECT {columns}, (SELECT count(*) FROM matched) FROM matched "
            f"ORDER BY {order_by} LIMIT $limit OFFSET $offset",
            params,
        ).fetchall()
        if found:
            return _page(con, run_id, found, int(found[0][-1]))
    else:
        # Two statements, not a count(*) OVER () on the page's: a window buffers every
        # column of every matching row, where ORDER BY ... LIMIT keeps only the page's
        # (30-80 ms less at 100,000 items).
        found = con.execute(
            f"{_MEASURES} SELECT {columns} FROM measures "
            f"WHERE {where} ORDER BY {order_by} LIMIT $limit OFFSET $offset",
            params,
        ).fetchall()
    count_params = {k: v for k, v in params.items() if k not in ("limit", "offset")}
    row = con.execute(
        f"{_MEASURES} SELECT count(*) FROM measures WHERE {where}", count_params
    ).fetchone()
    return _page(con, run_id, found, int(row[0]) if row else 0)


def _page(
    con: duckdb.DuckDBPyConnection, run_id: str, found: list[tuple[Any, ...]], total: int
) -> ItemPage:
    ids = [str(r[0]) for r in found]
    texts = item_texts(con, run_id, ids)
    verdicts = item_verdicts(con, run_id, ids)
    rows = [
        ItemRow(
            item_id=str(r[0]),
            row_number=int(r[1]),
            measures=dict(zip(_ROW_COLUMNS, r[: len(_ROW_COLUMNS)], strict=True)),
            text=texts.get(str(r[0]), ""),
            verdicts=verdicts.get(str(r[0]), {}),
        )
        for r in found
    ]
    return ItemPage(rows, total)


def item_texts(
    con: duckdb.DuckDBPyConnection, run_id: str, item_ids: Sequence[str]
) -> dict[str, str]:
    if not item_ids:
        return {}
    found = con.execute(
        f"SELECT i.item_id, {_TEXT} FROM items i "
        "WHERE i.run_id = ? AND i.item_id IN (SELECT unnest(?))",
        [run_id, list(item_ids)],
    ).fetchall()
    return {str(item_id): str(text) for item_id, text in found}


def item_verdicts(
    con: duckdb.DuckDBPyConnection, run_id: str, item_ids: Sequence[str]
) -> dict[str, dict[str, bool | None]]:
    if not item_ids:
        return {}
    found = con.execute(
        "SELECT item_id, judge_id, CASE WHEN score IS NOT NULL THEN verdict END "
        "FROM judgments WHERE run_id = ? AND item_id IN (SELECT unnest(?))",
        [run_id, list(item_ids)],
    ).fetchall()
    verdicts: dict[str, dict[str, bool | None]] = {}
    for item_id, judge_id, verdict in found:
        verdicts.setdefault(str(item_id), {})[str(judge_id)] = (
            None if verdict is None else bool(verdict)
        )
    return verdicts


def neighbours(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    item_id: str,
    item_filter: ItemFilter,
    order: ItemOrder,
) -> Neighbours:
    """The items before and after ``item_id`` among those ``item_filter`` keeps, in
    ``order``, and the item's own measures."""
    params: dict[str, Any] = {"run": run_id, "item": item_id}
    where = _where(item_filter, params)
    # only the ids ride through the window: it buffers every column it is given
    row = con.execute(
        f"{_MEASURES} SELECT previous, following, position, total FROM ("
        "SELECT item_id, lag(item_id) OVER w AS previous, lead(item_id) OVER w AS following, "
        "row_number() OVER w AS position, count(*) OVER () AS total "
        f"FROM measures WHERE {where} WINDOW w AS (ORDER BY {_order(order)})"
        ") WHERE item_id = $item",
        params,
    ).fetchone()
    measures = item_measures(con, run_id, item_id)
    if row is None:  # not among the filtered items
        return Neighbours(None, None, 0, 0, measures)
    previous, following, position, total = row
    return Neighbours(
        None if previous is None else str(previous),
        None if following is None else str(following),
        int(position),
        int(total),
        measures,
    )


# -- one item ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """A judge's span; ``char_start`` / ``char_end`` None when it did not anchor."""

    char_start: int | None
    char_end: int | None
    text: str
    match_kind: str
    requested: str | None
    similarity: float | None


@dataclass(frozen=True, slots=True)
class JudgmentRecord:
    judge_id: str
    provider: str
    model: str | None
    prompt_name: str | None
    output_kind: str
    score: float | None
    verdict: bool | None
    verdict_threshold: float | None
    unscored_reason: str | None
    reasoning: str | None
    raw_output: str | None
    latency_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    attempts: int
    cached: bool
    cache_write_tokens: int | None
    cache_read_tokens: int | None
    spans: tuple[SpanRecord, ...]


@dataclass(frozen=True, slots=True)
class ConsensusSpanRecord:
    char_start: int
    char_end: int
    text: str
    votes: int


@dataclass(frozen=True, slots=True)
class ConsensusRecord:
    status: str
    n_judges: int
    n_answered: int
    n_scored: int
    score: float | None
    score_median: float | None
    score_spread: float | None
    hallucinated: bool | None
    verdict_rule: str | None
    unlocalised: bool
    spans: tuple[ConsensusSpanRecord, ...]


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """Everything stored about one item of a run."""

    run_id: str
    item_id: str
    row_number: int
    variables: dict[str, Any]
    text_variable: str | None
    """``response``, else ``output``: the variable the spans point into (None: neither)."""
    gold_hallucinated: bool | None
    gold_spans: tuple[tuple[int, int], ...] | None
    """None where the item has no usable span labels (the ``gold_labels`` view decides)."""
    judges: tuple[str, ...]
    """The run's judges in panel order (layer ``j<k>`` is ``judges[k]``)."""
    judgments: tuple[JudgmentRecord, ...]
    """In panel order; a judge with no judgment on the item is absent."""
    consensus: ConsensusRecord | None
    skipped: tuple[str, ...] = ()
    """Judges an early-stopping run did not call: the others had already decided the item."""

    @property
    def text(self) -> str:
        return "" if self.text_variable is None else str(self.variables[self.text_variable])


_JUDGMENT_FIELDS = (
    "judge_id", "provider", "model", "prompt_name", "output_kind", "score", "verdict",
    "verdict_threshold", "unscored_reason", "reasoning", "raw_output", "latency_ms",
    "input_tokens", "output_tokens", "cost_usd", "attempts", "cached", "cache_write_tokens",
    "cache_read_tokens",
)  # fmt: skip
_CONSENSUS_FIELDS = (
    "status", "n_judges", "n_answered", "n_scored", "score", "score_median", "score_spread",
    "hallucinated", "verdict_rule", "unlocalised",
)  # fmt: skip


def item_record(con: duckdb.DuckDBPyConnection, run_id: str, item_id: str) -> ItemRecord | None:
    """The item ``item_id`` of the run, or None when the run has no such item."""
    item = con.execute(
        "SELECT i.row_number, i.variables, i.gold_hallucinated, g.gold_spans, "
        "coalesce(g.has_span_labels, false) "
        "FROM items i LEFT JOIN gold_labels g USING (run_id, item_id) "
        "WHERE i.run_id = ? AND i.item_id = ?",
        [run_id, item_id],
    ).fetchone()
    if item is None:
        return None
    row_number, raw_variables, gold_h, raw_gold_spans, has_span_labels = item
    variables = json.loads(raw_variables) if isinstance(raw_variables, str) else raw_variables
    text_variable = next(
        (name for name in ("response", "output") if isinstance(variables.get(name), str)), None
    )
    judges = run_judges(con, run_id)
    spans: dict[str, list[SpanRecord]] = {}
    for judge_id, start, end, text, match, requested, similarity in con.execute(
        "SELECT judge_id, char_start, char_end, text, match_kind, requested, similarity "
        "FROM judgment_spans WHERE run_id = ? AND item_id = ? ORDER BY judge_id, span_index",
        [run_id, item_id],
    ).fetchall():
        spans.setdefault(str(judge_id), []).append(
            SpanRecord(start, end, str(text), str(match), requested, similarity)
        )
    order = {judge: k for k, judge in enumerate(judges)}
    judgments = sorted(
        (
            JudgmentRecord(
                **dict(zip(_JUDGMENT_FIELDS, row, strict=True)),
                spans=tuple(spans.get(str(row[0]), ())),
            )
            for row in con.execute(
                f"SELECT {', '.join(_JUDGMENT_FIELDS)} FROM judgments "
                "WHERE run_id = ? AND item_id = ?",
                [run_id, item_id],
            ).fetchall()
        ),
        key=lambda j: (order.get(j.judge_id, len(order)), j.judge_id),
    )
    gold_spans = None
    if has_span_labels and raw_gold_spans is not None:
        pairs = json.loads(raw_gold_spans) if isinstance(raw_gold_spans, str) else raw_gold_spans
        gold_spans = tuple((int(a), int(b)) for a, b in pairs)
    return ItemRecord(
        run_id=run_id,
        item_id=item_id,
        row_number=int(row_number),
        variables=dict(variables),
        text_variable=text_variable,
        gold_hallucinated=None if gold_h is None else bool(gold_h),
        gold_spans=gold_spans,
        judges=tuple(judges),
        judgments=tuple(judgments),
        consensus=_consensus(con, run_id, item_id),
        skipped=tuple(
            sorted(
                (
                    str(row[0])
                    for row in con.execute(
                        "SELECT judge_id FROM skipped_judgments WHERE run_id = ? AND item_id = ?",
                        [run_id, item_id],
                    ).fetchall()
                ),
                key=lambda judge: (order.get(judge, len(order)), judge),
            )
        ),
    )


def _consensus(con: duckdb.DuckDBPyConnection, run_id: str, item_id: str) -> ConsensusRecord | None:
    row = con.execute(
        f"SELECT {', '.join(_CONSENSUS_FIELDS[:-1])}, coalesce(unlocalised, false) "
        "FROM consensus WHERE run_id = ? AND item_id = ?",
        [run_id, item_id],
    ).fetchone()
    if row is None:
        return None
    spans = tuple(
        ConsensusSpanRecord(int(s), int(e), str(t), int(v))
        for s, e, t, v in con.execute(
            "SELECT char_start, char_end, text, votes FROM consensus_spans "
            "WHERE run_id = ? AND item_id = ? ORDER BY span_index",
            [run_id, item_id],
        ).fetchall()
    )
    return ConsensusRecord(**dict(zip(_CONSENSUS_FIELDS, row, strict=True)), spans=spans)


def item_measures(con: duckdb.DuckDBPyConnection, run_id: str, item_id: str) -> dict[str, Any]:
    """The item's disagreement measures (the items page's columns); {} for no such item."""
    columns = ", ".join(_ROW_COLUMNS)
    row = con.execute(
        f"{_MEASURES} SELECT {columns} FROM measures WHERE item_id = $item",
        {"run": run_id, "item": item_id},
    ).fetchone()
    return {} if row is None else dict(zip(_ROW_COLUMNS, row, strict=True))
