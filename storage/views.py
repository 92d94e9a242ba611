"""SQL views over the tables, recreated on every migrate so they always match the code.

The agreement views compute the same numbers as the numpy functions of
:mod:`juryflow.maths.agreement` and :mod:`juryflow.maths.gold` (``tests/test_views.py`` checks
it), so a
user can trust a quick ``juryflow sql`` as much as ``juryflow agreement``.

Conventions the views share:

- a judge *answered* an item when its judgment there is scored (``score IS NOT NULL``);
  unscored judgments count nowhere, exactly as in the consensus;
- a judge *answered with spans* when it answered and its ``output_kind`` is ``spans``;
  score-only judges have no say on spans, and unanchored spans (no offsets) are ignored;
- span metrics count characters: each set of spans (a judge's on an item, the consensus's,
  the gold labels') covers a character once however many of its spans cover it. The span
  views add up the ``span_sets`` (characters per set) and ``span_overlaps`` (characters two
  sets on one item share) rows the store writes with the spans (issue 12: merging spans at
  query time took 5-7 s per view at 1,000,000 judgments); the ``*_intervals`` helper views
  cut the same sets into disjoint intervals at query time, and the ``*_chars`` views list
  their characters one per row, for users who query them;
- a 0/0 ratio of a precision / recall / F1 against gold is 0 (as sklearn's
  ``zero_division=0`` and :mod:`juryflow.maths.gold`); a 0/0 agreement ratio is NULL (undefined).
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


# The flagged characters as disjoint intervals, computed at query time for users; they
# cover the same characters as the stored ``span_sets``. Judges: the anchored spans of
# scored span answers (a negative start clipped to 0); consensus: the spans of ``ok``
# consensus rows.
_JUDGE_SPANS = """
    SELECT s.run_id, s.item_id, s.judge_id, j.rowid AS judgment_row,
           greatest(s.char_start, 0) AS char_start, s.char_end
    FROM judgment_spans s
    JOIN judgments j USING (run_id, item_id, judge_id)
    WHERE j.score IS NOT NULL AND j.output_kind = 'spans'
      AND s.char_start IS NOT NULL AND s.char_end > greatest(s.char_start, 0)
    """

_JUDGMENT_INTERVALS = "CREATE OR REPLACE VIEW judgment_intervals AS" + _disjoint(
    _JUDGE_SPANS, "run_id, item_id, judge_id", "judgment_row"
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
#
# ``item_disagreement_measures`` is ``item_disagreement`` without the rank and
# ``consensus_chars`` (a join on the consensus spans), plus ``row_number``. Read it for one
# run (``WHERE run_id = ...`` reaches every table scan) where neither is needed: the rank
# is a window over the whole run, most of the cost of a page of the viewer, which orders
# by the rank's columns instead (storage/reads/item_queries.py).
_ITEM_DISAGREEMENT_MEASURES = """
    CREATE OR REPLACE VIEW item_disagreement_measures AS
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
               -- characters marked by any / every answering span judge are counted once,
               -- in numpy, when the consensus is computed; counting them here took a
               -- window per item
               CASE WHEN s.n_span_judges > 0 THEN coalesce(c.chars_any, 0) ELSE 0 END
                   AS chars_any,
               CASE WHEN s.n_span_judges > 0 THEN coalesce(c.chars_all, 0) ELSE 0 END
                   AS chars_all,
               CASE WHEN s.n_span_judges >= 2 THEN
                   CASE WHEN coalesce(c.chars_any, 0) = 0 THEN 0.0
                        ELSE 1.0 - c.chars_all / c.chars_any END
               END AS span_disagreement,
               c.status AS consensus_status,
               c.score_median AS consensus_score,
               c.hallucinated AS consensus_hallucinated,
               i.gold_hallucinated
        FROM items i
        LEFT JOIN scored s USING (run_id, item_id)
        LEFT JOIN consensus c USING (run_id, item_id)
    )
    SELECT *,
           (coalesce(score_spread, 0) + coalesce(verdict_split, 0)
            + coalesce(span_disagreement, 0))
           / nullif((score_spread IS NOT NULL)::INTEGER
                    + (verdict_split IS NOT NULL)::INTEGER
                    + (span_disagreement IS NOT NULL)::INTEGER, 0) AS disagreement
    FROM measures
