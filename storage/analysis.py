"""The reads behind ``juryflow agreement`` / ``disagreements``: one run's data as arrays.

Every statement juryflow runs to load a run for the agreement maths lives here, with bound
parameters only. What comes out is plain numpy and lists, in the shapes
:mod:`juryflow.judges.agreement` and :mod:`juryflow.judges.gold` take:

- a score matrix ``(n_judges, n_items)`` with NaN where a judge gave no score;
- span lists per judge per item, ``None`` where the judge did not answer with spans (it
  failed, or it is a score-only judge), ``[]`` where it answered and flagged nothing;
- the consensus (median, verdict, spans) and the human labels per item, ``NaN`` / ``None``
  where there is none.

Which gold spans are usable is decided once, by the ``gold_labels`` view (see
:mod:`juryflow.storage.views`), so SQL and numpy compare against the same labels.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.storage.store import Store
from juryflow.storage.views import AGREEMENT_VIEWS

FloatArray = npt.NDArray[np.float64]
Spans = list[tuple[int, int]]


class RunNotFound(LookupError):
    """The store has no such run (or no run at all)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    status: str
    dataset: str | None
    panel_name: str
    n_judges: int
    quorum: int


@dataclass(frozen=True, slots=True)
class RunData:
    """One run, ready for the agreement maths. Judges in panel order, items in row order."""

    info: RunInfo
    item_ids: list[str]
    judge_ids: list[str]
    output_kinds: dict[str, str]
    prompts: dict[str, str | None]
    scores: FloatArray
    """``(n_judges, n_items)``, NaN = no score (unscored or not judged)."""
    verdicts: FloatArray
    """``(n_judges, n_items)`` 0/1, each judge's own verdict (its prompt's threshold)."""
    spans: list[list[Spans | None]]
    """``spans[j][i]``: judge j's anchored spans on item i, None = no span answer."""
    consensus_median: FloatArray
    consensus_verdict: FloatArray
    """0/1 where the consensus is ``ok``, NaN otherwise."""
    consensus_spans: list[Spans | None]
    """None where there is no span consensus (insufficient, or no span judge answered)."""
    gold_hallucinated: FloatArray
    """0/1, NaN where the item has no human verdict."""
    gold_spans: list[Spans | None]
    """None where the item has no usable span labels."""
    consensus_rule: str | None = None
    contradictions: int = 0
    unlocalised: int = 0

    @property
    def has_gold(self) -> bool:
        return bool((~np.isnan(self.gold_hallucinated)).any()) or any(
            g is not None for g in self.gold_spans
        )

    @property
    def has_gold_spans(self) -> bool:
        return any(g is not None for g in self.gold_spans)


# A store whose views predate the interval helpers still has the character-expanding
# views, which take seconds to minutes on a large run: one migrate replaces them.
_CURRENT_VIEWS = (*AGREEMENT_VIEWS, "judgment_intervals", "consensus_intervals", "gold_intervals")


def ensure_views(store: Store) -> None:
    """Create the agreement views in a store written before they existed (one migrate)."""
    with store.read() as con:
        row = con.execute(
            "SELECT count(*) FROM duckdb_views() "
            "WHERE NOT internal AND list_contains(?, view_name)",
            [list(_CURRENT_VIEWS)],
        ).fetchone()
    if row is None or int(row[0]) < len(_CURRENT_VIEWS):
        store.migrate()


def resolve_run(store: Store, run_id: str | None) -> RunInfo:
    """The run to analyse: ``run_id``, or the latest run in the store when it is None."""
    ensure_views(store)
    with store.read() as con:
        if run_id is None:
            row = con.execute(
                "SELECT run_id, status, dataset, panel_name, n_judges, quorum FROM runs "
                "ORDER BY started_at DESC, run_id DESC LIMIT 1"
            ).fetchone()
            if row is None:
                raise RunNotFound(f"no run in {store.path}: start one with `juryflow run`")
        else:
            row = con.execute(
                "SELECT run_id, status, dataset, panel_name, n_judges, quorum FROM runs "
                "WHERE run_id = ?",
                [run_id],
            ).fetchone()
            if row is None:
                raise RunNotFound(f"no run {run_id!r} in {store.path}")
    return RunInfo(str(row[0]), str(row[1]), row[2], str(row[3]), int(row[4]), int(row[5]))


