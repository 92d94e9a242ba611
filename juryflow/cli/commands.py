"""The `juryflow` command line."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import Annotated, NoReturn

import typer

from juryflow.cli.user_files import load_env_file
from juryflow.flows.runtime.allocator import limit_malloc_arenas
from juryflow.flows.runtime.prefect_env import apply_offline_defaults
from juryflow.terminal.output import terminal_console

limit_malloc_arenas()  # before Prefect and DuckDB start their threads
_ENV_WARNING = load_env_file()  # before the offline defaults: a .env's settings win over them
apply_offline_defaults(quiet=not {"-v", "--verbose"} & set(sys.argv))

from juryflow.cli.help_format import App  # noqa: E402
from juryflow.cli.run_command import (  # noqa: E402
    AuditFractionOption,
    BatchOption,
    BatchWaitOption,
    CalibrationOption,
    ChunkSizeOption,
    DaskOption,
    DataPathOption,
    DatasetArgument,
    DryRunOption,
    EarlyStopOption,
    LimitOption,
    MapOption,
    MaxCharsOption,
    MaxCostOption,
    NoCacheOption,
    PanelOption,
    QuorumOption,
    ResumeOption,
    RunIdOption,
    SampleOption,
    SeedOption,
    ShardOption,
    SuiteOption,
    TakeOverOption,
    VerboseOption,
    WorkersOption,
    start_run,
)
from juryflow.cli.runs import DbOption, fail  # noqa: E402
from juryflow.terminal import output  # noqa: E402  (Prefect settings must be in place first)

app = App(
    help="Judge panels for LLM evaluations: run, agree, disagree, query.",
    no_args_is_help=True,
    add_completion=False,
)
console = terminal_console()
err = terminal_console(stderr=True)
if _ENV_WARNING:
    err.print(output.plain(f"warning: {_ENV_WARNING}", "yellow", one_line=True), soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            console.print(f"juryflow {version('juryflow')}", highlight=False)
        except PackageNotFoundError:  # run from a checkout that was never installed
            console.print("juryflow (not installed: pip install -e .)", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Judge panels for LLM evaluations: run, agree, disagree, query."""


