"""Shared fixtures: one real Prefect test server per session, real DuckDB files in tmp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "ragtruth_data2txt_sample.jsonl"
SHARED_DATA = REPO.parent / "shared" / "data" / "ragtruth"


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"
