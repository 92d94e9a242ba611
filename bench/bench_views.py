"""The span agreement views and ``juryflow agreement`` at scale (targets: <= 1 s per view over
1,000,000 judgments, <= 2 s for the agreement report at 100,000 items x 5 judges).

Usage: python bench/bench_views.py [--items 100000] [--judges 5] [--batch-items 10000]
           [--repeats 3] [--seed 7] [--baseline] [--report]

Builds a store the way runs do (Store.insert_items / insert_judgments / insert_consensus,
one transaction per batch), seeded: every judge answers with spans, 3-5 spans of 30-110
characters around two per-item hot spots of a 3,000-character response (about 300 flagged
characters per judgment, judges partly overlapping, spans of one judge sometimes
overlapping each other); ~3 % of judgments are unscored; every item has a consensus row
(with 1-2 disjoint consensus spans where it is flagged) and gold labels (half hallucinated,
1-3 spans). Then times on one read-only connection, ``--repeats`` times each (cold, best,
worst): each view read whole for the run, and with ``--report`` the ``juryflow agreement``
path, :func:`juryflow.analysis.agreement_report.agreement_report`, split into loading and maths.

``--baseline`` also installs the span views as they were before issue 12 (spans merged into
intervals at query time, kept below as SQL text, views named ``baseline_*``), times them
once and checks that both versions give the same rows (integers equal, floats to 1e-12:
sums of floats may add up in another order). They take seconds from 100,000 items up.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

from juryflow.maths.records import Consensus, ConsensusSpan, GoldLabels, Item, Judgment, Span
from juryflow.storage.store import RunRecord, Store

VIEW_TARGET_S = 1.0
REPORT_TARGET_S = 2.0
RUN_ID = "bench-views"
LENGTH = 3000

# Whole-view reads for one run: the small views fetched whole, item_disagreement counted
# (it has a row per item).
QUERIES = {
    "item_disagreement": "SELECT count(*), sum(chars_any) FROM item_disagreement WHERE run_id = ?",
    "judge_pair_agreement": "SELECT * FROM judge_pair_agreement WHERE run_id = ? ORDER BY ALL",
    "judge_bias": "SELECT * FROM judge_bias WHERE run_id = ? ORDER BY ALL",
    "judge_accuracy": "SELECT * FROM judge_accuracy WHERE run_id = ? ORDER BY ALL",
}
BASELINE_VIEWS = ("judge_pair_agreement", "judge_bias", "judge_accuracy")

# The span views before issue 12, verbatim from storage/views.py: spans merged into disjoint
# intervals at query time (the ``*_intervals`` helper views) and overlaps found by interval
# joins. The reference the stored ``span_sets`` / ``span_overlaps`` must reproduce
# (tests/test_view_overlaps.py installs it too).
BASELINE_SQL = """
    CREATE OR REPLACE VIEW judge_pair_agreement AS
    WITH intervals AS MATERIALIZED (SELECT * FROM judgment_intervals),
    item_chars AS (
        SELECT run_id, item_id, judge_id, sum(char_end - char_start)::BIGINT AS n_chars
        FROM intervals GROUP BY run_id, item_id, judge_id
    ),
    -- the character counts ride along the pairs: one self-join instead of two lookups
    answered AS (
        SELECT j.run_id, j.item_id, j.judge_id, j.score, j.verdict,
               j.output_kind = 'spans' AS spans, coalesce(c.n_chars, 0) AS n_chars
        FROM judgments j LEFT JOIN item_chars c USING (run_id, item_id, judge_id)
        WHERE j.score IS NOT NULL
    ),
    pairs AS (
        SELECT a.run_id, a.judge_id AS judge_a, b.judge_id AS judge_b, a.item_id,
               a.score AS score_a, b.score AS score_b,
               a.verdict AS verdict_a, b.verdict AS verdict_b,
               a.spans AND b.spans AS both_spans,
               a.n_chars AS chars_a, b.n_chars AS chars_b
        FROM answered a
        JOIN answered b
          ON a.run_id = b.run_id AND a.item_id = b.item_id AND a.judge_id < b.judge_id
    ),
    verdicts AS (
        SELECT run_id, judge_a, judge_b,
               count(*) AS n_items,
               avg((verdict_a = verdict_b)::DOUBLE) AS verdict_agreement,
               avg(verdict_a::DOUBLE) AS flag_rate_a,
               avg(verdict_b::DOUBLE) AS flag_rate_b,
               count(*) FILTER (WHERE verdict_a AND verdict_b) AS both_flagged,
               count(*) FILTER (WHERE verdict_a <> verdict_b) AS split_items,
               avg(abs(score_a - score_b)) AS mean_abs_score_diff,
               count(*) FILTER (WHERE both_spans) AS n_span_items,
               sum(chars_a) FILTER (WHERE both_spans) AS chars_a,
               sum(chars_b) FILTER (WHERE both_spans) AS chars_b
        FROM pairs GROUP BY run_id, judge_a, judge_b
    ),
    overlap AS (
        -- each set is disjoint, so the intersections of their intervals add up
        SELECT a.run_id, a.judge_id AS judge_a, b.judge_id AS judge_b,
               sum(least(a.char_end, b.char_end) - greatest(a.char_start, b.char_start))::BIGINT
                   AS overlap_chars
        FROM intervals a
        JOIN intervals b
          ON a.run_id = b.run_id AND a.item_id = b.item_id AND a.judge_id < b.judge_id
         AND a.char_start < b.char_end AND b.char_start < a.char_end
        GROUP BY a.run_id, a.judge_id, b.judge_id
    ),
    kappa AS (
        SELECT *,
               flag_rate_a * flag_rate_b + (1 - flag_rate_a) * (1 - flag_rate_b)
                   AS chance_agreement
        FROM verdicts
    )
    SELECT k.run_id, k.judge_a, k.judge_b, k.n_items, k.verdict_agreement,
           CASE WHEN k.chance_agreement < 1 THEN
               (k.verdict_agreement - k.chance_agreement) / (1 - k.chance_agreement)
           END AS cohen_kappa,
           k.both_flagged, k.split_items, k.mean_abs_score_diff,
           k.n_span_items,
           CASE WHEN k.n_span_items > 0 THEN coalesce(o.overlap_chars, 0) END
               AS overlap_chars,
           k.chars_a, k.chars_b,
           CASE WHEN k.chars_a + k.chars_b > 0 THEN
               2.0 * coalesce(o.overlap_chars, 0) / (k.chars_a + k.chars_b)
           END AS span_f1,
           CASE WHEN k.chars_a + k.chars_b > 0 THEN
               coalesce(o.overlap_chars, 0)
               / (k.chars_a + k.chars_b - coalesce(o.overlap_chars, 0))
           END AS span_jaccard
    FROM kappa k
    LEFT JOIN overlap o USING (run_id, judge_a, judge_b)

    CREATE OR REPLACE VIEW judge_bias AS
    WITH joined AS (
        SELECT j.run_id, j.judge_id, j.item_id, j.score, j.verdict, j.output_kind,
               c.score_median, c.hallucinated AS consensus_hallucinated,
               (j.score IS NOT NULL AND j.output_kind = 'spans' AND c.status = 'ok'
                AND c.n_span_judges > 0) AS span_item
        FROM judgments j LEFT JOIN consensus c USING (run_id, item_id)
    ),
    per_judge AS (
        SELECT run_id, judge_id,
               count(*) AS n_items,
               count(score) AS n_scored,
               count(*) - count(score) AS n_unscored,
               avg(score) AS mean_score,
               avg(verdict::DOUBLE) AS flag_rate,
               count(score - score_median) AS n_vs_consensus,
               avg(score - score_median) AS bias,
               avg(abs(score - score_median)) AS mean_abs_deviation,
               avg((verdict = consensus_hallucinated)::DOUBLE) AS consensus_verdict_agreement,
               count(*) FILTER (WHERE span_item) AS n_span_items
        FROM joined GROUP BY run_id, judge_id
    ),
    span_items AS (
        SELECT run_id, judge_id, item_id FROM joined WHERE span_item
    ),
    judge_iv AS MATERIALIZED (
        SELECT run_id, judge_id, item_id, c.char_start, c.char_end
        FROM span_items s JOIN judgment_intervals c USING (run_id, item_id, judge_id)
    ),
    judge_chars AS (
        SELECT run_id, judge_id, sum(char_end - char_start)::BIGINT AS judge_chars
        FROM judge_iv GROUP BY run_id, judge_id
    ),
    panel_chars AS (
        SELECT s.run_id, s.judge_id, sum(c.char_end - c.char_start)::BIGINT AS consensus_chars
        FROM span_items s JOIN consensus_intervals c USING (run_id, item_id)
        GROUP BY s.run_id, s.judge_id
    ),
    overlap AS (
        SELECT j.run_id, j.judge_id,
               sum(least(j.char_end, c.char_end) - greatest(j.char_start, c.char_start))::BIGINT
                   AS overlap_chars
        FROM judge_iv j
        JOIN consensus_intervals c
          ON c.run_id = j.run_id AND c.item_id = j.item_id
         AND j.char_start < c.char_end AND c.char_start < j.char_end
        GROUP BY j.run_id, j.judge_id
    )
    SELECT p.run_id, p.judge_id, p.n_items, p.n_scored, p.n_unscored, p.mean_score,
           p.flag_rate, p.n_vs_consensus, p.bias, p.mean_abs_deviation,
           p.consensus_verdict_agreement, p.n_span_items,
           CASE WHEN p.n_span_items > 0 THEN coalesce(o.overlap_chars, 0) END
               AS overlap_chars,
           CASE WHEN p.n_span_items > 0 THEN coalesce(jc.judge_chars, 0) END AS judge_chars,
           CASE WHEN p.n_span_items > 0 THEN coalesce(pc.consensus_chars, 0) END
               AS consensus_chars,
           CASE WHEN coalesce(jc.judge_chars, 0) + coalesce(pc.consensus_chars, 0) > 0 THEN
               2.0 * coalesce(o.overlap_chars, 0)
               / (coalesce(jc.judge_chars, 0) + coalesce(pc.consensus_chars, 0))
           END AS consensus_span_f1
    FROM per_judge p
    LEFT JOIN judge_chars jc USING (run_id, judge_id)
    LEFT JOIN panel_chars pc USING (run_id, judge_id)
    LEFT JOIN overlap o USING (run_id, judge_id)

    CREATE OR REPLACE VIEW judge_accuracy AS
    WITH predictors AS (
        SELECT run_id, judge_id, bool_or(output_kind = 'spans') AS span_predictor
        FROM judgments GROUP BY run_id, judge_id
        UNION ALL
        SELECT run_id, 'consensus', bool_or(n_span_judges > 0)
        FROM consensus GROUP BY run_id
    ),
    predictions AS (
        SELECT run_id, item_id, judge_id, verdict AS predicted,
               output_kind = 'spans' AS span_answer
        FROM judgments WHERE score IS NOT NULL
        UNION ALL
        SELECT run_id, item_id, 'consensus', hallucinated, n_span_judges > 0
        FROM consensus WHERE status = 'ok' AND hallucinated IS NOT NULL
    ),
    graded AS (
        SELECT p.run_id, p.judge_id, g.item_id, g.gold_hallucinated AS gold,
               coalesce(x.predicted, false) AS predicted, x.item_id IS NOT NULL AS answered
        FROM predictors p
        JOIN gold_labels g ON g.run_id = p.run_id
        LEFT JOIN predictions x
          ON x.run_id = p.run_id AND x.judge_id = p.judge_id AND x.item_id = g.item_id
        WHERE g.gold_hallucinated IS NOT NULL
    ),
    response AS (
        SELECT run_id, judge_id,
               count(*) AS n_items,
               count(*) FILTER (WHERE answered) AS n_answered,
               count(*) FILTER (WHERE predicted AND gold) AS tp,
               count(*) FILTER (WHERE predicted AND NOT gold) AS fp,
               count(*) FILTER (WHERE NOT predicted AND gold) AS fn,
               count(*) FILTER (WHERE NOT predicted AND NOT gold) AS tn,
               count(*) FILTER (WHERE answered AND predicted AND gold) AS tp_answered,
               count(*) FILTER (WHERE answered AND predicted AND NOT gold) AS fp_answered,
               count(*) FILTER (WHERE answered AND NOT predicted AND gold) AS fn_answered
        FROM graded GROUP BY run_id, judge_id
    ),
    predicted AS MATERIALIZED (
        SELECT run_id, item_id, judge_id, char_start, char_end FROM judgment_intervals
        UNION ALL
        SELECT run_id, item_id, 'consensus', char_start, char_end FROM consensus_intervals
    ),
    gold AS MATERIALIZED (SELECT * FROM gold_intervals),
    span_items AS (
        SELECT p.run_id, p.judge_id, g.item_id,
               coalesce(x.span_answer, false) AS answered
        FROM predictors p
        JOIN gold_labels g ON g.run_id = p.run_id
        LEFT JOIN predictions x
          ON x.run_id = p.run_id AND x.judge_id = p.judge_id AND x.item_id = g.item_id
        WHERE p.span_predictor AND g.has_span_labels
    ),
    item_pred AS (
        SELECT run_id, item_id, judge_id, sum(char_end - char_start)::BIGINT AS n
        FROM predicted GROUP BY run_id, item_id, judge_id
    ),
    item_gold AS (
        SELECT run_id, item_id, sum(char_end - char_start)::BIGINT AS n
        FROM gold GROUP BY run_id, item_id
    ),
    item_overlap AS (
        SELECT c.run_id, c.item_id, c.judge_id,
               sum(least(c.char_end, g.char_end) - greatest(c.char_start, g.char_start))::BIGINT
                   AS n
        FROM predicted c
        JOIN gold g
          ON g.run_id = c.run_id AND g.item_id = c.item_id
         AND c.char_start < g.char_end AND g.char_start < c.char_end
        GROUP BY c.run_id, c.item_id, c.judge_id
    ),
    spans AS (
        SELECT s.run_id, s.judge_id,
               count(*) AS n_span_items,
               count(*) FILTER (WHERE s.answered) AS n_span_answered,
               sum(coalesce(o.n, 0)) AS overlap_chars,
               sum(coalesce(p.n, 0)) AS pred_chars,
               sum(coalesce(g.n, 0)) AS gold_chars,
               coalesce(sum(o.n) FILTER (WHERE s.answered), 0) AS overlap_answered,
               coalesce(sum(p.n) FILTER (WHERE s.answered), 0) AS pred_answered,
               coalesce(sum(g.n) FILTER (WHERE s.answered), 0) AS gold_answered
        FROM span_items s
        LEFT JOIN item_pred p
          ON p.run_id = s.run_id AND p.item_id = s.item_id AND p.judge_id = s.judge_id
        LEFT JOIN item_overlap o
          ON o.run_id = s.run_id AND o.item_id = s.item_id AND o.judge_id = s.judge_id
        LEFT JOIN item_gold g ON g.run_id = s.run_id AND g.item_id = s.item_id
        GROUP BY s.run_id, s.judge_id
    )
    SELECT coalesce(r.run_id, s.run_id) AS run_id,
           coalesce(r.judge_id, s.judge_id) AS judge_id,
           coalesce(r.n_items, 0) AS n_items,
           coalesce(r.n_answered, 0) AS n_answered,
           CASE WHEN r.n_items > 0 THEN r.n_answered / r.n_items END AS coverage,
           r.tp, r.fp, r.fn, r.tn,
           CASE WHEN r.n_items > 0 THEN coalesce(r.tp / nullif(r.tp + r.fp, 0), 0) END
               AS "precision",
           CASE WHEN r.n_items > 0 THEN coalesce(r.tp / nullif(r.tp + r.fn, 0), 0) END
               AS recall,
           CASE WHEN r.n_items > 0 THEN
               coalesce(2 * r.tp / nullif(2 * r.tp + r.fp + r.fn, 0), 0)
           END AS f1,
           CASE WHEN r.n_answered > 0 THEN
               coalesce(2 * r.tp_answered
                        / nullif(2 * r.tp_answered + r.fp_answered + r.fn_answered, 0), 0)
           END AS f1_answered,
           coalesce(s.n_span_items, 0) AS n_span_items,
           coalesce(s.n_span_answered, 0) AS n_span_answered,
           s.overlap_chars, s.pred_chars, s.gold_chars,
           CASE WHEN s.n_span_items > 0 THEN
               coalesce(s.overlap_chars / nullif(s.pred_chars, 0), 0)
           END AS span_precision,
           CASE WHEN s.n_span_items > 0 THEN
               coalesce(s.overlap_chars / nullif(s.gold_chars, 0), 0)
           END AS span_recall,
           CASE WHEN s.n_span_items > 0 THEN
               coalesce(2 * s.overlap_chars / nullif(s.pred_chars + s.gold_chars, 0), 0)
           END AS span_f1,
           CASE WHEN s.n_span_answered > 0 THEN
               coalesce(2 * s.overlap_answered / nullif(s.pred_answered + s.gold_answered, 0), 0)
           END AS span_f1_answered
    FROM response r FULL OUTER JOIN spans s USING (run_id, judge_id)"""


def baseline_statements() -> list[str]:
    """BASELINE_SQL as statements creating ``baseline_<name>`` views next to the real ones."""
    names = re.compile(r"\b(VIEW)(\s+)(" + "|".join(BASELINE_VIEWS) + r")\b")
    sql = names.sub(r"\1\2baseline_\3", BASELINE_SQL)
    head = "CREATE OR REPLACE VIEW"
    return [head + body for body in sql.split(head) if body.strip()]


def _spans(rng: random.Random, hot: tuple[int, int]) -> tuple[Span, ...]:
    out = []
    for _ in range(rng.randint(3, 5)):
        start = max(0, min(LENGTH - 120, rng.choice(hot) + rng.randrange(-150, 150)))
        out.append(Span(start, start + rng.randint(30, 110), "x", "exact"))
    return tuple(out)


def make_batch(
    rng: random.Random, start: int, size: int, judges: int
) -> tuple[list[Item], list[Judgment], list[Consensus]]:
    items: list[Item] = []
    judgments: list[Judgment] = []
    consensus: list[Consensus] = []
    for n in range(start, start + size):
        item_id = f"item-{n:07d}"
        hot = (rng.randrange(150, LENGTH - 300), rng.randrange(150, LENGTH - 300))
        hallucinated = rng.random() < 0.5
        gold_spans = tuple(
            (s.char_start, s.char_end)
            for s in _spans(rng, hot)[: rng.randint(1, 3)]
            if hallucinated and s.char_start is not None and s.char_end is not None
        )
        items.append(Item(item_id, {"response": "resp"}, GoldLabels(hallucinated, gold_spans), n))
        scores: list[float] = []
        for j in range(judges):
            if rng.random() < 0.03:
                judgments.append(
                    Judgment(item_id, f"judge-{j}", "spans", None, unscored_reason="timeout")
                )
                continue
            spans = _spans(rng, hot) if rng.random() < 0.9 else ()
            score = 1.0 if spans else 0.0
            scores.append(score)
            judgments.append(Judgment(item_id, f"judge-{j}", "spans", score, spans))
        ok = len(scores) >= judges // 2 + 1
        median = sorted(scores)[len(scores) // 2] if ok else None
        cons_spans: tuple[ConsensusSpan, ...] = ()
        if ok and median:
            a = max(0, min(hot) - 20)
            b = max(hot) + 20
            cons_spans = (ConsensusSpan(a, a + 60, "x", 3, 3),) + (
                (ConsensusSpan(b, b + 40, "x", 3, 3),) if b > a + 60 else ()
            )
        consensus.append(
            Consensus(
                item_id,
                "ok" if ok else "insufficient",
                judges,
                len(scores),
                len(scores),
                median,
                median,
                min(scores) if ok else None,
                max(scores) if ok else None,
                (max(scores) - min(scores)) if ok else None,
                bool(median) if ok else None,
                n_span_judges=len(scores),
                spans=cons_spans,
            )
        )
    return items, judgments, consensus


def build(store: Store, rng: random.Random, n_items: int, judges: int, batch: int) -> None:
    t0 = time.perf_counter()
    n_judgments = n_spans = 0
    for start in range(0, n_items, batch):
        items, judgments, consensus = make_batch(rng, start, min(batch, n_items - start), judges)
        store.insert_items(RUN_ID, items)
        store.insert_judgments(RUN_ID, judgments)
        store.insert_consensus(RUN_ID, consensus)
        n_judgments += len(judgments)
        n_spans += sum(len(j.spans) for j in judgments)
    with store.read() as con:
        row = con.execute(
            "SELECT avg(n) FROM (SELECT sum(char_end - char_start) AS n FROM judgment_intervals "
            "GROUP BY item_id, judge_id)"
        ).fetchone()
    flagged = float(row[0]) if row and row[0] is not None else 0.0
    print(
        f"written: {n_items:,} items, {n_judgments:,} judgments, {n_spans:,} spans "
        f"({flagged:.0f} flagged characters per flagging judgment) "
        f"in {time.perf_counter() - t0:.1f} s"
    )


def same_rows(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Equal rows, floats to a relative 1e-12 (a sum of floats depends on its order)."""

    def same(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)
        return bool(x == y) and type(x) is type(y)

    return len(a) == len(b) and all(
        len(r) == len(q) and all(same(x, y) for x, y in zip(r, q, strict=True))
        for r, q in zip(a, b, strict=True)
    )


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    return con.execute(sql, [RUN_ID]).fetchall()


