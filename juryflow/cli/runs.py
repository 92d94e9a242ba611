"""`juryflow runs` and `juryflow export`, and the run-id lookup every command that takes a
RUN shares (exact id or unique prefix).

Registered on the main app by :func:`register` (``juryflow/cli/commands.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import duckdb
import typer

from juryflow.terminal import output
from juryflow.terminal.output import terminal_console
from juryflow.terminal.tables import FitTable

console = terminal_console()
err = terminal_console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Store: a DuckDB file, or a DuckLake as ducklake:postgres:'dbname=... host=...' "
        "(default: $JURYFLOW_DB or ./juryflow.duckdb).",
    ),
]
"""``--db``, as every command that reads a store takes it."""

EXTENSIONS = {"parquet": "parquet", "csv": "csv", "jsonl": "jsonl"}


def fail(message: str) -> None:
    """A user error: ``error: MESSAGE`` on stderr and exit code 2 (no traceback)."""
    output.print_error(err, message)
    raise typer.Exit(code=2)


def resolve_or_exit(db: str | None, text: str | None, option: str = "RUN") -> str | None:
    """The full run id ``text`` names (None stays None: "the latest run"), or one line and
    exit code 2. Commands call it where they read their arguments, before any work."""
    if text is None:
        return None
    from juryflow.storage.connection import StoreError
    from juryflow.storage.reads.run_queries import RunIdError, resolve_run_id
    from juryflow.storage.store import Store

    try:
        return resolve_run_id(Store(db), text)
    except (RunIdError, StoreError) as error:
        fail(f"{option}: {error}" if option != "RUN" else str(error))
    except duckdb.Error as error:  # a store of a schema without runs, a damaged file
        fail(f"cannot look up run {text!r}: {type(error).__name__}: {error}")
    return None  # unreachable: _fail raises


_NUMERIC_COLUMNS = frozenset(
    ("items", "judgments", "unscored", "cost_usd", "saved_usd", "cache_read_tokens", "duration_s")
)


def _table_row(columns: list[str], row: tuple[Any, ...]) -> tuple[Any, ...]:
    values = dict(zip(columns, row, strict=True))
    values["dataset"] = Path(values["dataset"]).name if values["dataset"] else "—"
    values["cost_usd"] = "—" if values["cost_usd"] is None else f"{values['cost_usd']:.4f}"
    saved = values.get("saved_usd")  # judgments reused from the cache: not paid again
    values["saved_usd"] = "—" if not saved else f"{saved:.4f}"
    cache_read = values.get("cache_read_tokens")
    values["cache_read_tokens"] = "—" if cache_read is None else f"{cache_read:,}"
    values["started_at"] = f"{values['started_at']:%m-%d %H:%M}"
    values["duration_s"] = output.duration(values["duration_s"])
    return tuple(values.values())


def runs_command(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(min=1, max=1_000_000, help="Newest runs to show.")] = 20,
    status: Annotated[
        str | None, typer.Option(help="Only runs of this status (completed, running, ...).")
    ] = None,
    format_: Annotated[str, typer.Option("--format", "-f", help="table, csv or json.")] = "table",
) -> None:
    """The runs in the store, newest first: status, kind, panel, dataset, items, unscored,
    cost (of the run's own model calls: a run answered from the cache costs 0), what its
    cached answers saved, input tokens served from the providers' prompt caches, and
    duration."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.reads.run_queries import list_runs
    from juryflow.storage.store import Store

    if format_ not in {"table", "csv", "json"}:
        fail("--format must be table, csv or json")
    try:
        listing = list_runs(Store(db), limit=limit, status=status)
    except StoreError as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot list the runs: {type(error).__name__}: {error}")
        return
    if format_ != "table":
        output.print_rows(console, listing.columns, listing.rows, format_, limit)
        return
    if not listing.rows:
        console.print("no runs" + (f" with status {status!r}" if status else "") + " yet")
        return
    # The id is what the user copies into the next command: it leads every part of a table
    # too wide for the terminal, whole, and no other column is cut.
    table = FitTable()
    for column in listing.columns:
        name = column.removesuffix("_usd").removesuffix("_s").removesuffix("_at")
        name = "cache read" if column == "cache_read_tokens" else name
        name = "saved (cache)" if column == "saved_usd" else name
        table.add_column(name, justify="right" if column in _NUMERIC_COLUMNS else "left")
    for row in listing.rows:
        table.add_row(*(output.plain(value) for value in _table_row(listing.columns, row)))
    console.print(table)


def export_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of it.")],
    format_: Annotated[
        str, typer.Option("--format", "-f", help="parquet, csv or jsonl.")
    ] = "parquet",
    output_path: Annotated[
        str | None, typer.Option("--output", "-o", help="File to write (default: RUN.<ext>).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    db: DbOption = None,
) -> None:
    """Write RUN's items, one row per item and judge, with each judgment and the consensus."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.paths import UnwritablePathError, reason, writable_file
    from juryflow.storage.reads.run_queries import export_run
    from juryflow.storage.store import Store

    if format_ not in EXTENSIONS:
        fail(f"--format {format_}: choose parquet, csv or jsonl")
    run_id = resolve_or_exit(db, run)
    assert run_id is not None
    try:
        target = writable_file(output_path or f"{run_id}.{EXTENSIONS[format_]}", "--output")
    except UnwritablePathError as error:
        fail(str(error))
        return
    if target.exists() and not force:
        fail(f"{target} exists; pass --force to replace it, or -o another path")
    # Written beside the target and renamed, so a failed export never leaves half a file
    # under the name a later step will read.
    partial = target.with_name(f".{target.name}.partial")
    try:
        rows = export_run(Store(db), run_id, format_, partial)
        os.replace(partial, target)
    except StoreError as error:
        fail(str(error))
        return
    except (duckdb.Error, OSError) as error:
        detail = reason(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        fail(f"cannot export run {run_id} to {target}: {detail}")
        return
    finally:
        partial.unlink(missing_ok=True)
    console.print(
        output.plain(f"run {run_id}: {rows} rows (item × judge) written to {target}"),
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add `runs` and `export` to the juryflow command line."""
    app.command("runs")(runs_command)
    app.command("export")(export_command)