"""

DISAGREEMENT_RANK_ORDER = (
    "disagreement DESC NULLS LAST, span_disagreement DESC NULLS LAST, "
    "score_stddev DESC NULLS LAST, row_number, item_id"
)
"""The order of ``item_disagreement.disagreement_rank`` within a run (columns of
``item_disagreement_measures``)."""

_ITEM_DISAGREEMENT = f"""
    CREATE OR REPLACE VIEW item_disagreement AS
    SELECT run_id, item_id, n_judgments, n_scored, score_spread, score_stddev,
           n_hallucinated_verdicts, n_clean_verdicts, split_verdict, verdict_split,
           n_span_judges, chars_any, chars_all, span_disagreement, disagreement,
           row_number() OVER (PARTITION BY run_id ORDER BY {DISAGREEMENT_RANK_ORDER})
               AS disagreement_rank,
           consensus_status, consensus_score, consensus_hallucinated,
           coalesce(cc.consensus_chars, 0) AS consensus_chars, gold_hallucinated
    FROM item_disagreement_measures
    LEFT JOIN (
        -- consensus spans never overlap (the consensus merges them), so lengths add up
        SELECT s.run_id, s.item_id, sum(s.char_end - s.char_start) AS consensus_chars
        FROM consensus_spans s JOIN consensus c USING (run_id, item_id)
        WHERE c.status = 'ok' AND s.char_end > s.char_start
        GROUP BY s.run_id, s.item_id
    ) cc USING (run_id, item_id)