def timed(label: str, run: Callable[[], Any], repeats: int, target: float) -> Any:
    times: list[float] = []
    result: Any = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
    best, worst = min(times), max(times)
    met = "met" if worst <= target else ("met (best)" if best <= target else "MISSED")
    print(
        f"{label}: cold {times[0]:.3f} s, best {best:.3f} s, worst {worst:.3f} s "
        f"over {repeats} runs (target <= {target:g} s: {met})"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--batch-items", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--baseline", action="store_true", help="time the pre-interval views")
    parser.add_argument("--report", action="store_true", help="time agreement_report")
    args = parser.parse_args()
    print(f"setup: {args.items:,} items x {args.judges} judges; {_common.machine()}")

    with _common.temp_dir("bench-views-") as tmp:
        store = Store(Path(tmp) / "bench.duckdb")
        store.migrate()
        store.create_run(
            RunRecord(
                run_id=RUN_ID,
                kind="evaluate",
                suite="default",
                status="completed",
                started_at=datetime.now(UTC),
                finished_at=datetime.now(UTC),
                dataset="bench",
                panel_name="bench",
                panel={
                    "name": "bench",
                    "judges": [{"id": f"judge-{j}"} for j in range(args.judges)],
                },
                prompts=[],
                quorum=args.judges // 2 + 1,
                n_judges=args.judges,
            )
        )
        build(store, random.Random(args.seed), args.items, args.judges, args.batch_items)
        if args.baseline:
            with store.write() as con:
                for statement in baseline_statements():
                    con.execute(statement)
        with store.read() as con:
            for name, sql in QUERIES.items():
                rows = timed(
                    name,
                    partial(_fetch, con, sql),
                    args.repeats,
                    VIEW_TARGET_S,
                )
                if args.baseline and name != "item_disagreement":
                    old_sql = sql.replace(name, f"baseline_{name}")
                    try:
                        old = timed(
                            f"  baseline_{name}",
                            partial(_fetch, con, old_sql),
                            1,
                            VIEW_TARGET_S,
                        )
                    except duckdb.Error as exc:  # the character expansion runs out of memory
                        print(f"  baseline_{name}: failed: {str(exc).splitlines()[0]}")
                        continue
                    print(f"  same rows as the baseline: {same_rows(old, rows)}")
        if args.report:
            from juryflow.analysis.agreement_report import agreement_report
            from juryflow.storage.reads.analysis import load_run_data

            timed("load_run_data", lambda: load_run_data(store, RUN_ID), 1, REPORT_TARGET_S)
            timed(
                "agreement_report (juryflow agreement)",
                lambda: agreement_report(store, RUN_ID),
                1,
                REPORT_TARGET_S,
            )


if __name__ == "__main__":
    main()
