"""SQL views over the tables, recreated on every migrate so they always match the code.

The agreement views compute the same numbers as the numpy functions of
:mod:`juryflow.judges.agreement` and :mod:`juryflow.judges.gold` (``tests/test_views.py`` checks
it), so a
user can trust a quick ``juryflow sql`` as much as ``juryflow agreement``.

Conventions the views share:

- a judge *answered* an item when its judgment there is scored (``score IS NOT NULL``);
  unscored judgments count nowhere, exactly as in the consensus;
- a judge *answered with spans* when it answered and its ``output_kind`` is ``spans``;
  score-only judges have no say on spans, and unanchored spans (no offsets) are ignored;
- span metrics count characters: each set of spans (a judge's on an item, the consensus's,
  the gold labels') is cut into disjoint intervals (``*_intervals`` helper views), so a
  character covered by overlapping spans of one set counts once, and overlaps are summed
  over intersecting intervals; the ``*_chars`` views list the same characters one per row;
- a 0/0 ratio of a precision / recall / F1 against gold is 0 (as sklearn's
  ``zero_division=0`` and :mod:`juryflow.judges.gold`); a 0/0 agreement ratio is NULL (undefined).
"""

from __future__ import annotations

_RUN_OVERVIEW = """
    CREATE OR REPLACE VIEW run_overview AS
    SELECT r.run_id, r.kind, r.suite, r.status, r.started_at, r.finished_at, r.panel_name,
           r.n_judges, r.quorum,
           (SELECT count(*) FROM consensus c WHERE c.run_id = r.run_id) AS items,
           (SELECT count(*) FROM judgments j WHERE j.run_id = r.run_id) AS judgments,
           (SELECT count(*) FROM judgments j
             WHERE j.run_id = r.run_id AND j.score IS NULL) AS unscored,
           (SELECT avg(c.hallucinated::INTEGER) FROM consensus c
             WHERE c.run_id = r.run_id) AS hallucination_rate
    FROM runs r
"""


def _disjoint(source: str, keys: str, set_key: str) -> str:
    """SELECT of the spans of ``source`` cut into disjoint intervals, one set per ``set_key``.

    ``source`` yields ``keys``, ``set_key``, ``char_start`` and ``char_end > char_start``.
    In start order, each span keeps only its part past the furthest end of the spans before
    it (and is dropped when nothing is left), which covers the same characters with
    disjoint intervals in one window pass, without merging them (touching pieces stay two
    rows; no count changes). ``set_key`` is a single integer (a rowid) where there is one:
    partitioning on it is twice as fast as on the string keys.
    """
    return f"""
        SELECT {keys}, char_lo AS char_start, char_end
        FROM (
            SELECT *, greatest(char_start, coalesce(max(char_end) OVER (
                          PARTITION BY {set_key} ORDER BY char_start
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), char_start))
                          AS char_lo
            FROM ({source})
        )
        WHERE char_end > char_lo
    """


# The flagged characters as disjoint intervals: every span metric is computed from these
# (overlaps by an interval join on the item), never by expanding spans into characters,
# which took 4-9 s per view at 5,000 items (bench/bench_views.py --baseline). Judges: the
# anchored spans of scored span answers (a negative start clipped to 0); consensus: the
# spans of ``ok`` consensus rows.
_JUDGMENT_INTERVALS = "CREATE OR REPLACE VIEW judgment_intervals AS" + _disjoint(
    """
    SELECT s.run_id, s.item_id, s.judge_id, j.rowid AS judgment_row,
           greatest(s.char_start, 0) AS char_start, s.char_end
    FROM judgment_spans s
    JOIN judgments j USING (run_id, item_id, judge_id)
    WHERE j.score IS NOT NULL AND j.output_kind = 'spans'
      AND s.char_start IS NOT NULL AND s.char_end > greatest(s.char_start, 0)
    """,
    "run_id, item_id, judge_id",
    "judgment_row",
)

_CONSENSUS_INTERVALS = "CREATE OR REPLACE VIEW consensus_intervals AS" + _disjoint(
    """
    SELECT s.run_id, s.item_id, c.rowid AS consensus_row, s.char_start, s.char_end
    FROM consensus_spans s
    JOIN consensus c USING (run_id, item_id)
    WHERE c.status = 'ok' AND s.char_end > s.char_start
    """,
    "run_id, item_id",
    "consensus_row",
)

# One row per flagged character, kept for users who query characters; nothing reads them.
_JUDGMENT_CHARS = """
    CREATE OR REPLACE VIEW judgment_chars AS
    SELECT run_id, item_id, judge_id, unnest(range(char_start, char_end)) AS char_pos
    FROM judgment_intervals
"""

