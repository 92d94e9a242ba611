"""The Typer app class of every juryflow command group: help without ``<bool>`` on flags.

Typer 0.29 prints a type beside every option, flags included: ``--dry-run  <bool>``,
``--help  <bool>``, as if they took a value (``--dry-run true``), which they do not. A flag
is shown bare here, as ``--early-stop/--no-early-stop`` already says what it takes. And a
command's help is its docstring reflowed (:func:`reflowed`).
"""

from __future__ import annotations

import inspect
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
        if "help" in settings:
            return super().command(*args, **settings)

        def register(function: Any) -> Any:
            help_text = reflowed(function.__doc__) if function.__doc__ else None
            return super(App, self).command(*args, help=help_text, **settings)(function)

        return register


def reflowed(docstring: str) -> str:
    """A docstring as help: its paragraphs kept, the line breaks inside each dropped.

    Typer's rich help keeps a docstring's line breaks, so the command list broke its
    sentences where the source did ("... in DuckDB (a file," / "or a DuckLake ...").
    """
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)
