"""Every bench prints, beside its figures, the machine line (issue 41, point 6): cores, time,
load, a CPU-speed figure and the releases measured, so another machine can reproduce them."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import REPO

BENCHES = sorted((REPO / "bench").glob("bench_*.py"))


def _prints_the_machine_line(source: str) -> bool:
    """Whether some print(...) in the module has a call to ``machine()`` in its arguments."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            for inner in ast.walk(node):
                func = getattr(inner, "func", None)
                if isinstance(inner, ast.Call) and "machine" in (
                    getattr(func, "id", None),
                    getattr(func, "attr", None),
                ):
                    return True
    return False


def test_every_bench_prints_the_machine_line() -> None:
    assert len(BENCHES) > 20
    silent = [p.name for p in BENCHES if not _prints_the_machine_line(p.read_text("utf-8"))]
    assert silent == []


def test_the_machine_line_has_the_cpu_speed_and_the_releases() -> None:
    line = subprocess.run(
        [sys.executable, "-c", "from bench._common import machine; print(machine())"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    assert "cores (nproc)" in line and "load avg" in line
    assert "CPU speed: 2,000,000-step Python loop in " in line
    for release in ("Python 3.", "prefect ", "duckdb ", "anthropic ", "openai ", "numpy "):
        assert release in line, line
