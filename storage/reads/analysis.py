"""The reads behind ``juryflow agreement`` / ``disagreements``: one run's data as arrays.

Every statement juryflow runs to load a run for the agreement maths lives here, with bound
parameters only. What comes out is plain numpy, in the shapes
:mod:`juryflow.maths.agreement` and :mod:`juryflow.maths.gold` take:

- a score matrix ``(n_judges, n_items)`` with NaN where a judge gave no score;
- span sets (:class:`~juryflow.maths.agreement.ItemSpans`: item index, start and end
  columns, straight from DuckDB, plus which items have an answer) per judge, not answered
  where the judge did not answer with spans (it failed, or it is a score-only judge), and
  answered with no span where it flagged nothing;
- the consensus (median, verdict, spans) and the human labels per item, ``NaN`` / not
  answered where there is none.

DuckDB joins the item order and the judge order into every read, so that no Python
object is made per judgment or per span (100,000 items x 5 judges, 1.7 million spans: 0.85 s
on 2 cores, `bench/bench_views.py --report`).

Which gold spans are usable is decided once, by the ``gold_labels`` view (see
:mod:`juryflow.storage.views`), so SQL and numpy compare against the same labels. The gold
source (``--gold``) picks the labels view: ``gold_labels`` (the dataset's),
``annotation_labels`` (reviewers' newest annotations) or ``adjudicated_labels`` (both),
through :data:`juryflow.storage.annotation_labels.LABEL_VIEWS`, never from user text.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import ItemSpans
from juryflow.storage.annotation_labels import LABEL_VIEWS, accuracy_view, labels_view
from juryflow.storage.annotations import GoldSource
from juryflow.storage.connection import StoreError
from juryflow.storage.schema import LATEST_VERSION
from juryflow.storage.store import Store
from juryflow.storage.views import AGREEMENT_VIEWS

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Spans = list[tuple[int, int]]


class RunNotFound(LookupError):
    """The store has no such run (or no run at all)."""


def _check_label_view(store: Store, gold: GoldSource) -> str:
    """The labels view of ``gold``, refusing a store too old to have it (read-only, so
    :func:`ensure_views` could not bring it up to date)."""
    view = labels_view(gold)
    if gold == "dataset":
        return view
    with store.read() as con:
        row = con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE NOT internal AND view_name = ?", [view]
        ).fetchone()
    if not row or not row[0]:
        raise StoreError(
            f"{store.path} predates annotations (no {view} view) and cannot be updated here; "
            "open it once where it is writable, or use --gold dataset"
        )
    return view


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
    """One run, ready for the agreement maths. Judges in panel order, items in row order.

    Span sets are arrays (:class:`ItemSpans`), as DuckDB returns them; ``spans``,
    ``consensus_spans`` and ``gold_spans`` give the same sets as per-item lists, built on
    each access (a Python tuple per span: meant for small runs and callers that need lists).
    """

    info: RunInfo
    item_ids: list[str]
    judge_ids: list[str]
    output_kinds: dict[str, str]
    prompts: dict[str, str | None]
    scores: FloatArray
    """``(n_judges, n_items)``, NaN = no score (unscored or not judged)."""
    verdicts: FloatArray
    """``(n_judges, n_items)`` 0/1, each judge's own verdict (its prompt's threshold)."""
    span_sets: tuple[ItemSpans, ...]
    """One per judge: its anchored spans per item; not answered = no span answer (it
    failed, or it is a score-only judge)."""
    consensus_median: FloatArray
    consensus_verdict: FloatArray
    """0/1 where the consensus is ``ok``, NaN otherwise."""
    consensus_span_set: ItemSpans
    """Not answered where there is no span consensus (insufficient, or no span judge
    answered)."""
    gold_hallucinated: FloatArray
    """0/1, NaN where the item has no human verdict."""
    gold_span_set: ItemSpans
    """Not answered where the item has no usable span labels."""
    consensus_rule: str | None = None
    contradictions: int = 0
    unlocalised: int = 0

    @property
    def spans(self) -> list[list[Spans | None]]:
        """``spans[j][i]``: judge j's anchored spans on item i, None = no span answer."""
        return [s.to_lists() for s in self.span_sets]

    @property
    def consensus_spans(self) -> list[Spans | None]:
        """None where there is no span consensus (insufficient, or no span judge answered)."""
        return self.consensus_span_set.to_lists()

    @property
    def gold_spans(self) -> list[Spans | None]:
        """None where the item has no usable span labels."""
        return self.gold_span_set.to_lists()

    def restricted(self, keep: np.ndarray) -> RunData:
        """The same run over the items where ``keep`` holds (early stopping's audit sample)."""
        keep = np.asarray(keep, dtype=bool)
        return replace(
            self,
            item_ids=[item for item, kept in zip(self.item_ids, keep, strict=True) if kept],
            scores=self.scores[:, keep],
            verdicts=self.verdicts[:, keep],
            span_sets=tuple(s.take(keep) for s in self.span_sets),
            consensus_median=self.consensus_median[keep],
            consensus_verdict=self.consensus_verdict[keep],
            consensus_span_set=self.consensus_span_set.take(keep),
            gold_hallucinated=self.gold_hallucinated[keep],
            gold_span_set=self.gold_span_set.take(keep),
        )

    @property
    def has_gold(self) -> bool:
        return bool((~np.isnan(self.gold_hallucinated)).any()) or self.has_gold_spans

    @property
    def has_gold_spans(self) -> bool:
        return bool(self.gold_span_set.answered.any())


