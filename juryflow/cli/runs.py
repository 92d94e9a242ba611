"""`juryflow runs`, `juryflow export` and `juryflow import` (runs out of the store and into
it), and the run-id lookup every command that takes a RUN shares (exact id or unique prefix).

Registered on the main app by :func:`register` (``juryflow/cli/commands.py``). `import` sits
here, beside its inverse `export`: this folder holds the fifteen modules the house allows.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import duckdb
import typer

from juryflow.terminal import output
from juryflow.terminal.output import terminal_console
from juryflow.terminal.tables import FitTable

if TYPE_CHECKING:
    from juryflow.analysis.recorded_import import ImportResult
    from juryflow.storage.store import Store
    from juryflow.storage.store.deletion import Deleted

console = terminal_console()
err = terminal_console(stderr=True)


def _sealed_db(value: str | None) -> str | None:
    """A catalog password typed in ``--db`` goes to this process's environment at once, so
    that no flow parameter, log line or artifact made from ``--db`` holds it."""
    if value is None or not value.startswith("ducklake:"):
        return value
    from juryflow.storage.lake.attach import seal

    return seal(value)


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Store: a DuckDB file, or a DuckLake as ducklake:postgres:'dbname=... host=...' "
        "(default: $JURYFLOW_DB or ./juryflow.duckdb). A catalog password may be written "
        "password=${VAR}, read from the environment variable VAR.",
        callback=_sealed_db,
    ),
]
"""``--db``, as every command that reads a store takes it."""

EXTENSIONS = {"parquet": "parquet", "csv": "csv", "jsonl": "jsonl"}


def fail(message: str) -> NoReturn:
    """A user error: ``error: MESSAGE`` on stderr and exit code 2 (no traceback)."""
    if message.startswith("Failed to reach API at"):
        # Prefect's words for a PREFECT_API_URL nothing answers at: say what to do about it.
        message += (
            ": no Prefect server answers there (PREFECT_API_URL); start one with `juryflow "
            "server start`, or unset PREFECT_API_URL and juryflow starts its own"
        )
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


LimitOption = Annotated[int, typer.Option(min=1, max=1_000_000, help="Newest runs to show.")]
StatusOption = Annotated[
    str | None, typer.Option(help="Only runs of this status (completed, running, ...).")
]
FormatOption = Annotated[str, typer.Option("--format", "-f", help="table, csv or json.")]


def runs_command(
    db: DbOption = None,
    limit: LimitOption = 20,
    status: StatusOption = None,
    format_: FormatOption = "table",
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
    # too wide for the terminal, whole, and no other column is cut; narrower still (more
    # than two parts), each run is a record headed by its id.
    table = FitTable(records_beyond=2)
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
        str | None,
        typer.Option(
            "--output", "-o", help="File to write (default: RUN.<ext>); - for standard output."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    db: DbOption = None,
) -> None:
    """Write RUN's items, one row per item and judge, with each judgment and the consensus."""
    from juryflow.storage.paths import UnwritablePathError, writable_file

    if format_ not in EXTENSIONS:
        fail(f"--format {format_}: choose parquet, csv or jsonl")
    run_id = resolve_or_exit(db, run)
    assert run_id is not None
    if output_path == "-":
        _export_to_stdout(db, run_id, format_)
        return
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
        rows = _exported(db, run_id, format_, partial, f" to {target}")
        os.replace(partial, target)
    except OSError as error:
        _export_failed(run_id, f" to {target}", error)
    finally:
        partial.unlink(missing_ok=True)
    console.print(
        output.plain(f"run {run_id}: {rows} rows (item × judge) written to {target}"),
        soft_wrap=True,
    )


