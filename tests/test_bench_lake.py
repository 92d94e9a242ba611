"""bench/bench_lake.py works: at a tiny size it writes the same chunks into a DuckDB file and a
lake and times `juryflow disagreements` on both, with the PostgreSQL it starts itself
(tests/pg_server.py). Its third part (one process against N shards) runs the commands
tests/test_lake_runs.py covers; it is not repeated here, to keep CI within its time."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.pg_server import PostgresUnavailable, find_bindir

BENCH = REPO / "bench" / "bench_lake.py"


@pytest.fixture(autouse=True)
def _postgres_binaries() -> None:
    try:
        find_bindir()
    except PostgresUnavailable as error:
        pytest.skip(f"no PostgreSQL server for the lake bench: {error}")


def bench(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def line(out: str, start: str) -> str:
    return next(text for text in out.splitlines() if text.startswith(start))


def test_bench_lake_writes_and_disagreements_at_a_tiny_size() -> None:
    out = bench("--judgments", "1200", "--repeats", "2", "--parts", "stores")
    assert "1. writes: 1,200 judgments (400 items x 3 judges)" in out
    for store in ("file", "lake"):
        assert re.search(rf"^write {store}: [\d.]+ s, [\d,]+ judgments/s", out, re.M), out
        assert re.search(rf"^disagreements {store}: median \d+ ms \(first \d+ ms\)", out, re.M)
    assert re.search(r"^write lake / file: [\d.]+ \(judgments/s\)", out, re.M), out
    # compact's row is timed once it exists, or says why it is not
    compact = line(out, "disagreements lake after compact") if "compact: " in out else ""
    assert compact or "lake after compact: skipped" in out, out
    assert "3. " not in out
