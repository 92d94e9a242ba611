"""`juryflow finish RUN`: a sharded run's last step."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
