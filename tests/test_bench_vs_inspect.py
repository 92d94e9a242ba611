"""``bench/bench_vs_inspect.py``: its measuring parts on real processes, and the bench itself.

The measuring parts run everywhere: a real child process tree that makes real model calls to
the stand-in (in-process here) and burns CPU in a grandchild, measured as the bench measures
juryflow and Inspect AI. The whole bench (both tools, small job) runs only where Inspect's
own virtualenv exists (``.venv-inspect``, see bench/README.md), as a slow test.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from juryflow.standin.server import StubConfig, running_stub_server
from tests.conftest import REPO

BENCH = REPO / "bench" / "bench_vs_inspect.py"
INSPECT_VENV = REPO / ".venv-inspect"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_vs_inspect", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first: its dataclasses resolve their (string) annotations through it.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# Three calls to the stand-in, then a grandchild that burns CPU for a while.
CALLER = textwrap.dedent(
    """
    import json, subprocess, sys, urllib.request
    base = sys.argv[1]
    for _ in range(3):
        body = {"model": "stub-score-0.5", "messages": [{"role": "user", "content": "x"}]}
        request = urllib.request.Request(
            base + "/v1/chat/completions", data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer k"},
        )
        urllib.request.urlopen(request).read()
    burn = "import time\\nend = time.process_time() + 0.8\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    """
)


def test_measure_sees_the_calls_and_the_whole_tree(tmp_path: Path) -> None:
    bench = _bench()
    script = tmp_path / "caller.py"
    script.write_text(CALLER, encoding="utf-8")
    with running_stub_server(StubConfig(latency_ms=100)) as stub:
        base = stub.anthropic_base_url
        m = bench.measure(
            "caller", [sys.executable, str(script), base], {}, tmp_path, base, tmp_path / "log"
        )
    assert m.calls == 3 and m.answered == {"ok": 3}
    # Three sequential 100 ms calls: first request to last answer is about 0.3 s.
    assert 0.2 <= m.phase <= 1.5
    assert 0 < m.first_call < m.wall
    # The grandchild's 0.8 s of CPU counts (wait4 covers reaped descendants).
    assert m.cpu_reaped >= 0.8 and m.cpu >= m.cpu_reaped
    assert m.peak_rss > 5 * 2**20
    assert m.max_in_flight == 1
    # The in-flight profile, from the stand-in's counters: one call at a time.
    assert len(m.in_flight) == bench.PROFILE_SLICES and max(m.in_flight) <= 1


def test_a_failing_command_stops_the_bench_with_its_output(tmp_path: Path) -> None:
    bench = _bench()
    with running_stub_server() as stub:
        base = stub.anthropic_base_url
        command = [sys.executable, "-c", "import sys; sys.exit('no luck')"]
        with pytest.raises(SystemExit, match=r"(?s)exited 1.*no luck"):
            bench.measure("failing", command, {}, tmp_path, base, tmp_path / "log")


@pytest.mark.slow
@pytest.mark.skipif(
    not (INSPECT_VENV / "bin" / "inspect").exists(),
    reason="Inspect AI's own virtualenv (.venv-inspect) is not there; see bench/README.md",
)
def test_the_bench_runs_both_tools_on_a_small_job() -> None:
    # The command bench/README.md shows, on a small job and one Prefect mode.
    done = subprocess.run(
        [
            sys.executable,
            "bench/bench_vs_inspect.py",
            "--items",
            "20",
            "--prefect",
            "server",
            "--workers",
            "1,2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "| juryflow --workers 1 (running Prefect server) |" in out
    assert "| juryflow --workers 2 (running Prefect server) |" in out
    assert "| Inspect AI 0.3.285 |" in out
    assert out.count("answers {'ok': 60}") == 3, out
    assert "judging-phase throughput" in out and "targets:" in out
