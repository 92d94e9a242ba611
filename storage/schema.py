"""The store's tables, as numbered migrations; views are recreated on every open.

Column names avoid SQL keywords (``char_start`` / ``char_end``, not ``start`` / ``end``) so
users can write queries without quoting.
"""

from __future__ import annotations

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL,            -- evaluate | reaggregate
            suite VARCHAR NOT NULL,
            status VARCHAR NOT NULL,          -- running | completed | failed
            started_at TIMESTAMPTZ NOT NULL,
            finished_at TIMESTAMPTZ,
            dataset VARCHAR,
            panel_name VARCHAR NOT NULL,
            panel JSON NOT NULL,              -- the panel spec, keys never included
            prompts JSON NOT NULL,            -- [{name, version, sha256}]
            quorum INTEGER NOT NULL,
            n_judges INTEGER NOT NULL,
            parent_run_id VARCHAR,            -- reaggregate: the run whose judgments it reused
            parameters JSON,
            flow_run_id VARCHAR,
            error VARCHAR
        );
        CREATE TABLE items (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            row_number INTEGER NOT NULL,
            variables JSON NOT NULL,
            gold_hallucinated BOOLEAN,
            gold_spans JSON,                  -- [[start, end], ...] into the judged text
            metadata JSON,
            PRIMARY KEY (run_id, item_id)
        );
        CREATE TABLE row_errors (
            run_id VARCHAR NOT NULL,
            row_number INTEGER NOT NULL,
            item_id VARCHAR,
            error VARCHAR NOT NULL
        );
        CREATE TABLE judgments (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            provider VARCHAR NOT NULL,
            model VARCHAR,
            prompt_name VARCHAR,
            prompt_hash VARCHAR,
            output_kind VARCHAR NOT NULL,
            score DOUBLE,                     -- NULL when unscored
            verdict BOOLEAN,                  -- score > 0.5
            unscored_reason VARCHAR,
            reasoning VARCHAR,
            raw_output VARCHAR,
            latency_ms DOUBLE,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost_usd DOUBLE,
            attempts INTEGER NOT NULL,
            cache_key VARCHAR,
            cached BOOLEAN NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (run_id, item_id, judge_id)
        );
        CREATE TABLE judgment_spans (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            span_index INTEGER NOT NULL,
            char_start INTEGER,               -- NULL when the span could not be anchored
            char_end INTEGER,
            text VARCHAR NOT NULL,
            match_kind VARCHAR NOT NULL,      -- exact | repeat | normalized | fuzzy | unmatched | detector
            requested VARCHAR,
            similarity DOUBLE,
            PRIMARY KEY (run_id, item_id, judge_id, span_index)
        );
        CREATE TABLE consensus (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            status VARCHAR NOT NULL,          -- ok | insufficient
            n_judges INTEGER NOT NULL,
            n_answered INTEGER NOT NULL,
            n_scored INTEGER NOT NULL,
            n_span_judges INTEGER NOT NULL,
            score_median DOUBLE,
            score_min DOUBLE,
            score_max DOUBLE,
            score_spread DOUBLE,
            hallucinated BOOLEAN,
            PRIMARY KEY (run_id, item_id)
        );
        CREATE TABLE consensus_spans (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            span_index INTEGER NOT NULL,
            char_start INTEGER NOT NULL,
            char_end INTEGER NOT NULL,
            text VARCHAR NOT NULL,
            votes INTEGER NOT NULL,
            min_votes INTEGER NOT NULL,
            PRIMARY KEY (run_id, item_id, span_index)
        );
        CREATE INDEX judgments_cache_key ON judgments (cache_key);
        """,
    ),
)

LATEST_VERSION = MIGRATIONS[-1][0]

TABLES = (
    "runs",
    "items",
    "row_errors",
    "judgments",
    "judgment_spans",
    "consensus",
    "consensus_spans",
)
