"""`juryflow export-annotations`. Registered by ``juryflow/cli/commands.py``."""

from __future__ import annotations

from typing import Annotated

import duckdb
import typer

from juryflow.cli.runs import DbOption, fail, resolve_or_exit
from juryflow.terminal import output
from juryflow.terminal.output import terminal_console

console = terminal_console()


def export_annotations_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="Run id (a unique prefix will do).")],
    output_path: Annotated[
        str, typer.Option("--output", "-o", help="JSONL file to write (a labelled dataset).")
    ] = "labels.jsonl",
    db: DbOption = None,
) -> None:
    """Write RUN's annotated items, labelled by their newest annotation, as a dataset that
    `juryflow run` reads back with those labels as gold."""
    from juryflow.analysis.annotation_export import ExportError, export_annotations
    from juryflow.storage.connection import StoreError
    from juryflow.storage.store import Store

    run_id = resolve_or_exit(db, run)
    assert run_id is not None  # RUN is required
    try:
        result = export_annotations(Store(db), run_id, output_path)
    except (ExportError, StoreError) as error:
        fail(str(error))
        return
    except duckdb.Error as error:  # a damaged store: DuckDB's own words
        fail(f"cannot read run {run_id}: {type(error).__name__}: {error}")
        return
    console.print(
        output.plain(
            f"{result.n_items} annotated items of run {result.run_id} written to {result.path}; "
            f"judge them with `juryflow run {result.path} --panel PANEL`"
        ),
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add the ``export-annotations`` command to ``app``."""
    app.command("export-annotations")(export_annotations_command)
