"""A run's row: created, marked running, finished (on a lake, with the snapshot it completed
at), read; or, for an imported run, written whole with its rows in one transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from juryflow.maths.records import Consensus, Item, Judgment
from juryflow.storage.datasets import RowError
from juryflow.storage.store.base import StoreBase
from juryflow.storage.store.records import _RUN_COLUMNS, _RUN_FIELDS, RunRecord, _run_from_row
from juryflow.storage.store.writes import insert_run_rows


def _completed_message(run_id: str) -> str:
    return f"run {run_id} completed"


class RunsMixin(StoreBase):
    def create_run(self, run: RunRecord) -> None:
        self.transact(lambda con: self.insert_run_in(con, run), f"create run {run.run_id}")

    @staticmethod
    def insert_run_in(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
        """The run's row, inside the caller's transaction."""
        con.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * len(_RUN_FIELDS))})",
            [
                run.run_id,
                run.kind,
                run.suite,
                run.status,
                run.started_at,
                run.finished_at,
                run.dataset,
                run.panel_name,
                json.dumps(run.panel),
                json.dumps(run.prompts),
                run.quorum,
                run.n_judges,
                run.parent_run_id,
                json.dumps(run.parameters) if run.parameters is not None else None,
                run.flow_run_id,
                run.error,
                json.dumps(run.consensus) if run.consensus is not None else None,
                run.dataset_fingerprint,
            ],
        )

    def write_completed_run(
        self,
        run: RunRecord,
        items: Sequence[Item],
        judgments: Sequence[Judgment],
        consensus: Sequence[Consensus],
        errors: Sequence[RowError] = (),
    ) -> None:
        """A run made whole elsewhere (``juryflow import``), in one transaction: its row,
        items, judgments, consensus and row errors, marked completed. A failure leaves no
        trace of it, not even the run's row."""

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            self.insert_run_in(con, run)
            insert_run_rows(con, run.run_id, items, judgments, consensus, errors)
            self.complete_run_in(con, run.run_id)

        self.transact(_body, f"write run {run.run_id}")
        self.record_finished_snapshot(run.run_id)

    def mark_running(self, run_id: str, flow_run_id: str | None = None) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, "
                "flow_run_id = coalesce(?, flow_run_id) WHERE run_id = ?",
                [flow_run_id, run_id],
            )

        self.transact(_body, f"mark run {run_id} running")

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        def _body(con: duckdb.DuckDBPyConnection) -> None:
            if status == "completed":
                self.complete_run_in(con, run_id)
                return
            con.execute(
                "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
                [status, datetime.now(UTC), error, run_id],
            )

        self.transact(_body, f"record the end of run {run_id}")
        if isinstance(self.path, Path):
            # here: the journal module the lock sits beside imports the store
            from juryflow.storage.store.liveness import release

            release(self.path, run_id)  # the row says how it ended: no process to vouch for
        if status == "completed":
            self.record_finished_snapshot(run_id)

    def complete_run_in(self, con: duckdb.DuckDBPyConnection, run_id: str) -> None:
        """Mark the run completed, inside the caller's transaction; on a lake the commit is
        stamped so that :meth:`record_finished_snapshot` finds its snapshot."""
        con.execute(
            "UPDATE runs SET status = 'completed', finished_at = ?, error = NULL WHERE run_id = ?",
            [datetime.now(UTC), run_id],
        )
        if self.lake is not None:
            con.execute(
                "CALL lake.set_commit_message('juryflow', ?, extra_info => ?)",
                [_completed_message(run_id), json.dumps({"run_id": run_id})],
            )

    def record_finished_snapshot(self, run_id: str) -> None:
        """On a lake: the snapshot the run completed at, into ``runs.finished_snapshot``
        (``juryflow sql --at-run`` reads the store as it was there). Found by the commit's
        message, not as the current snapshot: another writer may have committed since."""
        if self.lake is None:
            return

        def _body(con: duckdb.DuckDBPyConnection) -> None:
            row = con.execute(
                "SELECT max(snapshot_id) FROM ducklake_snapshots('lake') WHERE commit_message = ?",
                [_completed_message(run_id)],
            ).fetchone()
            if row is not None and row[0] is not None:
                con.execute(
                    "UPDATE runs SET finished_snapshot = ? WHERE run_id = ?", [row[0], run_id]
                )

        self.transact(_body, f"record the snapshot of run {run_id}")

    def get_run(self, run_id: str) -> RunRecord | None:
        with self.read() as con:
            return self.get_run_in(con, run_id)

    @staticmethod
    def get_run_in(con: duckdb.DuckDBPyConnection, run_id: str) -> RunRecord | None:
        cursor = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
        names = [d[0] for d in cursor.description or ()]
        found = cursor.fetchone()
        return _run_from_row(names, found) if found else None

    def latest_run_id(self, suite: str | None = None, status: str | None = None) -> str | None:
        with self.read() as con:
            row = con.execute(
                "SELECT run_id FROM runs WHERE (? IS NULL OR suite = ?) "
                "AND (? IS NULL OR status = ?) ORDER BY started_at DESC, run_id DESC LIMIT 1",
                [suite, suite, status, status],
            ).fetchone()
        return str(row[0]) if row else None
