"""A Ctrl-C that comes while the first is being reported ends juryflow with 130, not by
SIGINT (-2): on a loaded machine the start-up Ctrl-C test saw `juryflow: interrupted
(SIGINT)` and then a return code of -2."""

from __future__ import annotations

import subprocess
import sys

# After the command has reported one Ctrl-C, a second arrives as the interpreter unwinds.
REPORTED_THEN_ANOTHER = """
import os, signal, sys, time
from juryflow.cli.commands import leave_on_next_sigint
sys.stderr.write("juryflow: interrupted (SIGINT)\\n")
leave_on_next_sigint()
try:
    sys.exit(130)
finally:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
"""

# A KeyboardInterrupt that escapes the command itself.
ESCAPED = """
import juryflow.cli, juryflow.cli.commands
def interrupted():
    raise KeyboardInterrupt
juryflow.cli.commands.main = interrupted
juryflow.cli.main()
"""


def test_a_second_ctrl_c_while_leaving_still_exits_130() -> None:
    done = subprocess.run(
        [sys.executable, "-c", REPORTED_THEN_ANOTHER], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "juryflow: interrupted (SIGINT)\n"


def test_a_keyboard_interrupt_escaping_the_command_exits_130_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ESCAPED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr


def test_a_query_stopped_by_ctrl_c_is_told_as_an_interruption_however_it_was_wrapped() -> None:
    """A Ctrl-C during the checks before a run stopped a DuckDB query, which a check turned
    into its own error: the run said `error: Query interrupted` and exit 2 (seen on a loaded
    machine by a Ctrl-C 1.6 s after the start)."""
    import threading

    import duckdb

    from juryflow.storage.failures import stopped_by_ctrl_c

    con = duckdb.connect()

    def a_check_reading_the_store() -> None:
        try:
            con.execute("SELECT count(*) FROM range(10000000000) a, range(10) b").fetchall()
        except duckdb.Error as error:
            raise ValueError(str(error)) from None  # as a check words DuckDB's error

    # The interrupt DuckDB's client raises on SIGINT, here from another thread, again and
    # again until the query has ended: one sent before it began would be lost.
    ended = threading.Event()

    def press_ctrl_c() -> None:
        while not ended.wait(0.1):
            con.interrupt()

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        a_check_reading_the_store()
    except ValueError as worded:
        assert stopped_by_ctrl_c(worded)
    else:
        raise AssertionError("the query was not interrupted")
    finally:
        ended.set()
        presser.join()
    assert not stopped_by_ctrl_c(ValueError("the panel has no judges"))
