"""The Typer app class of every juryflow command group: help without ``<bool>`` on flags.

Typer 0.29 prints a type beside every option, flags included: ``--dry-run  <bool>``,
``--help  <bool>``, as if they took a value (``--dry-run true``), which they do not. A flag
is shown bare here, as ``--early-stop/--no-early-stop`` already says what it takes.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def _bare_flags(command: Any, ctx: Any) -> None:
    for param in command.get_params(ctx):
        # An empty metavar is what the help shows as the flag's type: nothing.
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class FlagHelpCommand(TyperCommand):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _bare_flags(self, ctx)
        super().format_help(ctx, formatter)


class FlagHelpGroup(TyperGroup):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _bare_flags(self, ctx)
        super().format_help(ctx, formatter)


class App(typer.Typer):
    """``typer.Typer`` whose group and commands print flags without a type."""

    def __init__(self, **settings: Any) -> None:
        settings.setdefault("cls", FlagHelpGroup)
        super().__init__(**settings)

    def command(self, *args: Any, **settings: Any) -> Any:
        settings.setdefault("cls", FlagHelpCommand)
        return super().command(*args, **settings)
