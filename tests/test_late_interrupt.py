"""A Ctrl-C after `juryflow run` printed its summary (issue 44, point 9): while Prefect's exit
handlers still drain its logs, the process ended once by SIGINT (-2) and once ignored it
(exit 0). It now ends with 130 and one line, after every exit handler ran.

The run is the real command in a process of its own; the moment "after the summary, in the
exit handlers" is held open by an exit handler the launcher registers, which waits for the
test's go-ahead: the test sends SIGINT there, on a fast or a slow machine alike.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLE
from tests.test_resume import child_env

pytestmark = pytest.mark.usefixtures("prefect_harness")

LAUNCHER = """
import atexit, pathlib, sys, time
import juryflow.cli

ready, go, went_on = (pathlib.Path(arg) for arg in sys.argv[1:4])

def held_open():
    # registered after juryflow's own handler, so it runs before it
    ready.touch()
    while not go.exists():
        time.sleep(0.01)
    went_on.write_text("the exit handlers went on")

atexit.register(held_open)
sys.argv = ["juryflow", *sys.argv[4:]]
juryflow.cli.main()
"""


def test_a_ctrl_c_after_the_summary_ends_with_130_in_one_line(tmp_path: Path) -> None:
    ready, go, went_on = tmp_path / "ready", tmp_path / "go", tmp_path / "went-on"
    db = tmp_path / "store.duckdb"
    child = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(ready), str(go), str(went_on),
         "run", str(SAMPLE), "--db", str(db)],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600  # only ends a stuck test
        while not ready.exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        time.sleep(0.2)  # the signal is handled whenever it is; the go-ahead may come first
        go.touch()
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()

    assert child.returncode == 130, (child.returncode, out, err)
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        "juryflow: interrupted (SIGINT) after the command had ended; what it printed and "
        "stored stands"
    ), err
    # the summary came first, and the exit handlers still ran to their end
    assert "items" in err.splitlines()[-2], err
    assert went_on.exists()