def _exported(db: Any, run_id: str, format_: str, path: Path, where: str) -> int:
    """``export_run`` into ``path``: its row count, or one line naming the run and
    ``where`` (`` to FILE``, or nothing) and the exit."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.reads.run_queries import export_run
    from juryflow.storage.store import Store

    try:
        return export_run(Store(db), run_id, format_, path)
    except StoreError as error:
        fail(str(error))
    except (duckdb.Error, OSError) as error:
        _export_failed(run_id, where, error)


def _export_failed(run_id: str, where: str, error: duckdb.Error | OSError) -> NoReturn:
    from juryflow.storage.paths import reason

    detail = reason(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
    fail(f"cannot export run {run_id}{where}: {detail}")


def _export_to_stdout(db: Any, run_id: str, format_: str) -> None:
    """``-o -``: the export written to a scratch file, then its bytes to standard output
    (it was a file named ``-``); the line saying how many rows goes to standard error."""
    import shutil
    import sys
    import tempfile

    if format_ == "parquet" and sys.stdout.isatty():
        fail("parquet is binary: with -o -, pipe it to a file or a program, or use --format csv")
    with tempfile.TemporaryDirectory(prefix="juryflow-export-") as scratch:
        partial = Path(scratch) / f"{run_id}.{EXTENSIONS[format_]}"
        rows = _exported(db, run_id, format_, partial, "")
        sys.stdout.flush()
        with partial.open("rb") as written:
            shutil.copyfileobj(written, sys.stdout.buffer)
        sys.stdout.flush()
    err.print(output.plain(f"run {run_id}: {rows} rows (item × judge) written to standard output"))


def _column(help_text: str, *names: str) -> Any:
    return typer.Option(*names, metavar="COLUMN", help=help_text)


SHOWN_BAD_ROWS = 20
"""Bad rows listed one a line before an import is refused; the rest are counted."""


def _print_bad_rows(errors: list[Any], unit: str, shown: int = SHOWN_BAD_ROWS) -> None:
    for error in errors[:shown]:
        err.print(output.plain(f"  {unit} {error.row_number}: {error.error}", one_line=True),
                  soft_wrap=True)  # fmt: skip
    if len(errors) > shown:
        err.print(output.plain(f"  … and {len(errors) - shown} more"), soft_wrap=True)


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'s' * (number != 1)}"


def _next_commands(result: ImportResult) -> list[tuple[str, str]]:
    """The commands that read the imported run, each with what it shows."""
    from juryflow.flows.runtime.interrupts import juryflow_command

    db, juryflow = shlex.quote(result.db), juryflow_command()
    commands = [
        (f"{juryflow} agreement {result.run_id} --db {db}", "how far the judges agree, and "
         "how right they are against the human labels"),
        (f"{juryflow} calibrate {result.run_id} --db {db}", "the consensus rule the human "
         "labels choose, scored out of fold"),
        (f"{juryflow} view --db {db} --open", "each item with every judge's answer"),
    ]  # fmt: skip
    return commands if result.labelled else [commands[0], commands[2]]


def import_command(
    file: Annotated[
        str,
        typer.Argument(metavar="FILE", help="JSONL, CSV or Parquet file of recorded judgments."),
    ],
    judge: Annotated[
        list[str] | None,
        _column("Wide: a column holding one judge's verdicts (repeatable).", "--judge"),
    ] = None,
    judges: Annotated[
        str | None, _column("Wide: a column holding {judge: verdict} per row.", "--judges")
    ] = None,
    judge_column: Annotated[
        str | None,
        _column("Long (a row per item and judge): the judge's column.", "--judge-column"),
    ] = None,
    verdict_column: Annotated[
        str | None, _column("Long: the verdict's column.", "--verdict-column")
    ] = None,
    score_column: Annotated[
        str | None, _column("Long: a 0-1 score's column (1: the positive class).", "--score-column")
    ] = None,
    spans_column: Annotated[
        str | None,
        _column(
            "Long: flagged spans, a list of \\[start, end] character offsets into --text or of "
            "quotes to find in it.",
            "--spans-column",
        ),
    ] = None,
    sample_column: Annotated[
        str | None,
        _column(
            "Long: the sample index (several answers of a judge on an item).", "--sample-column"
        ),
    ] = None,
    id_: Annotated[
        str | None, _column("The item id (default: 'id' if present, else the row).", "--id")
    ] = None,
    row_ids: Annotated[
        bool,
        typer.Option("--row-ids", help="Wide: number the items by row (for ids that repeat)."),
    ] = False,
    group: Annotated[
        str | None,
        _column("The items' group or source (calibration's folds keep one together).", "--group"),
    ] = None,
    text: Annotated[
        str | None,
        _column(
            "The judged text (stored as 'response'; default: 'response' if present).", "--text"
        ),
    ] = None,
    context: Annotated[
        list[str] | None, _column("Another text column to keep (repeatable).", "--context")
    ] = None,
    label: Annotated[str | None, _column("The human label.", "--label")] = None,
    label_spans: Annotated[
        str | None,
        _column("The human labels' spans: \\[start, end] offsets into --text.", "--label-spans"),
    ] = None,
    positive: Annotated[
        str,
        typer.Option(
            metavar="VALUE",
            help="The label's and verdicts' value that stands for the positive class (what a "
            "flagged, 'hallucinated' verdict means), e.g. false for a column 'valid'.",
        ),
    ] = "true",
    threshold: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="A score at or above it is a flagged verdict."),
    ] = 0.5,
    quorum: Annotated[
        int | None, typer.Option(min=1, help="Judges that must answer (default: a majority).")
    ] = None,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            "--skip-bad-rows", help="Import the other rows (default: a bad row refuses the file)."
        ),
    ] = False,
    suite: Annotated[str | None, typer.Option(help="Suite name (default: FILE:recorded).")] = None,
    db: DbOption = None,
    format_: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Import judgments made elsewhere (another tool's log, annotators' labels) as a run,
    calling no model: agreement, disagreements, calibrate, reaggregate, view and SQL work on
    it. Wide files have a row per item (--judge / --judges), long ones a row per item and
    judge (--judge-column). A bad row refuses the whole file unless --skip-bad-rows.

    Over 100 lines: its option list, one declaration per option as typer wants them; the
    body hands them to ``ImportOptions`` and prints the result."""
    from juryflow.analysis.recorded_import import BadRows, import_recorded
    from juryflow.analysis.recorded_rows import ImportOptions, RecordedImportError
    from juryflow.storage.connection import StoreError
    from juryflow.storage.datasets import DatasetError
    from juryflow.storage.store import Store

    if format_ not in {"table", "json"}:
        fail("--format must be table or json")
    options = ImportOptions(
        judge_columns=tuple(judge or ()), judges_map=judges, judge_column=judge_column,
        verdict_column=verdict_column, score_column=score_column, spans_column=spans_column,
        sample_column=sample_column, id_column=id_, row_ids=row_ids, group_column=group,
        text_column=text, context_columns=tuple(context or ()), label_column=label,
        label_spans_column=label_spans, positive=positive, threshold=threshold, quorum=quorum,
        skip_bad_rows=skip_bad_rows, suite=suite,
    )  # fmt: skip
    try:
        result = import_recorded(Store(db), Path(file), options)
    except BadRows as error:
        _print_bad_rows(error.errors, error.unit)
        fail(str(error))
        return
    except (RecordedImportError, DatasetError, StoreError) as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot write the imported run to the store: {type(error).__name__}: {error}")
        return
    commands = _next_commands(result)
    if format_ == "json":
        payload = {**result.as_dict(), "next": [command for command, _ in commands]}
        console.file.write(output.dump_json(payload) + "\n")
        return
    if result.skipped:
        err.print(
            output.plain(
                f"warning: {len(result.skipped)} bad {result.unit}s skipped (--skip-bad-rows; "
                "kept in row_errors):", "yellow", one_line=True,
            ),
            soft_wrap=True,
        )  # fmt: skip
        _print_bad_rows(list(result.skipped), result.unit, 5)
    console.print(
        output.plain(
            f"imported run {result.run_id}: {_count(result.items, 'item')}, "
            f"{_count(result.judges, 'judge')}, {_count(result.judgments, 'judgment')}, "
            f"{_count(result.labelled, 'labelled item')} ({result.seconds:.1f} s; "
            f"consensus {result.consensus})",
            one_line=True,
        ),
        soft_wrap=True,
    )
    console.print("\nNext:")
    for command, what in commands:
        console.print(output.plain(f"  {command}   # {what}", one_line=True), soft_wrap=True)


ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Delete even a suite's baseline, a run with reviewers' annotations, one that "
        "is running or one other runs were reaggregated from.",
    ),
]