_CONSENSUS_CHARS = """
    CREATE OR REPLACE VIEW consensus_chars AS
    SELECT run_id, item_id, unnest(range(char_start, char_end)) AS char_pos
    FROM consensus_intervals
"""

# Human labels per item. ``has_span_labels``: the item's gold spans can be compared with.
# The store keeps ``[]`` both for "no hallucinated span" and for "no span labels at all"
# (a data set with a ``hallucinated`` column only), so spans are usable when the run has at
# least one non-empty span label and the item is not marked hallucinated with no span.
_GOLD_LABELS = """
    CREATE OR REPLACE VIEW gold_labels AS
    WITH labelled AS (
        SELECT run_id, item_id, gold_hallucinated, gold_spans,
               coalesce(json_array_length(gold_spans), 0) AS n_gold_spans
        FROM items
        WHERE gold_hallucinated IS NOT NULL OR gold_spans IS NOT NULL
    ),
    runs_with_spans AS (
        SELECT DISTINCT run_id FROM labelled WHERE n_gold_spans > 0
    )
    SELECT l.run_id, l.item_id, l.gold_hallucinated, l.gold_spans, l.n_gold_spans,
           (l.gold_spans IS NOT NULL
            AND r.run_id IS NOT NULL
            AND NOT (coalesce(l.gold_hallucinated, false) AND l.n_gold_spans = 0))
               AS has_span_labels
    FROM labelled l LEFT JOIN runs_with_spans r USING (run_id)
"""

_GOLD_INTERVALS = "CREATE OR REPLACE VIEW gold_intervals AS" + _disjoint(
    """
    SELECT run_id, item_id, greatest(g[1], 0) AS char_start, g[2] AS char_end
    FROM (
        SELECT run_id, item_id, unnest(json_transform(gold_spans, '[["BIGINT"]]')) AS g
        FROM gold_labels WHERE has_span_labels
    )
    WHERE g[2] > greatest(g[1], 0)
    """,
    "run_id, item_id",
    "run_id, item_id",
)

_GOLD_CHARS = """
    CREATE OR REPLACE VIEW gold_chars AS
    SELECT run_id, item_id, unnest(range(char_start, char_end)) AS char_pos
    FROM gold_intervals
"""

# Per item: how much the judges disagree, three ways, and one number to rank by.
#
# - score_spread = max - min of the scores (as in ``consensus``), score_stddev the
#   population standard deviation;
# - verdict_split = 2 * (minority verdicts) / (verdicts): 0 unanimous, 1 an even split;
# - span_disagreement = 1 - (characters flagged by every span judge that answered) /
#   (characters flagged by any): 0 when they flag the same characters (or none at all),
#   1 when no character is flagged by all of them;
# - disagreement = the mean of those of score_spread, verdict_split and span_disagreement
#   that are defined. Each needs two answers: with fewer than two scored judges the score
#   measures are NULL, with fewer than two span judges span_disagreement is NULL, and an
#   item with neither has a NULL disagreement and ranks last.
_ITEM_DISAGREEMENT = """
    CREATE OR REPLACE VIEW item_disagreement AS
    WITH scored AS (
        SELECT run_id, item_id,
               count(*) AS n_judgments,
               count(score) AS n_scored,
               max(score) - min(score) AS score_range,
               stddev_pop(score) AS score_sd,
               count(*) FILTER (WHERE verdict) AS n_hallucinated_verdicts,
               count(*) FILTER (WHERE NOT verdict) AS n_clean_verdicts,
               count(*) FILTER (WHERE score IS NOT NULL AND output_kind = 'spans')
                   AS n_span_judges
        FROM judgments
        GROUP BY run_id, item_id
    ),
    -- Characters marked by any / every answering span judge are counted once, in numpy,
    -- when the consensus is computed; counting them here took a window per item.
    chars AS (
        SELECT c.run_id, c.item_id, c.chars_any, c.chars_all
        FROM consensus c JOIN scored s USING (run_id, item_id)
        WHERE s.n_span_judges > 0
    ),
    cons_chars AS (
        -- consensus spans never overlap (the consensus merges them), so lengths add up
        SELECT s.run_id, s.item_id, sum(s.char_end - s.char_start) AS consensus_chars
        FROM consensus_spans s JOIN consensus c USING (run_id, item_id)
        WHERE c.status = 'ok' AND s.char_end > s.char_start
        GROUP BY s.run_id, s.item_id
    ),
    measures AS (
        SELECT i.run_id, i.item_id, i.row_number,
               coalesce(s.n_judgments, 0) AS n_judgments,
               coalesce(s.n_scored, 0) AS n_scored,
               CASE WHEN s.n_scored >= 2 THEN s.score_range END AS score_spread,
               CASE WHEN s.n_scored >= 2 THEN s.score_sd END AS score_stddev,
               coalesce(s.n_hallucinated_verdicts, 0) AS n_hallucinated_verdicts,
               coalesce(s.n_clean_verdicts, 0) AS n_clean_verdicts,
               coalesce(s.n_hallucinated_verdicts > 0 AND s.n_clean_verdicts > 0, false)
                   AS split_verdict,
               CASE WHEN s.n_scored >= 2 THEN
                   2.0 * least(s.n_hallucinated_verdicts, s.n_clean_verdicts) / s.n_scored
               END AS verdict_split,
               coalesce(s.n_span_judges, 0) AS n_span_judges,
               coalesce(ch.chars_any, 0) AS chars_any,
               coalesce(ch.chars_all, 0) AS chars_all,
               CASE WHEN s.n_span_judges >= 2 THEN
                   CASE WHEN coalesce(ch.chars_any, 0) = 0 THEN 0.0
                        ELSE 1.0 - ch.chars_all / ch.chars_any END
               END AS span_disagreement,
               c.status AS consensus_status,
               c.score_median AS consensus_score,
               c.hallucinated AS consensus_hallucinated,
               coalesce(cc.consensus_chars, 0) AS consensus_chars,
               i.gold_hallucinated
        FROM items i
        LEFT JOIN scored s USING (run_id, item_id)
        LEFT JOIN chars ch USING (run_id, item_id)
        LEFT JOIN consensus c USING (run_id, item_id)
        LEFT JOIN cons_chars cc USING (run_id, item_id)
    ),
    combined AS (
        SELECT *,
               (coalesce(score_spread, 0) + coalesce(verdict_split, 0)
                + coalesce(span_disagreement, 0))
               / nullif((score_spread IS NOT NULL)::INTEGER
                        + (verdict_split IS NOT NULL)::INTEGER
                        + (span_disagreement IS NOT NULL)::INTEGER, 0) AS disagreement
        FROM measures
    )
    SELECT run_id, item_id, n_judgments, n_scored, score_spread, score_stddev,
           n_hallucinated_verdicts, n_clean_verdicts, split_verdict, verdict_split,
           n_span_judges, chars_any, chars_all, span_disagreement, disagreement,
           row_number() OVER (
               PARTITION BY run_id
               ORDER BY disagreement DESC NULLS LAST, span_disagreement DESC NULLS LAST,
                        score_stddev DESC NULLS LAST, row_number, item_id
           ) AS disagreement_rank,
           consensus_status, consensus_score, consensus_hallucinated, consensus_chars,
           gold_hallucinated
    FROM combined
"""

