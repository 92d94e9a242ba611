"""The `juryflow` command line: one module per group of commands, registered in
:mod:`juryflow.cli.commands`."""

from juryflow.cli.commands import app, main

__all__ = ["app", "main"]
