"""The 429 answers a run's judges got, kept per invocation and summed when read."""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

from juryflow.storage.store.base import StoreBase


class RateLimitsMixin(StoreBase):
    def add_rate_limited(self, run_id: str, counts: Mapping[str, int]) -> None:
        """Add one invocation's (or worker's) 429 answers per judge. Zeros are kept: they
        say the judge's answers were counted."""
        if not counts:
            return
        rows = [[run_id, judge_id, int(answers)] for judge_id, answers in counts.items()]

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.executemany("INSERT INTO rate_limited VALUES (?, ?, ?)", rows)

        self.transact(_body, "record the run's 429 answers")

    def rate_limited(self, run_id: str) -> dict[str, int]:
        """429 answers per judge over every invocation of the run that counted them."""
        with self.read() as con:
            rows = con.execute(
                "SELECT judge_id, sum(answers) FROM rate_limited WHERE run_id = ? "
                "GROUP BY judge_id ORDER BY judge_id",
                [run_id],
            ).fetchall()
        return {str(judge): int(total) for judge, total in rows}