"""

# Every pair of judges (judge_a < judge_b) over the items both answered: verdict agreement
# and Cohen's kappa (NULL when both give one and the same verdict throughout), and the
# micro character F1 of their spans over the items both answered with spans (NULL when
# neither flagged a character there). Pairs that share no answered item have no row.
_JUDGE_PAIR_AGREEMENT = """
    CREATE OR REPLACE VIEW judge_pair_agreement AS
    WITH answered AS (
        SELECT run_id, item_id, judge_id, score, verdict,
               output_kind = 'spans' AS spans, coalesce(span_chars, 0) AS n_chars
        FROM judgments
        WHERE score IS NOT NULL
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
        SELECT run_id, judge_a, judge_b, sum(overlap_chars)::BIGINT AS overlap_chars
        FROM span_overlaps WHERE kind = 'judge-judge'
        GROUP BY run_id, judge_a, judge_b
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
    WITH panel AS (
        SELECT c.run_id, c.item_id, c.status, c.n_span_judges, c.score_median, c.hallucinated,
               coalesce(z.n_chars, 0) AS consensus_chars
        FROM consensus c
        LEFT JOIN span_sets z
          ON z.kind = 'consensus' AND z.run_id = c.run_id AND z.item_id = c.item_id
    ),
    joined AS (
        SELECT j.run_id, j.judge_id, j.item_id, j.score, j.verdict, j.output_kind,
               coalesce(j.span_chars, 0) AS judge_chars, c.consensus_chars,
               c.score_median, c.hallucinated AS consensus_hallucinated,
               (j.score IS NOT NULL AND j.output_kind = 'spans' AND c.status = 'ok'
                AND c.n_span_judges > 0) AS span_item
        FROM judgments j LEFT JOIN panel c USING (run_id, item_id)
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
               count(*) FILTER (WHERE span_item) AS n_span_items,
               sum(judge_chars) FILTER (WHERE span_item)::BIGINT AS judge_chars,
               sum(consensus_chars) FILTER (WHERE span_item)::BIGINT AS consensus_chars
        FROM joined GROUP BY run_id, judge_id
    ),
    -- a judge-consensus overlap has a row only where the judge answered with spans
    overlap AS (
        SELECT o.run_id, o.judge_a AS judge_id, sum(o.overlap_chars)::BIGINT AS overlap_chars
        FROM span_overlaps o
        JOIN consensus c USING (run_id, item_id)
        WHERE o.kind = 'judge-consensus' AND c.status = 'ok' AND c.n_span_judges > 0
        GROUP BY o.run_id, o.judge_a
    )
    SELECT p.run_id, p.judge_id, p.n_items, p.n_scored, p.n_unscored, p.mean_score,
           p.flag_rate, p.n_vs_consensus, p.bias, p.mean_abs_deviation,
           p.consensus_verdict_agreement, p.n_span_items,
           CASE WHEN p.n_span_items > 0 THEN coalesce(o.overlap_chars, 0) END
               AS overlap_chars,
           CASE WHEN p.n_span_items > 0 THEN coalesce(p.judge_chars, 0) END AS judge_chars,
           CASE WHEN p.n_span_items > 0 THEN coalesce(p.consensus_chars, 0) END
               AS consensus_chars,
           CASE WHEN coalesce(p.judge_chars, 0) + coalesce(p.consensus_chars, 0) > 0 THEN
               2.0 * coalesce(o.overlap_chars, 0)
               / (coalesce(p.judge_chars, 0) + coalesce(p.consensus_chars, 0))
           END AS consensus_span_f1
    FROM per_judge p
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
def _judge_accuracy(view: str, gold_items: str, gold_overlap: str) -> str:
    """The ``judge_accuracy`` view as ``view``, over the labels that the CTEs
    ``gold_items`` (one row per labelled item) and ``gold_overlap`` (characters each
    predictor shares with the labels) read; each may define helper CTEs before its own.

    Over 100 lines: one SQL statement, whose CTEs read in order; split, its parts would
    only be strings glued back together."""
    return f"""
    CREATE OR REPLACE VIEW {view} AS
    WITH predictors AS (
        SELECT run_id, judge_id, bool_or(output_kind = 'spans') AS span_predictor
        FROM judgments GROUP BY run_id, judge_id
        UNION ALL
        SELECT run_id, 'consensus', bool_or(n_span_judges > 0)
        FROM consensus GROUP BY run_id
    ),
    {gold_items}
    run_gold AS (
        SELECT run_id,
               count(*) FILTER (WHERE gold IS NOT NULL) AS n_items,
               count(*) FILTER (WHERE gold) AS n_positive,
               count(*) FILTER (WHERE NOT gold) AS n_negative,
               count(*) FILTER (WHERE has_span_labels) AS n_span_items,
               sum(gold_chars) FILTER (WHERE has_span_labels) AS gold_chars
        FROM gold_items GROUP BY run_id
    ),
    -- One row per judge answer and per consensus row. An unanswered item counts as
    -- flagging nothing, so only answers need visiting: fn and tn follow from the run's
    -- positive and negative counts. A consensus row that is not an answer (below
    -- quorum, no verdict) still has its spans counted, as the characters it flags.
    predictions AS (
        SELECT run_id, item_id, judge_id, verdict AS predicted, true AS answered,
               output_kind = 'spans' AS span_answer, coalesce(span_chars, 0) AS pred_chars
        FROM judgments WHERE score IS NOT NULL
        UNION ALL
        SELECT c.run_id, c.item_id, 'consensus', c.hallucinated,
               c.status = 'ok' AND c.hallucinated IS NOT NULL,
               c.status = 'ok' AND c.hallucinated IS NOT NULL AND c.n_span_judges > 0,
               coalesce(z.n_chars, 0)
        FROM consensus c
        LEFT JOIN span_sets z
          ON z.kind = 'consensus' AND z.run_id = c.run_id AND z.item_id = c.item_id
    ),
    answers AS (
        SELECT x.run_id, x.judge_id,
               count(*) FILTER (WHERE x.answered AND g.gold IS NOT NULL) AS n_answered,
               count(*) FILTER (WHERE x.answered AND coalesce(x.predicted, false) AND g.gold)
                   AS tp,
               count(*) FILTER (
                   WHERE x.answered AND coalesce(x.predicted, false) AND NOT g.gold) AS fp,
               count(*) FILTER (
                   WHERE x.answered AND NOT coalesce(x.predicted, false) AND g.gold)
                   AS fn_answered,
               count(*) FILTER (WHERE g.has_span_labels AND x.span_answer) AS n_span_answered,
               sum(x.pred_chars) FILTER (WHERE g.has_span_labels) AS pred_chars,
               sum(x.pred_chars) FILTER (WHERE g.has_span_labels AND x.span_answer)
                   AS pred_answered,
               sum(g.gold_chars) FILTER (WHERE g.has_span_labels AND x.span_answer)
                   AS gold_answered
        FROM predictions x JOIN gold_items g USING (run_id, item_id)
        GROUP BY x.run_id, x.judge_id
    ),
    {gold_overlap}
    response AS (
        SELECT p.run_id, p.judge_id, g.n_items,
               coalesce(a.n_answered, 0) AS n_answered,
               coalesce(a.tp, 0) AS tp,
               coalesce(a.fp, 0) AS fp,
               g.n_positive - coalesce(a.tp, 0) AS fn,
               g.n_negative - coalesce(a.fp, 0) AS tn,
               coalesce(a.tp, 0) AS tp_answered,
               coalesce(a.fp, 0) AS fp_answered,
               coalesce(a.fn_answered, 0) AS fn_answered
        FROM predictors p
        JOIN run_gold g USING (run_id)
        LEFT JOIN answers a USING (run_id, judge_id)
        WHERE g.n_items > 0
    ),
    spans AS (
        SELECT p.run_id, p.judge_id, g.n_span_items,
               coalesce(a.n_span_answered, 0) AS n_span_answered,
               coalesce(o.overlap_chars, 0) AS overlap_chars,
               coalesce(a.pred_chars, 0) AS pred_chars,
               g.gold_chars,
               coalesce(o.overlap_answered, 0) AS overlap_answered,
               coalesce(a.pred_answered, 0) AS pred_answered,
               coalesce(a.gold_answered, 0) AS gold_answered
        FROM predictors p
        JOIN run_gold g USING (run_id)
        LEFT JOIN answers a USING (run_id, judge_id)
        LEFT JOIN gold_overlap o USING (run_id, judge_id)
        WHERE p.span_predictor AND g.n_span_items > 0
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


# The dataset's labels: their gold sets and overlaps are stored (``span_sets`` /
# ``span_overlaps``).
_DATASET_GOLD_ITEMS = """gold_items AS (
        SELECT g.run_id, g.item_id, g.gold_hallucinated AS gold, g.has_span_labels,
               coalesce(z.n_chars, 0) AS gold_chars
        FROM gold_labels g
        LEFT JOIN span_sets z
          ON z.kind = 'gold' AND z.run_id = g.run_id AND z.item_id = g.item_id
    ),"""


def _gold_overlap(overlaps: str) -> str:
    """The ``gold_overlap`` CTE over ``overlaps``, rows in the columns of ``span_overlaps``
    (only ``judge-gold`` and ``consensus-gold`` rows are read).

    A gold overlap has a row only where the gold labels have spans (so the item's span
    labels count) and the predictor flagged (so a judge answered with spans there)."""
    return f"""gold_overlap AS (
        SELECT run_id, judge_a AS judge_id, sum(overlap_chars) AS overlap_chars,
               sum(overlap_chars) AS overlap_answered
        FROM {overlaps} WHERE kind = 'judge-gold'
        GROUP BY run_id, judge_a
        UNION ALL
        SELECT o.run_id, 'consensus', sum(o.overlap_chars),
               sum(o.overlap_chars) FILTER (
                   WHERE c.hallucinated IS NOT NULL AND c.n_span_judges > 0)
        FROM {overlaps} o JOIN consensus c USING (run_id, item_id)
        WHERE o.kind = 'consensus-gold'
        GROUP BY o.run_id
    ),"""


_JUDGE_ACCURACY = _judge_accuracy(
    "judge_accuracy", _DATASET_GOLD_ITEMS, _gold_overlap("span_overlaps")
)


# Intra-judge reliability (issue 26): per run and judge with repeated samples (``samples: N``
# in the panel; ``judgment_samples``, migration 14), how far its samples of an item agree,
# each sample in the place of a judge: Krippendorff's alpha (interval) on the scores from
# each item's count, sum and sum of squares; the mean share of an item's sample pairs whose
# verdicts differ; Fleiss' kappa over the items every sample that answered anything answered;
# and the mean over pairs of samples of their micro character F1 (items both answered with
# spans; a pair where neither flagged a character is left out). The same numbers as
# juryflow.maths.samples.self_agreement, which adds the intervals.
_SAMPLE_SPANS = """
    SELECT p.run_id, p.item_id, p.judge_id, p.sample_index,
           greatest(p.char_start, 0) AS char_start, p.char_end
    FROM judgment_sample_spans p
    JOIN judgment_samples s USING (run_id, item_id, judge_id, sample_index)
    WHERE s.score IS NOT NULL AND s.output_kind = 'spans'
      AND p.char_start IS NOT NULL AND p.char_end > greatest(p.char_start, 0)
    """

_SAMPLE_KEYS = "run_id, item_id, judge_id, sample_index"
_SAMPLE_INTERVALS = _disjoint(_SAMPLE_SPANS, _SAMPLE_KEYS, _SAMPLE_KEYS)

_JUDGE_SELF_AGREEMENT = f"""
    CREATE OR REPLACE VIEW judge_self_agreement AS
    WITH scored AS (
        SELECT run_id, item_id, judge_id, sample_index, score, verdict,
               output_kind = 'spans' AS spans
        FROM judgment_samples WHERE score IS NOT NULL
    ),
    per_item AS (
        SELECT run_id, judge_id, item_id, count(*)::DOUBLE AS m, sum(score) AS s1,
               sum(score * score) AS s2, sum(coalesce(verdict, false)::INTEGER)::DOUBLE AS k
        FROM scored GROUP BY run_id, judge_id, item_id
    ),
    active AS (
        SELECT run_id, judge_id, count(DISTINCT sample_index)::DOUBLE AS raters
        FROM scored GROUP BY run_id, judge_id
    ),
    sampled AS (
        SELECT run_id, judge_id, max(sample_index) + 1 AS n_samples,
               count(DISTINCT item_id) AS n_sampled_items
        FROM judgment_samples GROUP BY run_id, judge_id
    ),
    sums AS (
        SELECT p.run_id, p.judge_id,
               count(*) FILTER (WHERE m >= 2) AS n_items,
               sum(m) FILTER (WHERE m >= 2) AS n_values,
               sum(s1) FILTER (WHERE m >= 2) AS s1,
               sum(s2) FILTER (WHERE m >= 2) AS s2,
               sum(m * (s2 - s1 * s1 / m) / (m - 1)) FILTER (WHERE m >= 2) AS within,
               avg(2 * k * (m - k) / (m * (m - 1))) FILTER (WHERE m >= 2)
                   AS verdict_disagreement,
               count(*) FILTER (WHERE m = a.raters AND m >= 2) AS n_complete,
               avg((k * (k - 1) + (m - k) * (m - k - 1)) / (m * (m - 1)))
                   FILTER (WHERE m = a.raters AND m >= 2) AS p_bar,
               sum(k) FILTER (WHERE m = a.raters AND m >= 2)
                   / sum(m) FILTER (WHERE m = a.raters AND m >= 2) AS p_flag
        FROM per_item p JOIN active a USING (run_id, judge_id)
        GROUP BY p.run_id, p.judge_id
    ),
    intervals AS ({_SAMPLE_INTERVALS}),
    set_chars AS (
        SELECT s.run_id, s.item_id, s.judge_id, s.sample_index,
               coalesce(sum(i.char_end - i.char_start), 0)::BIGINT AS chars
        FROM scored s
        LEFT JOIN intervals i USING (run_id, item_id, judge_id, sample_index)
        WHERE s.spans
        GROUP BY s.run_id, s.item_id, s.judge_id, s.sample_index
    ),
    pair_chars AS (
        SELECT a.run_id, a.judge_id, a.sample_index AS sample_a, b.sample_index AS sample_b,
               sum(a.chars + b.chars) AS chars
        FROM set_chars a JOIN set_chars b
          ON a.run_id = b.run_id AND a.item_id = b.item_id AND a.judge_id = b.judge_id
         AND a.sample_index < b.sample_index
        GROUP BY ALL
    ),
    pair_overlap AS (
        SELECT a.run_id, a.judge_id, a.sample_index AS sample_a, b.sample_index AS sample_b,
               sum(least(a.char_end, b.char_end) - greatest(a.char_start, b.char_start))
                   AS overlap
        FROM intervals a JOIN intervals b
          ON a.run_id = b.run_id AND a.item_id = b.item_id AND a.judge_id = b.judge_id
         AND a.sample_index < b.sample_index
         AND a.char_start < b.char_end AND b.char_start < a.char_end
        GROUP BY ALL
    ),
    span_pairs AS (
        SELECT c.run_id, c.judge_id,
               avg(CASE WHEN c.chars > 0 THEN 2.0 * coalesce(o.overlap, 0) / c.chars END)
                   AS span_f1
        FROM pair_chars c LEFT JOIN pair_overlap o
          USING (run_id, judge_id, sample_a, sample_b)
        GROUP BY c.run_id, c.judge_id
    ),
    span_items AS (
        SELECT run_id, judge_id, count(*) AS n_span_items
        FROM (SELECT run_id, judge_id, item_id FROM set_chars GROUP BY ALL
              HAVING count(*) >= 2)
        GROUP BY run_id, judge_id
    )
    SELECT d.run_id, d.judge_id, d.n_samples, d.n_sampled_items,
           coalesce(s.n_items, 0) AS n_items,
           CASE WHEN s.n_values > 0
                 AND s.s2 - s.s1 * s.s1 / s.n_values > 1e-12 * greatest(s.s2, 1e-300) THEN
               1 - (s.n_values - 1) * s.within / (s.n_values * (s.s2 - s.s1 * s.s1 / s.n_values))
           END AS score_alpha,
           s.verdict_disagreement,
           coalesce(s.n_complete, 0) AS n_kappa_items,
           CASE WHEN s.n_complete > 0 AND s.p_flag > 0 AND s.p_flag < 1 THEN
               (s.p_bar - (s.p_flag * s.p_flag + (1 - s.p_flag) * (1 - s.p_flag)))
               / (1 - (s.p_flag * s.p_flag + (1 - s.p_flag) * (1 - s.p_flag)))
           END AS fleiss_kappa,
           coalesce(i.n_span_items, 0) AS n_span_items,
           p.span_f1
    FROM sampled d
    LEFT JOIN sums s USING (run_id, judge_id)
    LEFT JOIN span_pairs p USING (run_id, judge_id)
    LEFT JOIN span_items i USING (run_id, judge_id)
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
    _ITEM_DISAGREEMENT_MEASURES,
    _ITEM_DISAGREEMENT,
    _JUDGE_PAIR_AGREEMENT,
    _JUDGE_BIAS,
    _JUDGE_ACCURACY,
    _JUDGE_SELF_AGREEMENT,
)

