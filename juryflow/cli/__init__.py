"""The `juryflow` command line: one module per group of commands, registered in
:mod:`juryflow.cli.commands`.

The commands load when :func:`main` runs, not when this package is imported: loading them
takes a second or two (Prefect, the SDKs), and a Ctrl-C in that time must end in one line,
not a traceback.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

__all__ = ["app", "main"]

AFTER_THE_COMMAND = (
    b"juryflow: interrupted (SIGINT) after the command had ended; what it printed and stored "
    b"stands\n"
)
_late_ctrl_c: list[int] = []


def _note_a_late_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """A Ctrl-C once the command has ended (Prefect's exit handlers still draining logs or
    stopping its server) is noted, not raised: raised, it ended the process by SIGINT (-2)
    once and was swallowed by an exit handler (exit 0) once (issue 44)."""
    if not _late_ctrl_c:
        os.write(2, AFTER_THE_COMMAND)  # not sys.stderr: the main thread may be writing to it
    _late_ctrl_c.append(signum)


def _end_with_130_after_a_late_ctrl_c() -> None:
    # Registered when this package is imported, so it runs after every other exit handler.
    if _late_ctrl_c:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


atexit.register(_end_with_130_after_a_late_ctrl_c)


def main() -> None:
    """The `juryflow` command."""
    try:
        from juryflow.cli.commands import main as run_command
    except KeyboardInterrupt:
        sys.stderr.write("juryflow: interrupted (SIGINT) while starting; nothing was done\n")
        sys.stderr.flush()
        # Nothing to clean up yet; and the interpreter, having seen the KeyboardInterrupt,
        # would end by SIGINT (-2) rather than with the exit code.
        os._exit(130)
    try:
        run_command()
    except KeyboardInterrupt:
        # One raised while the command was already reporting a Ctrl-C (it said so): left
        # to the interpreter, it would end the process by SIGINT (-2), not with 130.
        sys.stderr.flush()
        os._exit(130)
    finally:
        # the command has ended, however it ended: a Ctrl-C now ends the process with 130
        # once the exit handlers are done
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _note_a_late_ctrl_c)


def __getattr__(name: str) -> Any:
    if name == "app":
        from juryflow.cli.commands import app

        return app
    raise AttributeError(f"module 'juryflow.cli' has no attribute {name!r}")
