"""The offline panel end to end: real Prefect (test harness), a real DuckDB file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import pytest

from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from tests.conftest import SAMPLE

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _count(db: Path, sql: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(sql).fetchone()
        assert row is not None
        return int(row[0])
    finally:
        con.close()


def test_bundled_sample_through_the_offline_panel(db_path: Path) -> None:
    summary = asyncio.run(evaluate(RunRequest(db=str(db_path), chunk_size=25)))
    assert summary["items"] == 60 and summary["judges"] == 3
    assert summary["scored"] + summary["unscored"] == 180
    # exactly one judgments row per (item, judge) and one consensus row per item
    assert _count(db_path, "SELECT count(*) FROM judgments") == 180
    assert _count(db_path, "SELECT count(DISTINCT (item_id, judge_id)) FROM judgments") == 180
    assert _count(db_path, "SELECT count(*) FROM consensus") == 60
    assert _count(db_path, "SELECT count(*) FROM items") == 60
    assert _count(db_path, "SELECT count(*) FROM runs WHERE status = 'completed'") == 1
    # spans point into the judged text
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM judgment_spans s JOIN items i USING (run_id, item_id) "
            "WHERE substr(i.variables->>'response', s.char_start + 1, "
            "s.char_end - s.char_start) <> s.text",
        )
        == 0
    )
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM consensus_spans s JOIN items i USING (run_id, item_id) "
            "WHERE substr(i.variables->>'response', s.char_start + 1, "
            "s.char_end - s.char_start) <> s.text",
        )
        == 0
    )


def test_run_records_panel_prompts_dataset_and_times(db_path: Path, tmp_path: Path) -> None:
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "name: two\nquorum: 2\njudges:\n"
        "  - {id: numbers, provider: offline, detector: numbers}\n"
        "  - {id: names, provider: offline, detector: names}\n",
        encoding="utf-8",
    )
    summary = asyncio.run(
        evaluate(RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(db_path)))
    )
    con = duckdb.connect(str(db_path), read_only=True)
    row = con.execute(
        "SELECT panel_name, quorum, n_judges, dataset, started_at <= finished_at, status, "
        "json_array_length(panel->'judges') FROM runs WHERE run_id = ?",
        [summary["run_id"]],
    ).fetchone()
    con.close()
    assert row == ("two", 2, 2, str(SAMPLE), True, "completed", 2)