AGREEMENT_VIEWS: tuple[str, ...] = (
    "item_disagreement",
    "item_disagreement_measures",
    "judge_pair_agreement",
    "judge_bias",
    "judge_accuracy",
    "judge_self_agreement",
)
"""The views meant for users (``*_intervals``, ``*_chars`` and ``gold_labels`` are helpers)."""


# -- human adjudications (issue 13) -------------------------------------------------------
#
# An item's newest annotation (``annotations``, written by `juryflow view`) as a label, in
# the columns of ``gold_labels``: the reviewer's verdict, and the labelled spans (accepted
# consensus spans plus the spans marked as missed, merged when saved). The spans are span
# labels when they say something: some span, or a clean verdict (no span is wrong), or
# decisions on consensus spans with the verdict left unset (every span rejected = none is
# wrong). A hallucinated verdict with no span, like the dataset's, labels no span. With
# the verdict left unset, span labels decide it as the dataset reader does (some span:
# hallucinated), so that `juryflow export-annotations` reads back as the same labels.
_ANNOTATION_LABELS = """
    CREATE OR REPLACE VIEW annotation_labels AS
    WITH latest AS (
        SELECT *, coalesce(json_array_length(spans), 0) AS n_spans,
               (coalesce(json_array_length(spans), 0) > 0
                OR verdict = false
                OR (verdict IS NULL AND coalesce(json_array_length(decisions), 0) > 0))
                   AS span_labels
        FROM annotations
        QUALIFY row_number() OVER (
            PARTITION BY run_id, item_id ORDER BY annotation_id DESC) = 1
    )
    SELECT run_id, item_id,
           coalesce(verdict, CASE WHEN span_labels THEN n_spans > 0 END) AS gold_hallucinated,
           spans AS gold_spans, n_spans AS n_gold_spans, span_labels AS has_span_labels
    FROM latest
"""

