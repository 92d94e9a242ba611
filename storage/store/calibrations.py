"""Named calibrations and a run's estimated judge reliabilities."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import duckdb

from juryflow.storage.connection import StoreError
from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.records import CalibrationRecord, ReliabilityRow, _reliability_values

_CALIBRATION_COLUMNS = "name, created_at, run_id, rule, folds, group_column, seed, report"


def _calibration(row: Sequence[Any]) -> CalibrationRecord:
    values = list(row)
    values[3], values[7] = json.loads(values[3]), json.loads(values[7])
    return CalibrationRecord(*values)


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
                f"SELECT {_CALIBRATION_COLUMNS} FROM calibrations WHERE name = ?", [name]
            ).fetchone()
        return None if row is None else _calibration(row)

    def calibrations_of(self, run_id: str) -> list[CalibrationRecord]:
        """The calibrations fitted on run ``run_id``, newest first (what its viewer page
        shows); a read DuckDB refuses is one :class:`StoreError` line."""
        try:
            with self.read() as con:
                rows = con.execute(
                    f"SELECT {_CALIBRATION_COLUMNS} FROM calibrations WHERE run_id = ? "
                    "ORDER BY created_at DESC, name",
                    [run_id],
                ).fetchall()
        except duckdb.Error as error:
            message = " ".join(str(error).split())
            raise StoreError(
                f"cannot read the calibrations of run {run_id} in {self.path}: {message}"
            ) from None
        return [_calibration(row) for row in rows]

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
