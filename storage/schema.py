"""The store's tables, as numbered migrations; views are recreated on every open.

Column names avoid SQL keywords (``char_start`` / ``char_end``, not ``start`` / ``end``) so
users can write queries without quoting.
"""

from __future__ import annotations

import re

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL,            -- evaluate | reaggregate
            suite VARCHAR NOT NULL,
            status VARCHAR NOT NULL,          -- running | completed | failed | interrupted
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
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
            -- One row per (run, item, judge) is kept by the flow (resume skips stored pairs),
            -- not by a primary key: the key's index halves bulk-insert speed.
        );
        CREATE TABLE judgment_spans (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            span_index INTEGER NOT NULL,
            char_start INTEGER,               -- NULL when the span could not be anchored
            char_end INTEGER,
            text VARCHAR NOT NULL,
            match_kind VARCHAR NOT NULL,      -- exact|repeat|normalized|fuzzy|unmatched|detector
            requested VARCHAR,
            similarity DOUBLE
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
            chars_any INTEGER NOT NULL,       -- characters any answering span judge marked
            chars_all INTEGER NOT NULL,       -- characters every answering span judge marked
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
        """,
    ),
    (
        2,
        """
        CREATE TABLE comparisons (
            comparison_id VARCHAR PRIMARY KEY,
            run_id VARCHAR NOT NULL,          -- the run compared
            baseline_run_id VARCHAR NOT NULL, -- what it was compared with
            created_at TIMESTAMPTZ NOT NULL,
            n_paired INTEGER NOT NULL,        -- items scored by both runs
            mean_delta DOUBLE,                -- mean paired consensus score change
            median_delta DOUBLE,
            ci_low DOUBLE,                    -- 95% bootstrap interval of mean_delta
            ci_high DOUBLE,
            wilcoxon_statistic DOUBLE,
            p_value DOUBLE,
            flips_to_hallucinated INTEGER NOT NULL,
            flips_to_clean INTEGER NOT NULL,
            agreement_before DOUBLE,          -- Krippendorff interval alpha
            agreement_after DOUBLE,
            regressed BOOLEAN NOT NULL,
            message VARCHAR NOT NULL,
            thresholds JSON NOT NULL,
            flipped_items JSON                -- {to_hallucinated: [...], to_clean: [...]}
        );
        CREATE TABLE comparison_judges (
            comparison_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            drift DOUBLE,                     -- mean paired score change of this judge
            n_paired INTEGER NOT NULL,
            PRIMARY KEY (comparison_id, judge_id)
        );
        """,
    ),
)

MIGRATIONS += (
    (
        3,
        """
        -- Named consensus rules (issue 9): the rule a run's consensus was made with, each
        -- judge's verdict threshold, and what the rule decided per item.
        ALTER TABLE runs ADD COLUMN consensus JSON;
        ALTER TABLE judgments ADD COLUMN verdict_threshold DOUBLE;
        ALTER TABLE consensus ADD COLUMN score DOUBLE;          -- the rule's consensus score
        ALTER TABLE consensus ADD COLUMN verdict_rule VARCHAR;  -- spans | majority | score:T ...
        ALTER TABLE consensus ADD COLUMN unlocalised BOOLEAN DEFAULT false;
        UPDATE consensus SET score = score_median, verdict_rule = 'majority'
            WHERE score IS NULL;
        UPDATE judgments SET verdict_threshold = 0.5 WHERE verdict_threshold IS NULL;
        CREATE TABLE calibrations (
            name VARCHAR PRIMARY KEY,
            created_at TIMESTAMPTZ NOT NULL,
            run_id VARCHAR NOT NULL,          -- the labelled run it was fitted on
            rule JSON NOT NULL,               -- the consensus rule chosen, weights included
            folds INTEGER NOT NULL,
            group_column VARCHAR,             -- items of one group never straddle folds
            seed INTEGER NOT NULL,
            report JSON NOT NULL              -- out-of-fold P/R/F1 of the rule, default, judges
        );
        CREATE TABLE judge_reliability (
            run_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            level VARCHAR NOT NULL,           -- verdicts | characters
            method VARCHAR NOT NULL,          -- dawid_skene (no labels) | gold (human labels)
            sensitivity DOUBLE,
            specificity DOUBLE,
            prevalence DOUBLE,
            n_units BIGINT NOT NULL,
            effective_panel_size DOUBLE,      -- how independent the judges' errors look
            note VARCHAR,
            PRIMARY KEY (run_id, judge_id, level, method)
        );
        """,
    ),
)

MIGRATIONS += (
    (
        4,
        """
        -- Issue 10: what the run read (size and SHA-256 of the dataset file), so that
        -- --resume can refuse a dataset that changed since; NULL for runs started before.
        ALTER TABLE runs ADD COLUMN dataset_fingerprint VARCHAR;
        """,
    ),
)


MIGRATIONS += (
    (
        5,
        """
        -- Issue 12: what the span views add up, written in the same transaction as the
        -- spans it comes from (storage/store/span_sets.py), so that no view merges spans at query
        -- time. A set: a scored span answer's anchored spans (kind judge), an ok
        -- consensus's spans (consensus), an item's gold spans (gold); only sets and
        -- overlaps that flag at least one character have a row. Rows written before
        -- are backfilled by storage/store/span_sets.py (BACKFILLS), a run's items in chunks.
        CREATE TABLE span_sets (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,            -- judge | consensus | gold
            judge_id VARCHAR NOT NULL,        -- '' unless kind = 'judge'
            n_chars BIGINT NOT NULL,          -- characters flagged, each counted once
            starts BIGINT[] NOT NULL,         -- the set as disjoint intervals
            ends BIGINT[] NOT NULL
        );
        CREATE TABLE span_overlaps (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,    -- judge-judge | judge-consensus | judge-gold | consensus-gold
            judge_a VARCHAR NOT NULL, -- judge-judge: judge_a < judge_b; '' for no judge
            judge_b VARCHAR NOT NULL,
            overlap_chars BIGINT NOT NULL     -- characters both sets flag
        );
        -- a scored span answer's flagged characters, each counted once (its span_sets
        -- size, 0 when it flags none); NULL for other judgments
        ALTER TABLE judgments ADD COLUMN span_chars BIGINT;
        """,
    ),
)

MIGRATIONS += (
    (
        6,
        """
        -- Issue 13: reviewers' adjudications of a run's items (`juryflow view`). Kept apart
        -- from items: an annotation never overwrites the dataset's own labels, and an
        -- item's newest annotation is its label under --gold annotations|both (the
        -- annotation_labels / adjudicated_labels views).
        -- IF NOT EXISTS: a store whose version rows were rolled back keeps its annotations
        CREATE TABLE IF NOT EXISTS annotations (
            annotation_id BIGINT PRIMARY KEY, -- max + 1, inside the writing transaction
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            reviewer VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            verdict BOOLEAN,                  -- true hallucinated, false clean, NULL unset
            decisions JSON NOT NULL,          -- [{char_start, char_end, accepted}] per
                                              -- consensus span the reviewer decided on
            missed JSON NOT NULL,             -- [[start, end], ...] spans marked by hand
            spans JSON NOT NULL,              -- the labelled spans: accepted + missed, merged
            note VARCHAR NOT NULL DEFAULT ''
        );
        """,
    ),
)

MIGRATIONS += (
    (
        7,
        """
        -- Issue 12: items without a primary key. Checking the key made every chunk write
        -- load the key's index, and read the table's row group back at the checkpoint
        -- that closes the chunk's connection, so a run's memory grew with the items it
        -- had stored. One row per (run_id, item_id) is kept by the writers instead
        -- (storage/store/writes.py inserts only the items a run has not stored yet), as for
        -- judgments. Same columns in the same order; the rows are kept.
        ALTER TABLE items RENAME TO items_v6;
        CREATE TABLE items (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            row_number INTEGER NOT NULL,
            variables JSON NOT NULL,
            gold_hallucinated BOOLEAN,
            gold_spans JSON,                  -- [[start, end], ...] into the judged text
            metadata JSON
        );
        INSERT INTO items SELECT * FROM items_v6;
        DROP TABLE items_v6;
        """,
    ),
)

MIGRATIONS += (
    (
        8,
        """
        -- Issue 14: a store many processes and machines write (DuckLake).
        -- The DuckLake snapshot a run completed at: `juryflow sql --at-run` reads it.
        ALTER TABLE runs ADD COLUMN finished_snapshot BIGINT;
        -- A sharded run's shards: who judges each, and when it was done. Claiming a shard
        -- is an UPDATE of its row, which DuckLake lets only one concurrent writer commit.
        CREATE TABLE run_shards (
            run_id VARCHAR NOT NULL,
            shard INTEGER NOT NULL,           -- 1..n_shards
            n_shards INTEGER NOT NULL,
            owner VARCHAR NOT NULL DEFAULT '',  -- host:pid of the process judging it
            claimed_at TIMESTAMPTZ,
            finished_at TIMESTAMPTZ,
            PRIMARY KEY (run_id, shard)
        );
        -- Small facts about the store: the hash of its views; `run_creation` and
        -- `annotation_ids`, rows every writer creating a run (an annotation) UPDATEs, so
        -- that on a lake, which has no keys, two such writers conflict and one runs again.
        CREATE TABLE store_meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR NOT NULL
        );
        INSERT INTO store_meta VALUES ('run_creation', '0'), ('annotation_ids', '0');
        """,
    ),
)

MIGRATIONS += (
    (
        9,
        """
        -- A shard's owner renews its claim while it judges (storage/shards.py ShardLease);
        -- a claim not renewed for JURYFLOW_SHARD_LEASE_SECONDS may be taken over from
        -- another machine, where the owner's process cannot be checked.
        ALTER TABLE run_shards ADD COLUMN renewed_at TIMESTAMPTZ;
        """,
    ),
)

MIGRATIONS += (
    (
        10,
        """
        -- Issue 24: the provider's prompt cache. Of a call's input_tokens (every prompt
        -- token, cached ones included), those written to the cache (Anthropic only) and
        -- those read from it; NULL where the provider said nothing (judgments before).
        ALTER TABLE judgments ADD COLUMN cache_write_tokens BIGINT;
        ALTER TABLE judgments ADD COLUMN cache_read_tokens BIGINT;
        """,
    ),
)

MIGRATIONS += (
    (
        11,
        """
        -- Issue 24: exact early stopping. A judge a run did not call on an item, because the
        -- judges it did call had already fixed the consensus; never a judgment, never
        -- unscored. `--resume` does not call it either.
        CREATE TABLE skipped_judgments (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            reason VARCHAR NOT NULL           -- decided
        );
        -- The items an early-stopping run had every judge judge anyway (a seeded random
        -- sample): agreement between judges is measured on them.
        CREATE TABLE audit_items (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL
        );
        """,
    ),
)

MIGRATIONS += (
    (
        12,
        """
        -- Issue 24: batch mode. The provider's batch a judgment was answered in (priced at
        -- the batch discount); NULL for a real-time call.
        ALTER TABLE judgments ADD COLUMN batch_id VARCHAR;
        """,
    ),
)

MIGRATIONS += (
    (
        13,
        """
        -- Issue 24: the 429 answers each LLM judge got (retried calls included), one row per
        -- judge per invocation of a run or shard that counted them: a resumed run and one
        -- judged by --workers processes sum them all.
        CREATE TABLE rate_limited (
            run_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            answers BIGINT NOT NULL
        );
        """,
    ),
)

MIGRATIONS += (
    (
        14,
        """
        -- Issue 26: repeated samples per judge. A judge with samples: N > 1 keeps its reduced
        -- answer in judgments (one row per run, item, judge, as always) and each sample here;
        -- a judge with one sample has no rows here.
        CREATE TABLE judgment_samples (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL,    -- 0..N-1
            output_kind VARCHAR NOT NULL,
            score DOUBLE,                     -- NULL when unscored
            verdict BOOLEAN,
            unscored_reason VARCHAR,
            raw_output VARCHAR,
            latency_ms DOUBLE,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost_usd DOUBLE,
            cache_key VARCHAR,
            cached BOOLEAN NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE judgment_sample_spans (
            run_id VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL,
            judge_id VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL,
            span_index INTEGER NOT NULL,
            char_start INTEGER,               -- NULL when the span could not be anchored
            char_end INTEGER,
            text VARCHAR NOT NULL
        );
        """,
    ),
)

# Numbered blocks may be written in any order in this file; they apply in number order.
MIGRATIONS = tuple(sorted(MIGRATIONS))

LATEST_VERSION = MIGRATIONS[-1][0]

TABLES = (
    "runs",
    "items",
    "row_errors",
    "judgments",
    "judgment_spans",
    "consensus",
    "consensus_spans",
    "comparisons",
    "comparison_judges",
    "calibrations",
    "judge_reliability",
    "span_sets",
    "span_overlaps",
    "annotations",
    "run_shards",
    "store_meta",
    "skipped_judgments",
    "audit_items",
    "rate_limited",
    "judgment_samples",
    "judgment_sample_spans",
)


_CREATED = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)")


def tables_at(version: int) -> frozenset[str]:
    """The tables a store at schema ``version`` must have (``schema_version`` included).

    Read from the migrations themselves, so that a new migration cannot forget to list its
    tables here.
    """
    created = {"schema_version"}
    for number, ddl in MIGRATIONS:
        if number <= version:
            created.update(_CREATED.findall(ddl))
    return frozenset(created)