# The dataset's labels with every annotated item's replaced by its newest annotation
# (``--gold both``); items without an annotation keep the dataset's label.
_ADJUDICATED_LABELS = """
    CREATE OR REPLACE VIEW adjudicated_labels AS
    SELECT run_id, item_id, gold_hallucinated, gold_spans, n_gold_spans, has_span_labels
    FROM annotation_labels
    UNION ALL
    SELECT g.run_id, g.item_id, g.gold_hallucinated, g.gold_spans, g.n_gold_spans,
           g.has_span_labels
    FROM gold_labels g
    WHERE NOT EXISTS (
        SELECT 1 FROM annotation_labels a WHERE a.run_id = g.run_id AND a.item_id = g.item_id
    )
"""

# ``judge_accuracy`` against the other label sources. The dataset's gold sets and overlaps
# are stored (``span_sets`` / ``span_overlaps``); an annotation's are not, so the overlaps
# on annotated items are counted here, at query time, over those items only (a reviewer
# labels hundreds of items, not the run). Annotation spans are stored merged, so their
# lengths add up; the judges' spans are cut into disjoint intervals as in
# ``judgment_intervals``, and consensus spans never overlap.


# The judges' span answers on annotated items with span labels, as disjoint intervals.
_ANNOTATED_JUDGE_INTERVALS = _disjoint(
    _JUDGE_SPANS
    + """
      AND EXISTS (SELECT 1 FROM annotated_spans a
                  WHERE a.run_id = s.run_id AND a.item_id = s.item_id)
    """,
    "run_id, item_id, judge_id",
    "judgment_row",
)


