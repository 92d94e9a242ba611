"""`juryflow export-annotations`. Registered by ``flows/cli.py``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``export-annotations`` command to ``app``."""
