"""SQL views over the tables, recreated on every migrate so they always match the code."""

from __future__ import annotations

VIEWS: tuple[str, ...] = (
    """
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
    """,
)