def _annotated_gold_items(labels: str) -> str:
    return f"""
    annotated_spans AS (
        SELECT a.run_id, a.item_id, s[1] AS char_start, s[2] AS char_end
        FROM (
            SELECT run_id, item_id, unnest(json_transform(gold_spans, '[["BIGINT"]]')) AS s
            FROM annotation_labels WHERE has_span_labels
        ) a
        JOIN {labels} g USING (run_id, item_id)
        WHERE s[2] > s[1]
    ),
    annotated_chars AS (
        SELECT a.run_id, a.item_id, coalesce(sum(s.char_end - s.char_start), 0) AS n_chars
        FROM annotation_labels a
        LEFT JOIN annotated_spans s USING (run_id, item_id)
        GROUP BY a.run_id, a.item_id
    ),
    annotated_judge_intervals AS ({_ANNOTATED_JUDGE_INTERVALS}),
    gold_items AS (
        SELECT g.run_id, g.item_id, g.gold_hallucinated AS gold, g.has_span_labels,
               CASE WHEN a.item_id IS NOT NULL THEN a.n_chars
                    ELSE coalesce(z.n_chars, 0) END AS gold_chars
        FROM {labels} g
        LEFT JOIN annotated_chars a
          ON a.run_id = g.run_id AND a.item_id = g.item_id
        LEFT JOIN span_sets z
          ON z.kind = 'gold' AND z.run_id = g.run_id AND z.item_id = g.item_id
    ),"""


