"""bench/bench_viewer.py works: at a tiny size it builds its store, serves the viewer over
real HTTP and times every URL it reports (each answering 200)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_bench_viewer_runs_at_a_tiny_size() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_viewer.py"), "--items", "300",
         "--batch-items", "100", "--repeats", "2"],
        capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "setup: 300 items x 3 judges" in out and "store: built in" in out
    for label in (
        "items (default sort)", "sort gold_mismatch asc", "filter split=1",
        "filter verdict_judge=judge-0 hallucinated", "search q=parking", "page 6",
        "item page, with filter (prev/next)",
    ):  # fmt: skip
        line = next(line for line in out.splitlines() if line.startswith(label))
        assert "HTTP 200" in line and "median" in line and "p95" in line
    assert "slowest median" in out
