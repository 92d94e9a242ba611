"""Prefect artifacts: table numbers rounded, and a link artifact to the regression's report."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from juryflow.flows.artifacts import rounded, rounded_table
from juryflow.planning.run_request import RunRequest
from tests.conftest import REPO

SAMPLE = REPO / "examples" / "ragtruth_data2txt_sample.jsonl"


def test_table_floats_are_rounded_and_json_safe() -> None:
    rows = [
        {
            "judge_id": "numbers",
            "scored": 60,
            "mean_score": 0.28333333333333333,
            "tiny": 0.000012345678,
            "zero": 0.0,
            "missing": float("nan"),
            "inf": math.inf,
            "none": None,
        }
    ]
    assert rounded_table(rows) == [
        {
            "judge_id": "numbers",
            "scored": 60,
            "mean_score": 0.2833,
            "tiny": 1.23e-05,  # 4 decimals would turn it into 0
            "zero": 0.0,
            "missing": None,
            "inf": None,
            "none": None,
        }
    ]
    assert rounded(-0.123456) == -0.1235 and rounded(True) is True


def _decimals(value: float) -> int:
    text = repr(value)
    return len(text.split(".", 1)[1]) if "." in text and "e" not in text else 0


@pytest.mark.usefixtures("prefect_harness")
def test_regression_links_its_report_and_rounds_its_tables(tmp_path: Path) -> None:
    from juryflow.flows.regression import regression

    subset = tmp_path / "subset.jsonl"
    subset.write_text(
        "".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:8]),
        encoding="utf-8",
    )
    report = tmp_path / "reports" / "nightly.html"
    state = asyncio.run(
        regression(
            RunRequest(
                dataset=str(subset), db=str(tmp_path / "store.duckdb"), suite="artifacts-test"
            ),
            report=str(report),
            return_state=True,
        )
    )
    assert state.is_completed(), state.message
    assert report.is_file() and "<html" in report.read_text(encoding="utf-8")[:200].lower()

    artifacts = asyncio.run(_artifacts("juryflow-%artifacts-test"))
    # Prefect stores a link artifact as markdown: [text](link)
    links = [a for a in artifacts if a["key"] == "juryflow-report-artifacts-test"]
    assert links, "no link artifact to the report"
    assert f"({report.resolve().as_uri()})" in links[0]["data"]
    tables = [a for a in artifacts if a["type"] == "table"]
    assert tables
    for table in tables:
        rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
        floats = [v for row in rows for v in row.values() if isinstance(v, float)]
        assert floats and all(_decimals(v) <= 4 for v in floats), rows


async def _artifacts(key_like: str) -> list[dict[str, Any]]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        # A raw request, as in tests/test_regression.py: Prefect's client sends explicit
        # nulls that this server's filter endpoint rejects.
        response = await client._client.post(
            "/artifacts/filter",
            json={
                "artifacts": {"key": {"like_": key_like}},
                "limit": 100,
                "offset": 0,
                "sort": "CREATED_DESC",
            },
        )
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()
    return result