def _annotated_gold_overlap(labels: str) -> str:
    return f"""
    overlap_rows AS (
        -- items that keep the dataset's labels: the stored overlaps
        SELECT o.run_id, o.item_id, o.kind, o.judge_a, o.overlap_chars
        FROM span_overlaps o JOIN {labels} g USING (run_id, item_id)
        WHERE o.kind IN ('judge-gold', 'consensus-gold') AND g.has_span_labels
          AND NOT EXISTS (SELECT 1 FROM annotation_labels a
                          WHERE a.run_id = o.run_id AND a.item_id = o.item_id)
        UNION ALL
        SELECT j.run_id, j.item_id, 'judge-gold', j.judge_id,
               sum(least(j.char_end, s.char_end) - greatest(j.char_start, s.char_start))
        FROM annotated_judge_intervals j JOIN annotated_spans s USING (run_id, item_id)
        WHERE j.char_start < s.char_end AND s.char_start < j.char_end
        GROUP BY ALL
        UNION ALL
        SELECT c.run_id, c.item_id, 'consensus-gold', '',
               sum(least(c.char_end, s.char_end) - greatest(c.char_start, s.char_start))
        FROM consensus_spans c
        JOIN consensus k USING (run_id, item_id)
        JOIN annotated_spans s USING (run_id, item_id)
        WHERE k.status = 'ok' AND c.char_start < s.char_end AND s.char_start < c.char_end
        GROUP BY ALL
    ),
    {_gold_overlap("overlap_rows")}"""


def _judge_accuracy_against(view: str, labels: str) -> str:
    """``judge_accuracy`` with the labels of ``labels`` (a view with gold_labels' columns)."""
    return _judge_accuracy(view, _annotated_gold_items(labels), _annotated_gold_overlap(labels))


VIEWS += (
    _ANNOTATION_LABELS,
    _ADJUDICATED_LABELS,
    _judge_accuracy_against("judge_accuracy_annotations", "annotation_labels"),
    _judge_accuracy_against("judge_accuracy_adjudicated", "adjudicated_labels"),
)

AGREEMENT_VIEWS += ("judge_accuracy_annotations", "judge_accuracy_adjudicated")


# -- pairwise judges (issue 42) ------------------------------------------------------------
# A pairwise judge's two orders are its samples 0 (A shown first) and 1 (B shown first),
# both stored in the original labels as B's share of the win: 0 A, 0.5 tie, 1 B. Its item
# verdict (judgments.score) is the one both orders give; a flip is unscored 'inconsistent'.

_HUMAN_PREFERENCE = """
    SELECT run_id, item_id,
           CASE lower(trim(coalesce(metadata->>'preferred', variables->>'preferred')))
               WHEN 'a' THEN 0.0 WHEN 'b' THEN 1.0 WHEN 'tie' THEN 0.5 END AS v
    FROM items
"""

_JUDGE_POSITION_FLIPS = """
    CREATE OR REPLACE VIEW judge_position_flips AS
    WITH orders AS (
        SELECT run_id, item_id, judge_id,
               max(score) FILTER (WHERE sample_index = 0) AS first_order,
               max(score) FILTER (WHERE sample_index = 1) AS second_order
        FROM judgment_samples
        WHERE output_kind = 'preference'
        GROUP BY run_id, item_id, judge_id
    ),
    counts AS (
        SELECT run_id, judge_id,
               count(*) FILTER (WHERE first_order IS NOT NULL AND second_order IS NOT NULL)
                   AS n_pairs,
               count(*) FILTER (WHERE first_order <> second_order) AS n_flips,
               -- the answer shown first: A in the first order, B (stored 1) in the second
               count(*) FILTER (WHERE first_order = 0) + count(*) FILTER (WHERE second_order = 1)
                   AS first_shown_picks,
               count(*) FILTER (WHERE first_order IN (0, 1))
                   + count(*) FILTER (WHERE second_order IN (0, 1)) AS n_decided
        FROM orders GROUP BY run_id, judge_id
    )
    SELECT run_id, judge_id, n_pairs, n_flips,
           CASE WHEN n_pairs > 0 THEN n_flips::DOUBLE / n_pairs END AS flip_rate,
           first_shown_picks, n_decided,
           CASE WHEN n_decided > 0 THEN first_shown_picks::DOUBLE / n_decided END
               AS first_shown_share
    FROM counts
"""