def _panel_order(con: Any, run_id: str) -> list[str]:
    row = con.execute("SELECT panel FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if row is None or row[0] is None:
        return []
    panel = json.loads(row[0]) if isinstance(row[0], str) else row[0]
    return [str(j["id"]) for j in panel.get("judges", []) if isinstance(j, dict) and "id" in j]


def _pairs(raw: Any) -> Spans:
    values = json.loads(raw) if isinstance(raw, str) else raw
    return [(int(a), int(b)) for a, b in values or []]


def load_run_data(store: Store, run_id: str | None = None) -> RunData:
    """Everything the agreement report needs about one run, in a few queries."""
    info = resolve_run(store, run_id)
    rid = info.run_id
    with store.read() as con:
        panel_order = _panel_order(con, rid)
        items = con.execute(
            "SELECT i.item_id, g.gold_hallucinated, g.gold_spans, coalesce(g.has_span_labels, "
            "false) FROM items i LEFT JOIN gold_labels g USING (run_id, item_id) "
            "WHERE i.run_id = ? ORDER BY i.row_number, i.item_id",
            [rid],
        ).fetchall()
        judgments = con.execute(
            "SELECT item_id, judge_id, output_kind, score, prompt_name, verdict FROM judgments "
            "WHERE run_id = ?",
            [rid],
        ).fetchall()
        spans = con.execute(
            "SELECT s.item_id, s.judge_id, s.char_start, s.char_end FROM judgment_spans s "
            "WHERE s.run_id = ? AND s.char_start IS NOT NULL AND s.char_end IS NOT NULL "
            "ORDER BY s.item_id, s.judge_id, s.span_index",
            [rid],
        ).fetchall()
        consensus = con.execute(
            "SELECT item_id, status, score_median, hallucinated, n_span_judges FROM consensus "
            "WHERE run_id = ?",
            [rid],
        ).fetchall()
        coherence = con.execute(
            "SELECT count(*) FILTER (WHERE c.unlocalised), "
            "count(*) FILTER (WHERE NOT c.hallucinated AND EXISTS (SELECT 1 FROM "
            "consensus_spans s WHERE s.run_id = c.run_id AND s.item_id = c.item_id)) "
            "FROM consensus c WHERE c.run_id = ? AND c.status = 'ok'",
            [rid],
        ).fetchone()
        rule_row = con.execute("SELECT consensus FROM runs WHERE run_id = ?", [rid]).fetchone()
        consensus_spans = con.execute(
            "SELECT item_id, char_start, char_end FROM consensus_spans WHERE run_id = ? "
            "ORDER BY item_id, span_index",
            [rid],
        ).fetchall()

    item_ids = [str(r[0]) for r in items]
    item_index = {item_id: i for i, item_id in enumerate(item_ids)}
    seen = {str(r[1]) for r in judgments}
    judge_ids = [j for j in panel_order if j in seen] + sorted(seen - set(panel_order))
    judge_index = {judge_id: j for j, judge_id in enumerate(judge_ids)}
    n_judges, n_items = len(judge_ids), len(item_ids)

    kinds: dict[str, Counter[str]] = {j: Counter() for j in judge_ids}
    prompt_votes: dict[str, Counter[str]] = {j: Counter() for j in judge_ids}
    scores = np.full((n_judges, n_items), np.nan)
    verdicts = np.full((n_judges, n_items), np.nan)
    span_lists: list[list[Spans | None]] = [[None] * n_items for _ in judge_ids]
    for item_id, judge_id, output_kind, score, prompt_name, verdict in judgments:
        if item_id not in item_index:
            continue
        j, i = judge_index[judge_id], item_index[item_id]
        kinds[judge_id][str(output_kind)] += 1
        if prompt_name:
            prompt_votes[judge_id][str(prompt_name)] += 1
        if score is not None:
            scores[j, i] = float(score)
            verdicts[j, i] = float(bool(verdict))
            if output_kind == "spans":
                span_lists[j][i] = []
    for item_id, judge_id, start, end in spans:
        if item_id in item_index and judge_id in judge_index:
            answered = span_lists[judge_index[judge_id]][item_index[item_id]]
            if answered is not None:
                answered.append((int(start), int(end)))

    median = np.full(n_items, np.nan)
    verdict = np.full(n_items, np.nan)
    cons_spans: list[Spans | None] = [None] * n_items
    for item_id, status, score_median, hallucinated, n_span_judges in consensus:
        if item_id not in item_index or status != "ok":
            continue
        i = item_index[item_id]
        if score_median is not None:
            median[i] = float(score_median)
        if hallucinated is not None:
            verdict[i] = float(bool(hallucinated))
        if n_span_judges:
            cons_spans[i] = []
    for item_id, start, end in consensus_spans:
        if item_id in item_index:
            answered = cons_spans[item_index[item_id]]
            if answered is not None:
                answered.append((int(start), int(end)))

    gold_h = np.array(
        [np.nan if r[1] is None else float(bool(r[1])) for r in items], dtype=np.float64
    )
    gold_spans: list[Spans | None] = [_pairs(r[2]) if r[3] else None for r in items]

    return RunData(
        info=info,
        item_ids=item_ids,
        judge_ids=judge_ids,
        output_kinds={j: (kinds[j].most_common(1)[0][0] if kinds[j] else "") for j in judge_ids},
        prompts={
            j: (prompt_votes[j].most_common(1)[0][0] if prompt_votes[j] else None)
            for j in judge_ids
        },
        scores=scores,
        verdicts=verdicts,
        spans=span_lists,
        consensus_median=median,
        consensus_verdict=verdict,
        consensus_spans=cons_spans,
        gold_hallucinated=gold_h,
        gold_spans=gold_spans,
        consensus_rule=_rule_text(rule_row[0] if rule_row else None),
        contradictions=int(coherence[1]) if coherence else 0,
        unlocalised=int(coherence[0]) if coherence else 0,
    )


def _rule_text(raw: Any) -> str | None:
    from juryflow.judges.reducers import ConsensusRule, RuleError

    if raw is None:
        return None
    try:
        return str(ConsensusRule.from_dict(json.loads(raw) if isinstance(raw, str) else raw))
    except RuleError:
        return "(unreadable rule)"


# -- the disputed items ----------------------------------------------------------------

_DISAGREEMENT_COLUMNS = (
    "disagreement_rank, item_id, disagreement, score_spread, score_stddev, verdict_split, "
    "split_verdict, n_hallucinated_verdicts, n_clean_verdicts, n_scored, n_span_judges, "
    "span_disagreement, consensus_status, consensus_score, consensus_hallucinated, "
    "gold_hallucinated"
)


def top_disagreements(store: Store, run_id: str, top: int) -> list[dict[str, Any]]:
    """The ``top`` rows of the ``item_disagreement`` view for a run, most disputed first."""
    columns, rows = store.query(
        f"SELECT {_DISAGREEMENT_COLUMNS} FROM item_disagreement WHERE run_id = ? "
        "ORDER BY disagreement_rank LIMIT ?",
        [run_id, max(int(top), 0)],
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


@dataclass(frozen=True, slots=True)
class ItemDetail:
    """What the judges, the consensus and the humans said about one item."""

    text: str
    judgments: list[dict[str, Any]]
    """judge_id, output_kind, score, verdict, unscored_reason, spans [(start, end, text, match)]."""
    consensus_spans: list[tuple[int, int, str, int]]
    gold_hallucinated: bool | None
    gold_spans: list[tuple[int, int]] | None


def item_details(store: Store, run_id: str, item_ids: Sequence[str]) -> dict[str, ItemDetail]:
    """Judgments with their spans, consensus spans and gold labels of some items of a run."""
    if not item_ids:
        return {}
    wanted = list(item_ids)
    with store.read() as con:
        items = con.execute(
            "SELECT i.item_id, coalesce(i.variables->>'response', i.variables->>'output', ''), "
            "g.gold_hallucinated, g.gold_spans, coalesce(g.has_span_labels, false) "
            "FROM items i LEFT JOIN gold_labels g USING (run_id, item_id) "
            "WHERE i.run_id = ? AND list_contains(?, i.item_id)",
            [run_id, wanted],
        ).fetchall()
        judgments = con.execute(
            "SELECT item_id, judge_id, output_kind, score, verdict, unscored_reason "
            "FROM judgments WHERE run_id = ? AND list_contains(?, item_id)",
            [run_id, wanted],
        ).fetchall()
        spans = con.execute(
            "SELECT item_id, judge_id, char_start, char_end, text, match_kind "
            "FROM judgment_spans WHERE run_id = ? AND list_contains(?, item_id) "
            "ORDER BY item_id, judge_id, span_index",
            [run_id, wanted],
        ).fetchall()
        consensus_spans = con.execute(
            "SELECT item_id, char_start, char_end, text, votes FROM consensus_spans "
            "WHERE run_id = ? AND list_contains(?, item_id) ORDER BY item_id, span_index",
            [run_id, wanted],
        ).fetchall()
        panel_order = _panel_order(con, run_id)

    by_judge: dict[tuple[str, str], list[tuple[int | None, int | None, str, str]]] = {}
    for item_id, judge_id, start, end, text, match in spans:
        by_judge.setdefault((item_id, judge_id), []).append((start, end, text, match))
    order = {judge_id: k for k, judge_id in enumerate(panel_order)}
    rows: dict[str, list[dict[str, Any]]] = {}
    for item_id, judge_id, kind, score, verdict, reason in sorted(
        judgments, key=lambda r: (order.get(r[1], len(order)), r[1])
    ):
        rows.setdefault(item_id, []).append(
            {
                "judge_id": judge_id,
                "output_kind": kind,
                "score": score,
                "verdict": verdict,
                "unscored_reason": reason,
                "spans": by_judge.get((item_id, judge_id), []),
            }
        )
    cons: dict[str, list[tuple[int, int, str, int]]] = {}
    for item_id, start, end, text, votes in consensus_spans:
        cons.setdefault(item_id, []).append((int(start), int(end), str(text), int(votes)))
    return {
        str(item_id): ItemDetail(
            text=str(text),
            judgments=rows.get(item_id, []),
            consensus_spans=cons.get(item_id, []),
            gold_hallucinated=None if gold_h is None else bool(gold_h),
            gold_spans=_pairs(gold_spans) if has_spans else None,
        )
        for item_id, text, gold_h, gold_spans, has_spans in items
    }


# -- the views, for tests and for users of the Python API ------------------------------


def judge_pair_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    columns, rows = store.query(
        "SELECT * FROM judge_pair_agreement WHERE run_id = ? ORDER BY judge_a, judge_b",
        [run_id],
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


def judge_bias_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    columns, rows = store.query(
        "SELECT * FROM judge_bias WHERE run_id = ? ORDER BY judge_id", [run_id]
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


def judge_accuracy_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    columns, rows = store.query(
        "SELECT * FROM judge_accuracy WHERE run_id = ? ORDER BY judge_id", [run_id]
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


# -- calibration -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CalibrationRows:
    """A labelled run as rows, for :func:`juryflow.calibrate.calibration_data`."""

    info: RunInfo
    judge_ids: list[str]
    output_kinds: dict[str, str]
    item_ids: list[str]
    texts: list[str]
    groups: list[str]
    group_column: str | None
    judgments: list[tuple[str, str, float | None, bool | None]]
    """(item_id, judge_id, score, verdict)."""
    spans: list[tuple[str, str, int, int]]
    """Voting spans (anchored, not ambiguous): (item_id, judge_id, start, end)."""
    gold_hallucinated: list[bool | None]
    gold_spans: list[Spans | None]


GROUP_COLUMNS = ("group", "source_id", "source")
"""Item metadata columns that name a response's source, tried in this order."""


def calibration_rows(
    store: Store, run_id: str | None, group_column: str | None
) -> CalibrationRows:
    data = load_run_data(store, run_id)
    rid = data.info.run_id
    with store.read() as con:
        items = con.execute(
            "SELECT item_id, coalesce(variables->>'response', variables->>'output', ''), "
            "metadata FROM items WHERE run_id = ? ORDER BY row_number, item_id",
            [rid],
        ).fetchall()
        judgments = con.execute(
            "SELECT item_id, judge_id, score, verdict FROM judgments WHERE run_id = ?", [rid]
        ).fetchall()
        spans = con.execute(
            "SELECT s.item_id, s.judge_id, s.char_start, s.char_end FROM judgment_spans s "
            "JOIN judgments j USING (run_id, item_id, judge_id) "
            "WHERE s.run_id = ? AND j.score IS NOT NULL AND s.char_start IS NOT NULL "
            "AND s.char_end > s.char_start AND s.match_kind <> 'ambiguous'",
            [rid],
        ).fetchall()
    metadata = [json.loads(m) if isinstance(m, str) else (m or {}) for _, _, m in items]
    if group_column is None:
        present = {key for m in metadata for key in m}
        group_column = next((c for c in GROUP_COLUMNS if c in present), None)
    elif not any(group_column in m for m in metadata):
        known = sorted({key for m in metadata for key in m})
        raise RunNotFound(
            f"--group {group_column}: the run's items have no such column "
            f"(item columns kept: {', '.join(known) or 'none'})"
        )
    groups = [
        str(m.get(group_column, item_id)) if group_column else str(item_id)
        for (item_id, _, _), m in zip(items, metadata, strict=True)
    ]
    gold_h = [None if np.isnan(g) else bool(g) for g in data.gold_hallucinated]
    return CalibrationRows(
        info=data.info,
        judge_ids=data.judge_ids,
        output_kinds=data.output_kinds,
        item_ids=[str(r[0]) for r in items],
        texts=[str(r[1]) for r in items],
        groups=groups,
        group_column=group_column,
        judgments=[(str(a), str(b), c, d) for a, b, c, d in judgments],
        spans=[(str(a), str(b), int(c), int(d)) for a, b, c, d in spans],
        gold_hallucinated=gold_h,
        gold_spans=data.gold_spans,
    )
