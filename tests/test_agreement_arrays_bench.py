"""The bench command bench/README.md shows for ``juryflow agreement`` at scale, on a small
run: ``bench/bench_views.py --report`` must time the array loader and the whole report."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import REPO

# The command of bench/README.md ("Span views on intervals"), with --items 100000 there.
COMMAND = ("bench/bench_views.py", "--items", "2000", "--report", "--repeats", "1")
TIMED = re.compile(
    r"^(load_run_data|agreement_report \(juryflow agreement\)): cold ([\d.]+) s", re.M
)


def test_bench_views_report_times_the_loader_and_the_report() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, *COMMAND],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    timed = dict(TIMED.findall(done.stdout))
    assert set(timed) == {"load_run_data", "agreement_report (juryflow agreement)"}, done.stdout
    assert all(float(seconds) > 0 for seconds in timed.values())