# Every pair of judges (judge_a < judge_b) over the items both answered: verdict agreement
# and Cohen's kappa (NULL when both give one and the same verdict throughout), and the
# micro character F1 of their spans over the items both answered with spans (NULL when
# neither flagged a character there). Pairs that share no answered item have no row.
_JUDGE_PAIR_AGREEMENT = """
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
"""

# Every judge against the panel: its mean score - consensus median (positive = harsher
# than the panel), how often it flags, how often its verdict is the consensus verdict, and
# the character F1 of its spans against the consensus spans (over the items it answered
# with spans that have a span consensus). The judge is part of the consensus it is
# compared with, so these run high on small panels.
_JUDGE_BIAS = """
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
"""

# Every judge, and the consensus (judge_id 'consensus'), against the human labels, over
# ALL labelled items as RAGTruth counts them: where a predictor gave no answer (a failed
# judge, a consensus below quorum) it counts as flagging nothing. ``coverage`` is the share
# of those items it answered; the ``*_answered`` columns are the same figures over the
# answered items only. Response level over the items with a gold verdict; character level,
# micro-averaged over the data set, over the items with span labels, for predictors that
# answer with spans (score-only judges have NULL span figures). Runs without labels have
# no rows.
_JUDGE_ACCURACY = """
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
    FROM response r FULL OUTER JOIN spans s USING (run_id, judge_id)
"""

VIEWS: tuple[str, ...] = (
    _RUN_OVERVIEW,
    _JUDGMENT_INTERVALS,
    _CONSENSUS_INTERVALS,
    _JUDGMENT_CHARS,
    _CONSENSUS_CHARS,
    _GOLD_LABELS,
    _GOLD_INTERVALS,
    _GOLD_CHARS,
    _ITEM_DISAGREEMENT,
    _JUDGE_PAIR_AGREEMENT,
    _JUDGE_BIAS,
    _JUDGE_ACCURACY,
)

AGREEMENT_VIEWS: tuple[str, ...] = (
    "item_disagreement",
    "judge_pair_agreement",
    "judge_bias",
    "judge_accuracy",
)
"""The views meant for users (``*_intervals``, ``*_chars`` and ``gold_labels`` are helpers)."""