@app.command()
def run(
    ctx: typer.Context,
    dataset: DatasetArgument = None,
    panel: PanelOption = None,
    db: DbOption = None,
    mapping: MapOption = None,
    quorum: QuorumOption = None,
    chunk_size: ChunkSizeOption = None,
    no_cache: NoCacheOption = False,
    resume: ResumeOption = None,
    suite: SuiteOption = None,
    max_chars: MaxCharsOption = 200_000,
    dask: DaskOption = None,
    workers: WorkersOption = None,
    calibration: CalibrationOption = None,
    limit: LimitOption = None,
    sample: SampleOption = None,
    seed: SeedOption = 0,
    dry_run: DryRunOption = False,
    max_cost: MaxCostOption = None,
    shard: ShardOption = None,
    run_id: RunIdOption = None,
    take_over: TakeOverOption = False,
    data_path: DataPathOption = None,
    early_stop: EarlyStopOption = None,
    audit_fraction: AuditFractionOption = None,
    batch: BatchOption = None,
    batch_wait: BatchWaitOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Run every item through every judge of the panel and store it all in DuckDB (a file,
    or a DuckLake shared by many processes and machines)."""
    # The options given become one RunRequest (juryflow.planning.run_request), checked once.
    start_run(ctx, dry_run=dry_run, verbose=verbose)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL to run against the store (read-only).")],
    db: DbOption = None,
    format_: Annotated[str, typer.Option("--format", "-f", help="table, csv or json.")] = "table",
    limit: Annotated[int, typer.Option(min=1, help="Rows to show in table format.")] = 1000,
    at_run: Annotated[
        str | None,
        typer.Option(
            "--at-run",
            metavar="RUN",
            help="Read a DuckLake store as it was when RUN (id or unique prefix) completed.",
        ),
    ] = None,
    timeout: Annotated[
        int,
        typer.Option(min=1, metavar="SECONDS", help="Stop a query still running after this."),
    ] = 300,
) -> None:
    """Query the store, read-only and confined to it: no other file, no extension, no SET."""
    import duckdb

    from juryflow.storage.connection import StoreError, resolve_target
    from juryflow.storage.reads.run_queries import RunIdError
    from juryflow.storage.sql_guard import (
        QueryTimeoutError,
        SnapshotExpiredError,
        SqlConfinementError,
        SqlRefused,
        run_confined,
        run_snapshot,
    )

    if format_ not in {"table", "csv", "json"}:
        fail("--format must be table, csv or json")
    run_id: str | None = None
    try:
        target = resolve_target(db)
        snapshot: int | None = None
        if at_run is not None:
            run_id, snapshot = run_snapshot(target, at_run)
        columns, rows = run_confined(target, query, snapshot=snapshot, timeout=timeout)
    except SnapshotExpiredError as error:
        fail(
            f"run {run_id} finished at snapshot {error.snapshot}, which compaction has since "
            "expired (ducklake_expire_snapshots): the lake no longer holds the store as it "
            "was then; query it as it is now, without --at-run"
        )
        return
    except (SqlRefused, SqlConfinementError, QueryTimeoutError, StoreError, RunIdError) as error:
        fail(f"--at-run: {error}" if isinstance(error, RunIdError) else str(error))
        return
    except duckdb.PermissionException as error:
        reason = str(error).splitlines()[0]
        fail(
            "juryflow sql reads only the store; file, network and extension access is off "
            f"({reason})"
        )
        return
    except duckdb.OutOfMemoryException as error:
        # DuckDB's message goes on for a dozen lines of advice that does not apply here.
        reason = str(error).splitlines()[0]
        fail(
            f"the query needs more memory than juryflow sql allows ({reason}); narrow it "
            "(a WHERE on run_id, a LIMIT) or raise $JURYFLOW_DUCKDB_MEMORY_LIMIT"
        )
        return
    except duckdb.Error as error:  # DuckDB's own message says what is wrong with the SQL
        fail(f"{type(error).__name__}: {error}")
        return
    output.print_rows(console, columns, rows, format_, limit)


from juryflow.cli.analysis import register as _register_analysis  # noqa: E402

_register_analysis(app)  # `agreement` and `disagreements`

from juryflow.cli.calibration import register as _register_calibration  # noqa: E402

_register_calibration(app)  # `calibrate`

from juryflow.cli.ops import register as _register_ops  # noqa: E402

_register_ops(app)  # `regression`, `reaggregate`, `report`, `serve`, `init`, `finish`

from juryflow.cli.runs import register as _register_runs  # noqa: E402

_register_runs(app)  # `runs`, `export` and `import`

from juryflow.cli.view import register as _register_view  # noqa: E402

_register_view(app)  # `view`

from juryflow.cli.annotations import register as _register_annotations  # noqa: E402

_register_annotations(app)  # `export-annotations`

from juryflow.cli.store import register as _register_store  # noqa: E402

_register_store(app)  # `store compact`

from juryflow.cli.server import register as _register_server  # noqa: E402

_register_server(app)  # `server start|stop|status`

from juryflow.cli.stub_server import register as _register_stub_server  # noqa: E402

_register_stub_server(app)  # `stub-server`

from juryflow.cli.look import register as _register_look  # noqa: E402

_register_look(app)  # `show` and `compare`


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("juryflow: interrupted (SIGINT)\n")
        leave_on_next_sigint()
        exit_interrupted()
    except SystemExit as leaving:
        # Typer turns a Ctrl-C it catches (while a command's imports load, say) into a
        # silent exit 130; a command that stops on Ctrl-C itself says more, and first.
        caught = leaving.__context__
        if caught is not None and isinstance(caught.__cause__, KeyboardInterrupt):
            sys.stderr.write("juryflow: interrupted (SIGINT)\n")
            leave_on_next_sigint()
        if leaving.code == 130:
            exit_interrupted()
        raise


def exit_interrupted() -> NoReturn:
    """End with 130 once the exit handlers have run, not through the interpreter's own exit.

    A Ctrl-C that lands while pydantic is being imported (0.3 s into start-up here) was
    caught and reported, and the process still ended by SIGINT (-2) instead of 130, two times
    in four. Where in the interpreter's own exit that happens was not found; ended here, the
    same Ctrl-C ended with 130 sixteen times in sixteen."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def leave_on_next_sigint() -> None:
    """Once a Ctrl-C has been reported, another (or one still pending) ends the process with
    130 at once: raised as KeyboardInterrupt while the interpreter unwinds, it would end it
    by SIGINT instead, which a shell reads as -2 rather than the 130 of an interrupted
    command (seen on a loaded machine, when the signal reached the process group twice)."""

    def leave(signum: int, frame: object) -> None:
        sys.stderr.flush()
        os._exit(130)

    signal.signal(signal.SIGINT, leave)


if __name__ == "__main__":
    main()
