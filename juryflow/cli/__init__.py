"""The `juryflow` command line: one module per group of commands, registered in
:mod:`juryflow.cli.commands`.

The commands load when :func:`main` runs, not when this package is imported: loading them
takes a second or two (Prefect, the SDKs), and a Ctrl-C in that time must end in one line,
not a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["app", "main"]


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


def __getattr__(name: str) -> Any:
    if name == "app":
        from juryflow.cli.commands import app

        return app
    raise AttributeError(f"module 'juryflow.cli' has no attribute {name!r}")
