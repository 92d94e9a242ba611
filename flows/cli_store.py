"""`juryflow store ...`: upkeep of a store (DuckLake compaction)."""

from __future__ import annotations

import typer

store_app = typer.Typer(help="Upkeep of a store: compaction of a DuckLake.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