def deleted_line(deleted: Deleted) -> str:
    counts = deleted.rows
    return (
        f"deleted {len(deleted.run_ids)} run(s) ({', '.join(deleted.run_ids)}): "
        f"{counts.get('items', 0)} items, {counts.get('judgments', 0)} judgments, "
        f"{counts.get('consensus', 0)} consensus rows, {counts.get('comparisons', 0)} "
        "comparisons; their answers are no longer in the cache, and the file keeps its size "
        "(later writes reuse the space)"
    )


def delete_command(
    runs: Annotated[
        list[str], typer.Argument(metavar="RUN", help="Run ids, or unique prefixes of them.")
    ],
    db: DbOption = None,
    force: ForceOption = False,
) -> None:
    """Delete runs from the store, every row of theirs in one transaction. Refused (one
    line, naming it) for a suite's baseline, a run with reviewers' annotations, one still
    running or one other runs were reaggregated from, unless --force."""
    from juryflow.storage.store import Store

    ids = [resolve_or_exit(db, run) or run for run in runs]
    delete_and_say(Store(db), ids, force, "delete")


def delete_and_say(store: Store, run_ids: list[str], force: bool, what: str) -> None:
    """Delete ``run_ids`` and print what went, or one line and exit code 2 (``what``: the
    command's verb, for a database error)."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.store.deletion import DeletionRefused

    try:
        deleted = store.delete_runs(run_ids, force=force)
    except (DeletionRefused, StoreError) as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot {what}: {type(error).__name__}: {error}")
        return
    console.print(output.plain(deleted_line(deleted)), soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `runs` (and `runs delete`), `export` and `import` to the juryflow command line."""
    from juryflow.cli.help_format import App, reflowed

    runs_app = App(help=reflowed(runs_command.__doc__ or ""))

    @runs_app.callback(invoke_without_command=True)
    def runs_group(
        ctx: typer.Context,
        db: DbOption = None,
        limit: LimitOption = 20,
        status: StatusOption = None,
        format_: FormatOption = "table",
    ) -> None:
        if ctx.invoked_subcommand is None:
            runs_command(db=db, limit=limit, status=status, format_=format_)

    runs_app.command("delete")(delete_command)
    app.add_typer(runs_app, name="runs")
    app.command("export")(export_command)
    app.command("import")(import_command)
