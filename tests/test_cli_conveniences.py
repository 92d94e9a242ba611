"""What a new user expects of the command line (issue 28, finding 9), one test each."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from juryflow.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def _command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, command in getattr(group, "commands", {}).items():
        paths += _command_paths(command, (*prefix, name))
    return paths


def test_help_shows_flags_without_a_bool_placeholder() -> None:
    root = typer.main.get_command(app)
    paths = _command_paths(root)
    assert ("run",) in paths and ("server", "start") in paths and ("store", "compact") in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env=WIDE)
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, (path, result.output)
        assert "--help" in result.output
    run_help = runner.invoke(app, ["run", "--help"], env=WIDE).output
    for flag in ("--dry-run", "--no-cache", "--early-stop", "--no-early-stop", "--verbose"):
        assert flag in run_help
    # options that take a value still say what it is
    assert "<int>" in run_help and "USD" in run_help
