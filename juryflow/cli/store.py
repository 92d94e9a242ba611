"""`juryflow store ...`: upkeep of a store (DuckLake compaction, pruning old runs)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import duckdb
import typer
from rich.console import Console
from rich.table import Table

from juryflow.cli.help_format import App
from juryflow.cli.runs import DbOption, ForceOption, delete_and_say, fail
from juryflow.terminal import output

if TYPE_CHECKING:
    from juryflow.storage.lake.maintenance import CompactionReport

store_app = App(
    help="Upkeep of a store: pruning old runs, compaction of a DuckLake.", no_args_is_help=True
)
console = Console()


@store_app.command("compact")
def compact_command(
    db: DbOption = None,
    keep_days: Annotated[
        float,
        typer.Option(
            "--keep-days",
            min=0,
            help="Keep every snapshot younger than this (time travel); older ones are "
            "expired, except the snapshots runs finished at (`juryflow sql --at-run`).",
        ),
    ] = 7,
    orphan_grace_hours: Annotated[
        float,
        typer.Option(
            "--orphan-grace-hours",
            min=0,
            help="Delete a file only once it has been unreferenced this long: a running "
            "writer's new files and files a reader may still be reading stay.",
        ),
    ] = 24,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be done; change nothing.")
    ] = False,
    format_: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Compact a DuckLake store: write inlined rows to Parquet, merge small files, expire
    old snapshots and delete the files nothing reads any more. Run it after the nightly
    runs; runs may go on meanwhile."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.lake.maintenance import compact
    from juryflow.storage.store import Store

    if format_ not in {"table", "json"}:
        fail("--format must be table or json")
    try:
        report = compact(
            Store(db), keep_days=keep_days, grace_hours=orphan_grace_hours, dry_run=dry_run
        )
    except StoreError as error:
        fail(str(error))
        return
    except duckdb.Error as error:  # opening the store: a damaged file, say
        fail(f"cannot compact the store: {type(error).__name__}: {error}")
        return
    if format_ == "json":
        console.file.write(output.dump_json(dataclasses.asdict(report)) + "\n")
        return
    if report.skipped is not None:
        console.print(
            output.plain(f"{report.store}: {report.skipped}", one_line=True), soft_wrap=True
        )
        return
    _print_report(report)


def _size(count: int | None) -> str:
    if count is None:
        return "size unknown"
    if count < 1024:
        return f"{count} B"
    units = ("KB", "MB", "GB")
    value, index = count / 1024, 0
    while value >= 1024 and index + 1 < len(units):
        value, index = value / 1024, index + 1
    return f"{value:.1f} {units[index]}"


def _steps(report: CompactionReport) -> list[tuple[str, str]]:
    would = "would be " if report.dry_run else ""
    days = f"{report.keep_days:g} day{'s' if report.keep_days != 1 else ''}"
    hours = f"{report.grace_hours:g} h"
    if report.dry_run:
        inlined = (
            "unknown" if report.inlined_rows is None else f"{report.inlined_rows} rows"
        ) + " would be written to Parquet"
        merged = f"{report.files_before} data files ({_size(report.data_bytes_before)}) now"
    else:
        inlined = f"{report.inlined_rows} rows written to Parquet"
        merged = (
            f"{report.files_merged} files merged into {report.files_written}: "
            if report.files_merged
            else "nothing to merge: "
        ) + (
            f"{report.files_before} → {report.files_after} data files "
            f"({_size(report.data_bytes_before)} → {_size(report.data_bytes_after)})"
        )
    expired = (
        f"{report.snapshots_expired} of {report.snapshots_before} {would}expired "
        f"(older than {days}); {report.snapshots_kept_for_runs} older kept: runs finished "
        "there (--at-run)"
    )
    freed = "" if report.dry_run else f"; {_size(report.bytes_freed)} freed"
    return [
        ("flush inlined rows", inlined),
        ("merge small files", merged),
        ("expire snapshots", expired),
        (
            "delete old files",
            f"{report.old_files_deleted} {would}deleted (unreferenced for {hours}){freed}",
        ),
        (
            "delete orphaned files",
            f"{report.orphaned_files_deleted} {would}deleted (older than {hours})",
        ),
    ]


def _print_report(report: CompactionReport) -> None:
    title = ("dry run, nothing changed: " if report.dry_run else "compacted ") + report.store
    table = Table(title=output.plain(title, one_line=True), show_lines=False)
    table.add_column("step", no_wrap=True)
    table.add_column("result", overflow="fold")
    for step, result in _steps(report):
        table.add_row(step, output.plain(result))
    console.print(table)


@store_app.command("prune")
def prune_command(
    keep: Annotated[
        int, typer.Option("--keep", min=1, help="Runs to keep in each suite, the newest.")
    ],
    db: DbOption = None,
    force: ForceOption = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the runs it would delete; delete nothing.")
    ] = False,
) -> None:
    """Delete all but each suite's newest KEEP runs (never a running one); the same
    refusals as `juryflow runs delete` (a suite's baseline, annotations, a run others were
    reaggregated from), unless --force."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.store import Store
    from juryflow.storage.store.deletion import prune_choice

    store = Store(db)
    try:
        doomed = prune_choice(store.run_facts(), keep)
        if not doomed:
            console.print(f"nothing to prune: no suite has more than {keep} run(s)")
            return
        if dry_run:
            console.print(
                output.plain(f"would delete {len(doomed)} run(s): {', '.join(doomed)}"),
                soft_wrap=True,
            )
            return
    except StoreError as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot prune: {type(error).__name__}: {error}")
        return
    delete_and_say(store, doomed, force, "prune")


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
