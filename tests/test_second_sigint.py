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
