"""Deleting runs from a store (`juryflow runs delete`, `juryflow store prune`).

A run's rows are in every table with a ``run_id`` column (found in the catalogue, so a
table a later migration adds is not forgotten), and in ``comparisons`` as either side. They
go in one transaction: nothing is half-deleted. What a user would regret is refused unless
forced, each in one line: a run still running, a suite's baseline (the run the next
regression compares with), reviewers' annotations, and runs made from it (`reaggregate`).
Calibrations stay: a stored rule stands on its own. A DuckDB file does not shrink: the space
is reused by later writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from juryflow.storage.store.base import StoreBase


class DeletionRefused(ValueError):
    """Deleting would lose something the user would want; the message names it and the fix."""


@dataclass(frozen=True, slots=True)
class Deleted:
    run_ids: tuple[str, ...]
    rows: dict[str, int]
    """Rows removed per table."""


@dataclass(frozen=True, slots=True)
class RunFacts:
    run_id: str
    suite: str
    status: str
    parent_run_id: str | None
    annotations: int
    baseline: bool
    """The newest completed, not regressed, run of its suite: the next regression's baseline."""


_FACTS = """
    SELECT r.run_id, r.suite, r.status, r.parent_run_id,
           (SELECT count(*) FROM annotations a WHERE a.run_id = r.run_id) AS annotations,
           r.run_id = (
               SELECT b.run_id FROM runs b
               WHERE b.suite = r.suite AND b.status = 'completed'
                 AND NOT EXISTS (SELECT 1 FROM comparisons c WHERE c.run_id = b.run_id
                                 AND c.regressed)
               ORDER BY b.started_at DESC, b.run_id DESC LIMIT 1
           ) AS baseline
    FROM runs r ORDER BY r.suite, r.started_at DESC, r.run_id DESC
"""

_RUN_TABLES = """
    SELECT DISTINCT t.table_name FROM duckdb_tables() t
    JOIN duckdb_columns() c USING (database_name, schema_name, table_name)
    WHERE t.database_name = current_database() AND t.schema_name = current_schema()
      AND c.column_name = 'run_id' AND t.table_name NOT IN ('runs', 'comparisons')
    ORDER BY t.table_name
"""


def refusals(
    facts: Sequence[RunFacts], run_ids: Sequence[str], every: Sequence[RunFacts]
) -> list[str]:
    """Why deleting ``run_ids`` would lose something, one line each (empty: nothing)."""
    doomed = set(run_ids)
    children: dict[str, list[str]] = defaultdict(list)
    for f in every:
        if f.parent_run_id in doomed and f.run_id not in doomed:
            children[f.parent_run_id].append(f.run_id)
    lines = []
    for f in facts:
        if f.status == "running":
            lines.append(f"run {f.run_id} is running (or was killed without saying so): stop "
                         "it, or `juryflow run --resume` it to its end, first")  # fmt: skip
        if f.baseline:
            lines.append(f"run {f.run_id} is the baseline of suite {f.suite!r}: the next "
                         "`juryflow regression` would compare with an older run")  # fmt: skip
        if f.annotations:
            lines.append(f"run {f.run_id} has {f.annotations} reviewers' annotations, which "
                         "would be lost (`juryflow export-annotations` keeps them)")  # fmt: skip
        if children.get(f.run_id):
            lines.append(f"run {f.run_id} is the source of {', '.join(children[f.run_id])} "
                         "(reaggregated from it)")  # fmt: skip
    return lines


def prune_choice(every: Sequence[RunFacts], keep: int) -> list[str]:
    """The runs `store prune --keep N` deletes: in each suite, all but its newest ``keep``
    runs (``every`` is newest first within a suite), never a running one."""
    seen: dict[str, int] = defaultdict(int)
    doomed = []
    for f in every:
        seen[f.suite] += 1
        if seen[f.suite] > keep and f.status != "running":
            doomed.append(f.run_id)
    return doomed


class DeletionMixin(StoreBase):
    def run_facts(self) -> list[RunFacts]:
        """Every run, by suite, newest first, with what deleting it would lose."""
        with self.read() as con:
            rows = con.execute(_FACTS).fetchall()
        return [
            RunFacts(str(r[0]), str(r[1]), str(r[2]), r[3], int(r[4]), bool(r[5])) for r in rows
        ]

    def delete_runs(self, run_ids: Sequence[str], force: bool = False) -> Deleted:
        """Delete ``run_ids`` whole, in one transaction; raises :class:`DeletionRefused`
        naming what would be lost (unless ``force``) or a run the store does not have."""
        every = self.run_facts()
        by_id = {f.run_id: f for f in every}
        unknown = [r for r in run_ids if r not in by_id]
        if unknown:
            raise DeletionRefused(
                f"no run {', '.join(unknown)} in {self.path}; `juryflow runs` lists them"
            )
        if not force:
            lines = refusals([by_id[r] for r in run_ids], run_ids, every)
            if lines:
                raise DeletionRefused("; ".join(lines) + "; --force deletes anyway")
        ids = list(dict.fromkeys(run_ids))

        def body(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
            removed: dict[str, int] = {}
            tables = [str(t[0]) for t in con.execute(_RUN_TABLES).fetchall()]
            compared = [
                str(c[0])
                for c in con.execute(
                    "SELECT comparison_id FROM comparisons "
                    "WHERE list_contains(?, run_id) OR list_contains(?, baseline_run_id)",
                    [ids, ids],
                ).fetchall()
            ]
            statements = [
                (t, f'DELETE FROM "{t}" WHERE list_contains(?, run_id)', [ids]) for t in tables
            ]
            statements += [
                ("comparison_judges",
                 "DELETE FROM comparison_judges WHERE list_contains(?, comparison_id)",
                 [compared]),
                ("comparisons",
                 "DELETE FROM comparisons WHERE list_contains(?, comparison_id)", [compared]),
                ("runs", "DELETE FROM runs WHERE list_contains(?, run_id)", [ids]),
            ]  # fmt: skip
            for table, sql, parameters in statements:
                found = con.execute(sql, parameters).fetchone()
                removed[table] = int(found[0]) if found else 0
            return removed

        removed = self.transact(body, f"delete run(s) {', '.join(ids)}")
        return Deleted(tuple(ids), {t: n for t, n in removed.items() if n})