# A store whose views predate the interval helpers still has the character-expanding
# views, which take seconds to minutes on a large run: one migrate replaces them.
_CURRENT_VIEWS = (*AGREEMENT_VIEWS, "judgment_intervals", "consensus_intervals", "gold_intervals")


def ensure_views(store: Store) -> None:
    """Bring a store written by an older juryflow up to date (one migrate): its views, and
    the tables they read (a store at an older schema keeps slower views until then)."""
    with store.read() as con:
        row = con.execute(
            "SELECT count(*) FROM duckdb_views() "
            "WHERE NOT internal AND list_contains(?, view_name)",
            [list(_CURRENT_VIEWS)],
        ).fetchone()
        # A store with the views has a schema version (an empty file has neither).
        complete = row is not None and int(row[0]) == len(_CURRENT_VIEWS)
        version = (
            con.execute("SELECT max(version) FROM schema_version").fetchone() if complete else None
        )
    if not complete:
        store.migrate()
    elif version is None or version[0] is None or int(version[0]) < LATEST_VERSION:
        # The views it has give the same rows, only slower: a store this user cannot
        # write (a shared, read-only copy) is still read.
        with contextlib.suppress(StoreError):
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


# Each item's position in the run (row order), joined into every read so that DuckDB hands
# back item indexes, not item ids to look up one by one.
_ITEM_INDEX = """
    WITH item_index AS (
        SELECT item_id, (row_number() OVER (ORDER BY row_number, item_id) - 1)::BIGINT AS i
        FROM items WHERE run_id = $run
    )
"""

# The human verdict is the column itself (``gold_labels`` passes it through unchanged), so
# the view, which looks at every run's span labels, is not needed here.
_ITEMS = """
    SELECT item_id,
           CASE WHEN gold_hallucinated IS NULL THEN 'NaN'::DOUBLE
                ELSE gold_hallucinated::DOUBLE END AS gold_hallucinated
    FROM items WHERE run_id = $run ORDER BY row_number, item_id
"""

# The other sources' verdicts come from their labels view (items without a label: NaN).
_ITEMS_LABELLED = """
    SELECT i.item_id,
           CASE WHEN g.gold_hallucinated IS NULL THEN 'NaN'::DOUBLE
                ELSE g.gold_hallucinated::DOUBLE END AS gold_hallucinated
    FROM items i LEFT JOIN {labels} g USING (run_id, item_id)
    WHERE i.run_id = $run ORDER BY i.row_number, i.item_id
"""
_ITEMS_BY_SOURCE = {
    source: _ITEMS if source == "dataset" else _ITEMS_LABELLED.format(labels=view)
    for source, view in LABEL_VIEWS.items()
}

# A judge's span answer on an item: scored, and answering with spans.
_JUDGMENTS = (
    _ITEM_INDEX
    + """
    SELECT x.i, (list_position($judges, j.judge_id) - 1)::BIGINT AS j,
           coalesce(j.score, 'NaN'::DOUBLE) AS score,
           coalesce(j.verdict, false)::DOUBLE AS verdict,
           j.score IS NOT NULL AND j.output_kind = 'spans' AS span_answer
    FROM judgments j JOIN item_index x USING (item_id)
    WHERE j.run_id = $run
"""
)

# How often each judge answered with each output kind and prompt, over the run's items:
# the most frequent of each is the judge's (see _modes).
_JUDGE_COUNTS = (
    _ITEM_INDEX
    + """
    SELECT judge_id, output_kind, prompt_name, count(*) AS n
    FROM judgments JOIN item_index USING (item_id)
    WHERE run_id = $run
    GROUP BY ALL
"""
)

