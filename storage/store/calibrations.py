"""Named calibrations and a run's estimated judge reliabilities."""

from __future__ import annotations

import json
from collections.abc import Sequence

import duckdb

from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.records import CalibrationRecord, ReliabilityRow, _reliability_values


class CalibrationsMixin(StoreBase):
    def save_calibration(self, record: CalibrationRecord) -> None:
        """Store a named calibration; a name used before is replaced (the newest fit wins)."""

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM calibrations WHERE name = ?", [record.name])
            con.execute(
                "INSERT INTO calibrations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    record.name,
                    record.created_at,
                    record.run_id,
                    json.dumps(record.rule),
                    record.folds,
                    record.group_column,
                    record.seed,
                    json.dumps(record.report),
                ],
            )

        self.transact(_body)

    def get_calibration(self, name: str) -> CalibrationRecord | None:
        with self.read() as con:
            row = con.execute(
                "SELECT name, created_at, run_id, rule, folds, group_column, seed, report "
                "FROM calibrations WHERE name = ?",
                [name],
            ).fetchone()
        if row is None:
            return None
        values = list(row)
        values[3], values[7] = json.loads(values[3]), json.loads(values[7])
        return CalibrationRecord(*values)

    def calibration_names(self) -> list[str]:
        with self.read() as con:
            rows = con.execute("SELECT name FROM calibrations ORDER BY name").fetchall()
        return [str(r[0]) for r in rows]

    def save_reliability(self, run_id: str, rows: Sequence[ReliabilityRow]) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("DELETE FROM judge_reliability WHERE run_id = ?", [run_id])
            if rows:
                con.executemany(
                    "INSERT INTO judge_reliability VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(run_id, *_reliability_values(r)) for r in rows],
                )

        self.transact(_body)

    def reliability(self, run_id: str) -> list[ReliabilityRow]:
        with self.read() as con:
            rows = con.execute(
                "SELECT judge_id, level, method, sensitivity, specificity, prevalence, n_units, "
                "effective_panel_size, note FROM judge_reliability WHERE run_id = ? "
                "ORDER BY level DESC, method, judge_id",
                [run_id],
            ).fetchall()
        return [ReliabilityRow(*r) for r in rows]
