"""`juryflow view`: the local web app over the store. Registered by ``flows/cli.py``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``view`` command to ``app``."""
