"""bench/bench_call_path.py works: at a tiny size it times both call paths for both providers
against the stand-in in its own process (figures only printed, never asserted on)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_bench_call_path_runs_at_a_tiny_size() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_call_path.py"), "--calls", "40",
         "--concurrency", "8"],
        capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for provider in ("openai", "anthropic"):
        line = next(line for line in lines if line.startswith(f"{provider}: 40 calls"))
        assert "SDK's whole path" in line and "lean replay" in line and "ms CPU/call" in line