# Every anchored span; which ones count (the judgment was scored and answered with spans)
# is decided against the judgment arrays, and their order by numpy (see _sorted_spans):
# both cheaper than a join and a sort of 1.7 million rows in DuckDB.
_JUDGMENT_SPANS = (
    _ITEM_INDEX
    + """
    SELECT (list_position($judges, s.judge_id) - 1)::INTEGER AS j, x.i::INTEGER AS i,
           s.span_index, s.char_start, s.char_end
    FROM judgment_spans s JOIN item_index x USING (item_id)
    WHERE s.run_id = $run AND s.char_start IS NOT NULL AND s.char_end IS NOT NULL
"""
)

_CONSENSUS = (
    _ITEM_INDEX
    + """
    SELECT x.i,
           coalesce(c.score_median, 'NaN'::DOUBLE) AS median,
           CASE WHEN c.hallucinated IS NULL THEN 'NaN'::DOUBLE
                ELSE c.hallucinated::DOUBLE END AS verdict,
           c.n_span_judges > 0 AS span_answer
    FROM consensus c JOIN item_index x USING (item_id)
    WHERE c.run_id = $run AND c.status = 'ok'
"""
)

# Which consensus spans count (an ``ok`` consensus with span judges) and their order are
# decided in numpy, as for the judges' spans.
_CONSENSUS_SPANS = (
    _ITEM_INDEX
    + """
    SELECT x.i, s.span_index, s.char_start, s.char_end
    FROM consensus_spans s JOIN item_index x USING (item_id)
    WHERE s.run_id = $run
"""
)

# Usable span labels (``gold_labels.has_span_labels``): each ``[start, end]`` pair of the
# JSON list as a row, in list order, and one row with ``is_span`` false for an item whose
# list is empty, so that one read says both which items are labelled and where. (The store
# writes whole pairs; anything else is skipped rather than read as garbage from a NULL.)
_GOLD_SPANS = (
    _ITEM_INDEX
    + """
    SELECT i, k, coalesce(pair[1], 0) AS char_start, coalesce(pair[2], 0) AS char_end,
           pair[1] IS NOT NULL AND pair[2] IS NOT NULL AS is_span
    FROM (
        SELECT x.i,
               unnest(CASE WHEN len(p.pairs) > 0 THEN p.pairs ELSE [NULL] END) AS pair,
               unnest(CASE WHEN len(p.pairs) > 0 THEN range(len(p.pairs)) ELSE [0] END) AS k
        FROM (
            SELECT item_id, json_transform(gold_spans, '[["BIGINT"]]') AS pairs
            FROM {labels} WHERE run_id = $run AND has_span_labels
        ) p
        JOIN item_index x USING (item_id)
    )
    ORDER BY i, k
"""
)
_GOLD_SPANS_BY_SOURCE = {
    source: _GOLD_SPANS.format(labels=view) for source, view in LABEL_VIEWS.items()
}


def _ints(column: Any) -> IntArray:
    return np.asarray(column, dtype=np.int64)


def _floats(column: Any) -> FloatArray:
    return np.asarray(column, dtype=np.float64)