_PAIRWISE_AGREEMENT = f"""
    CREATE OR REPLACE VIEW pairwise_agreement AS
    WITH verdicts AS (
        SELECT run_id, item_id, judge_id, score AS v
        FROM judgments WHERE output_kind = 'preference' AND score IS NOT NULL
    ),
    human AS ({_HUMAN_PREFERENCE}),
    pairs AS (
        SELECT a.run_id, a.judge_id, b.judge_id AS other, 'judge' AS other_kind,
               a.v AS x, b.v AS y
        FROM verdicts a JOIN verdicts b
          ON a.run_id = b.run_id AND a.item_id = b.item_id AND a.judge_id < b.judge_id
        UNION ALL
        SELECT a.run_id, a.judge_id, 'human' AS other, 'human' AS other_kind, a.v, h.v
        FROM verdicts a JOIN human h USING (run_id, item_id)
        WHERE h.v IS NOT NULL
    ),
    counts AS (
        SELECT run_id, judge_id, other, other_kind, count(*) AS n,
               count(*) FILTER (WHERE x = y) AS agree,
               -- chance agreement x n², exact in integers (three classes: A, B, tie)
               count(*) FILTER (WHERE x = 0) * count(*) FILTER (WHERE y = 0)
                   + count(*) FILTER (WHERE x = 1) * count(*) FILTER (WHERE y = 1)
                   + count(*) FILTER (WHERE x = 0.5) * count(*) FILTER (WHERE y = 0.5)
                   AS chance
        FROM pairs GROUP BY run_id, judge_id, other, other_kind
    )
    SELECT run_id, judge_id, other, other_kind, n AS n_items,
           agree::DOUBLE / n AS agreement,
           CASE WHEN chance <> n * n THEN (agree * n - chance)::DOUBLE / (n * n - chance) END
               AS cohen_kappa
    FROM counts
"""

_PAIRWISE_PANEL_SIZE = f"""
    CREATE OR REPLACE VIEW pairwise_panel_size AS
    WITH human AS ({_HUMAN_PREFERENCE}),
    errors AS (
        SELECT j.run_id, j.item_id, j.judge_id, (j.score <> h.v)::DOUBLE AS e
        FROM judgments j JOIN human h USING (run_id, item_id)
        WHERE j.output_kind = 'preference' AND j.score IS NOT NULL AND h.v IS NOT NULL
    ),
    active AS (
        SELECT run_id, count(DISTINCT judge_id) AS n_active FROM errors GROUP BY run_id
    ),
    kept AS (  -- the items where every judge with an error on some item has one
        SELECT e.run_id, e.item_id
        FROM errors e JOIN active a USING (run_id)
        GROUP BY e.run_id, e.item_id, a.n_active HAVING count(*) = a.n_active
    ),
    used AS (SELECT e.* FROM errors e JOIN kept USING (run_id, item_id)),
    varying AS (  -- a judge always right or always wrong there has no error correlation
        SELECT run_id, judge_id FROM used GROUP BY run_id, judge_id HAVING min(e) < max(e)
    ),
    pairs AS (
        SELECT a.run_id, a.judge_id AS judge_a, b.judge_id AS judge_b,
               greatest(-1.0, least(1.0, corr(a.e, b.e))) AS r
        FROM used a
        JOIN used b
          ON a.run_id = b.run_id AND a.item_id = b.item_id AND a.judge_id < b.judge_id
        JOIN varying va ON va.run_id = a.run_id AND va.judge_id = a.judge_id
        JOIN varying vb ON vb.run_id = b.run_id AND vb.judge_id = b.judge_id
        GROUP BY a.run_id, a.judge_id, b.judge_id
    ),
    judged AS (
        SELECT run_id, count(DISTINCT judge_id) AS n, avg(r) AS mean_r
        FROM (SELECT run_id, judge_a AS judge_id, r FROM pairs WHERE r IS NOT NULL
              UNION ALL
              SELECT run_id, judge_b, r FROM pairs WHERE r IS NOT NULL)
        GROUP BY run_id
    )
    -- Kish's design effect, as juryflow.maths.agreement.effective_panel_size: the mean
    -- error correlation clipped to [0, 1]; fewer than two judges with one: no row.
    SELECT k.run_id, a.n_active AS n_judges, k.n AS n_correlated_judges,
           (SELECT count(*) FROM kept WHERE kept.run_id = k.run_id) AS n_items,
           k.mean_r AS mean_error_correlation,
           k.n / (1 + (k.n - 1) * greatest(0.0, least(1.0, k.mean_r))) AS effective_panel_size
    FROM judged k JOIN active a USING (run_id)
    WHERE k.n >= 2
"""

VIEWS += (_JUDGE_POSITION_FLIPS, _PAIRWISE_AGREEMENT, _PAIRWISE_PANEL_SIZE)

AGREEMENT_VIEWS += ("judge_position_flips", "pairwise_agreement", "pairwise_panel_size")