def _sorted_spans(
    spans: dict[str, Any], answers: npt.NDArray[np.bool_]
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The spans of span answers (``answers[j, i]``) as (judge, item, start, end) columns,
    ordered by judge, item and span index."""
    judge, item = _ints(spans["j"]), _ints(spans["i"])
    counted = answers[judge, item]
    judge, item, index = judge[counted], item[counted], _ints(spans["span_index"])[counted]
    n_judges, n_items = answers.shape
    if index.size:
        index = index - index.min()
    width = int(index.max()) + 1 if index.size else 1
    if n_judges * n_items * width < 2**62:
        order = np.argsort((judge * n_items + item) * width + index, kind="stable")
    else:  # one key would overflow int64
        order = np.lexsort((index, item, judge))
    start = _ints(spans["char_start"])[counted][order]
    return judge[order], item[order], start, _ints(spans["char_end"])[counted][order]


def _consensus_set(spans: dict[str, Any], answered: npt.NDArray[np.bool_]) -> ItemSpans:
    """The consensus spans of the items with a span consensus, by item and span index."""
    item = _ints(spans["i"])
    counted = answered[item]
    order = np.lexsort((_ints(spans["span_index"])[counted], item[counted]))
    return ItemSpans(
        item[counted][order],
        _ints(spans["char_start"])[counted][order],
        _ints(spans["char_end"])[counted][order],
        answered,
    )


def _gold_set(spans: dict[str, Any], n_items: int) -> ItemSpans:
    """The ``_GOLD_SPANS`` rows as a span set: every item with a row has span labels."""
    item = _ints(spans["i"])
    answered = np.zeros(n_items, dtype=bool)
    answered[item] = True
    is_span = np.asarray(spans["is_span"], dtype=bool)
    return ItemSpans(
        item[is_span],
        _ints(spans["char_start"])[is_span],
        _ints(spans["char_end"])[is_span],
        answered,
    )


def _modes(rows: list[tuple[Any, ...]], column: int) -> dict[str, str]:
    """Each judge's most frequent non-empty value of ``column`` in the ``_JUDGE_COUNTS``
    rows; a tie goes to the first value by name."""
    counts: dict[str, Counter[str]] = {}
    for row in rows:
        if row[column]:
            counts.setdefault(str(row[0]), Counter())[str(row[column])] += int(row[3])
    return {
        judge_id: min(found.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        for judge_id, found in counts.items()
    }


def audit_mask(store: Store, data: RunData) -> np.ndarray | None:
    """Which of the run's items every judge judged, when the run stopped early on others
    (they are its audit sample); None for a run that called every judge on every item."""
    with store.read() as con:
        skipped = con.execute(
            "SELECT count(*) FROM skipped_judgments WHERE run_id = ?", [data.info.run_id]
        ).fetchone()
        if not skipped or not skipped[0]:
            return None
        audit = {
            str(row[0])
            for row in con.execute(
                "SELECT item_id FROM audit_items WHERE run_id = ?", [data.info.run_id]
            ).fetchall()
        }
    return np.asarray([item in audit for item in data.item_ids], dtype=bool)


def load_run_data(store: Store, run_id: str | None = None, gold: GoldSource = "dataset") -> RunData:
    """Everything the agreement report needs about one run, in a few queries, as arrays:
    DuckDB returns item and judge indexes, so nothing is built per span or per judgment.
    ``gold`` says whose labels are the human labels (see :func:`labels_view`)."""
    labels_view(gold)
    info = resolve_run(store, run_id)
    _check_label_view(store, gold)
    rid = info.run_id
    run = {"run": rid}
    with store.read() as con:
        panel_order = _panel_order(con, rid)
        items = con.execute(_ITEMS_BY_SOURCE[gold], run).fetchnumpy()
        seen = {
            str(r[0])
            for r in con.execute(
                "SELECT DISTINCT judge_id FROM judgments WHERE run_id = ?", [rid]
            ).fetchall()
        }
        judge_ids = [j for j in panel_order if j in seen] + sorted(seen - set(panel_order))
        by_judge = {"run": rid, "judges": judge_ids}
        judgments = con.execute(_JUDGMENTS, by_judge).fetchnumpy()
        judge_counts = con.execute(_JUDGE_COUNTS, run).fetchall()
        spans = con.execute(_JUDGMENT_SPANS, by_judge).fetchnumpy()
        consensus = con.execute(_CONSENSUS, run).fetchnumpy()
        consensus_spans = con.execute(_CONSENSUS_SPANS, run).fetchnumpy()
        gold_spans = con.execute(_GOLD_SPANS_BY_SOURCE[gold], run).fetchnumpy()
        coherence = con.execute(
            "SELECT count(*) FILTER (WHERE c.unlocalised), "
            "count(*) FILTER (WHERE NOT c.hallucinated AND EXISTS (SELECT 1 FROM "
            "consensus_spans s WHERE s.run_id = c.run_id AND s.item_id = c.item_id)) "
            "FROM consensus c WHERE c.run_id = ? AND c.status = 'ok'",
            [rid],
        ).fetchone()
        rule_row = con.execute("SELECT consensus FROM runs WHERE run_id = ?", [rid]).fetchone()

    kinds, prompts = _modes(judge_counts, 1), _modes(judge_counts, 2)
    item_ids = [str(i) for i in items["item_id"].tolist()]
    n_judges, n_items = len(judge_ids), len(item_ids)

    i, j = _ints(judgments["i"]), _ints(judgments["j"])
    score = _floats(judgments["score"])
    scores = np.full((n_judges, n_items), np.nan)
    verdicts = np.full((n_judges, n_items), np.nan)
    scored = ~np.isnan(score)
    scores[j[scored], i[scored]] = score[scored]
    verdicts[j[scored], i[scored]] = _floats(judgments["verdict"])[scored]
    span_answer = np.asarray(judgments["span_answer"], dtype=bool)

    span_answers = np.zeros((n_judges, n_items), dtype=bool)
    span_answers[j[span_answer], i[span_answer]] = True
    span_judge, span_item, span_start, span_end = _sorted_spans(spans, span_answers)
    cuts = np.searchsorted(span_judge, np.arange(n_judges + 1)).tolist()
    span_sets = tuple(
        ItemSpans(
            span_item[cuts[k] : cuts[k + 1]],
            span_start[cuts[k] : cuts[k + 1]],
            span_end[cuts[k] : cuts[k + 1]],
            span_answers[k],
        )
        for k in range(n_judges)
    )

    c_item = _ints(consensus["i"])
    median = np.full(n_items, np.nan)
    verdict = np.full(n_items, np.nan)
    median[c_item] = _floats(consensus["median"])
    verdict[c_item] = _floats(consensus["verdict"])
    answered = np.zeros(n_items, dtype=bool)
    answered[c_item[np.asarray(consensus["span_answer"], dtype=bool)]] = True

    return RunData(
        info=info,
        item_ids=item_ids,
        judge_ids=judge_ids,
        output_kinds={judge_id: kinds.get(judge_id, "") for judge_id in judge_ids},
        prompts={judge_id: prompts.get(judge_id) for judge_id in judge_ids},
        scores=scores,
        verdicts=verdicts,
        span_sets=span_sets,
        consensus_median=median,
        consensus_verdict=verdict,
        consensus_span_set=_consensus_set(consensus_spans, answered),
        gold_hallucinated=_floats(items["gold_hallucinated"]),
        gold_span_set=_gold_set(gold_spans, n_items),
        consensus_rule=_rule_text(rule_row[0] if rule_row else None),
        contradictions=int(coherence[1]) if coherence else 0,
        unlocalised=int(coherence[0]) if coherence else 0,
    )


def _rule_text(raw: Any) -> str | None:
    from juryflow.maths.reducers import ConsensusRule, RuleError

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
    # The view's consensus score is the median; the run's own rule's (a pairwise panel's
    # preference) is read beside it.
    columns, rows = store.query(
        f"SELECT {_DISAGREEMENT_COLUMNS}, (SELECT c.score FROM consensus c "
        "WHERE c.run_id = d.run_id AND c.item_id = d.item_id) AS consensus_rule_score "
        "FROM item_disagreement d WHERE run_id = ? ORDER BY disagreement_rank LIMIT ?",
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


def item_details(
    store: Store, run_id: str, item_ids: Sequence[str], gold: GoldSource = "dataset"
) -> dict[str, ItemDetail]:
    """Judgments with their spans, consensus spans and gold labels (of gold source
    ``gold``) of some items of a run."""
    if not item_ids:
        return {}
    wanted = list(item_ids)
    labels = _check_label_view(store, gold)
    with store.read() as con:
        items = con.execute(
            "SELECT i.item_id, coalesce(i.variables->>'response', i.variables->>'output', ''), "
            "g.gold_hallucinated, g.gold_spans, coalesce(g.has_span_labels, false) "
            f"FROM items i LEFT JOIN {labels} g USING (run_id, item_id) "
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


def judge_accuracy_rows(
    store: Store, run_id: str, gold: GoldSource = "dataset"
) -> list[dict[str, Any]]:
    """The ``judge_accuracy`` view's rows (or its twin against gold source ``gold``)."""
    view = accuracy_view(gold)
    columns, rows = store.query(
        f"SELECT * FROM {view} WHERE run_id = ? ORDER BY judge_id", [run_id]
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


# -- calibration -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CalibrationRows:
    """A labelled run as rows, for :func:`juryflow.analysis.calibrate.calibration_data`."""

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
    store: Store, run_id: str | None, group_column: str | None, gold: GoldSource = "dataset"
) -> CalibrationRows:
    data = load_run_data(store, run_id, gold)
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


JUDGE_COSTS_SQL = """
SELECT judge_id, sum(cost_usd) / count(DISTINCT item_id) AS per_item
FROM judgments WHERE run_id = ? AND cost_usd IS NOT NULL
GROUP BY judge_id HAVING sum(cost_usd) > 0
"""


def judge_costs(store: Store, run_id: str) -> dict[str, float]:
    """USD per item each priced judge cost in RUN (its cached answers at the price of the
    call that made them: what keeping the judge costs); unpriced judges are absent."""
    with store.read() as con:
        rows = con.execute(JUDGE_COSTS_SQL, [run_id]).fetchall()
    return {str(judge): float(cost) for judge, cost in rows}
