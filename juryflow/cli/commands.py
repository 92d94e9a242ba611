"""The `juryflow` command line."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import Annotated, NoReturn

import typer

from juryflow.cli.user_files import default_panel, load_env_file
from juryflow.flows.runtime.allocator import limit_malloc_arenas
from juryflow.flows.runtime.prefect_env import apply_offline_defaults, quiet_prefect_logging
from juryflow.terminal.output import terminal_console

limit_malloc_arenas()  # before Prefect and DuckDB start their threads
_ENV_WARNING = load_env_file()  # before the offline defaults: a .env's settings win over them
apply_offline_defaults(quiet=not {"-v", "--verbose"} & set(sys.argv))

from juryflow.cli.help_format import App  # noqa: E402
from juryflow.cli.run_options import (  # noqa: E402
    AuditFractionOption,
    BatchOption,
    BatchWaitOption,
    ChunkSizeOption,
    EarlyStopOption,
    estimate_dry_run,
    refuse_settings_on_resume,
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
    dataset: Annotated[
        str | None, typer.Argument(help="JSONL, CSV or Parquet file (default: bundled sample).")
    ] = None,
    panel: Annotated[
        str | None,
        typer.Option(help="Panel YAML file (default: ./panel.yaml, else the offline panel)."),
    ] = None,
    db: DbOption = None,
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", help="Prompt variable from a column: VAR=COLUMN (repeatable)."),
    ] = None,
    quorum: Annotated[
        int | None, typer.Option(help="Judges that must answer: 1 to the panel size.")
    ] = None,
    chunk_size: ChunkSizeOption = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Call models again.")] = False,
    resume: Annotated[str | None, typer.Option(help="Continue this interrupted run.")] = None,
    suite: Annotated[str | None, typer.Option(help="Suite name for regressions.")] = None,
    max_chars: Annotated[
        int, typer.Option(min=1, max=1_000_000_000, help="Longest accepted value.")
    ] = 200_000,
    dask: Annotated[
        str | None,
        typer.Option(help="Run chunk tasks on Dask: 'local' or a scheduler address."),
    ] = None,
    workers: Annotated[
        str | None,
        typer.Option(
            metavar="N|auto",
            help="Processes making the model calls, 1-64, or 'auto': one per core unless the "
            "panel's concurrency or rate limits leave a process idle (the start line says "
            "why). Default: one per 256 concurrent calls of the panel, at most one per core.",
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        typer.Option(help="Combine the judges by this stored calibration (juryflow calibrate)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Judge only the first N items of the dataset.")
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option(min=1, help="Judge N items drawn at random from the whole dataset."),
    ] = None,
    seed: Annotated[
        int, typer.Option(min=0, max=2**31 - 1, help="Seed of --sample (same seed, same items).")
    ] = 0,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print each judge's calls, estimated tokens and cost; call and write nothing.",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            metavar="USD",
            help="Start no model call once this run's calls cost this much; the run is left "
            "resumable (exit code 3).",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            metavar="I/N",
            help="Judge only shard I of N of the items (with --run-id; see `juryflow finish`).",
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="The run every shard of a sharded run writes to."),
    ] = None,
    take_over: Annotated[
        bool,
        typer.Option(
            "--take-over", help="Claim the shard from a process on another machine that is gone."
        ),
    ] = False,
    data_path: Annotated[
        str | None,
        typer.Option(
            "--data-path",
            help="Where a new DuckLake store (--db ducklake:...) keeps its Parquet files "
            "(default: $JURYFLOW_DATA_PATH).",
        ),
    ] = None,
    early_stop: EarlyStopOption = None,
    audit_fraction: AuditFractionOption = None,
    batch: BatchOption = None,
    batch_wait: BatchWaitOption = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Prefect's own log lines too (its flow and task runs)."
        ),
    ] = False,
) -> None:
    """Run every item through every judge of the panel and store it all in DuckDB (a file,
    or a DuckLake shared by many processes and machines)."""
    from rich.text import Text

    from juryflow.flows.runtime.interrupts import RunInterrupted, honour_sigint
    from juryflow.judges.panel import PanelError
    from juryflow.planning.run_setup import preflight, preflight_resume
    from juryflow.runner import run_evaluation
    from juryflow.storage.connection import Patience, patient_waits
    from juryflow.storage.datasets import DatasetError, parse_mapping

    honour_sigint()
    quiet_prefect_logging(verbose)
    # A run waits for a store another process holds as long as it takes, from its first
    # look at it on (saying so), as its writes do: a reader never makes a run fail.
    with patient_waits(Patience()):
        try:
            from juryflow.planning.run_setup import checked_shard
            from juryflow.planning.worker_count import check_workers

            _use_data_path(db, data_path)
            checked_shard(shard, run_id, resume)
            check_workers(workers, distributed=dask is not None, max_cost=max_cost)
            mapping = parse_mapping(map_ or [])
            panel, panel_note = default_panel(panel, resume)
            if dry_run:
                # no start line to carry it: a dry run says where its panel came from first
                if panel_note:
                    err.print(output.plain(panel_note, one_line=True), soft_wrap=True)
                estimate_dry_run(console, dataset, panel, db, mapping, quorum, no_cache, max_chars,
                                 limit, sample, seed, max_cost, resume, batch)  # fmt: skip
                return
            if resume is not None:
                from juryflow.planning.run_setup import (
                    ResumeRequest,
                    claim_before_reading,
                    restore_from_journal,
                )
                from juryflow.storage.reads.run_queries import resolve_run_id
                from juryflow.storage.store import Store

                refuse_settings_on_resume(
                    quorum=quorum, calibration=calibration, limit=limit, sample=sample,
                    early_stop=early_stop, audit_fraction=audit_fraction, batch=batch,
                )  # fmt: skip
                # RunIdError and StoreError are a ValueError and a RuntimeError: one line below
                # a store deleted during the run is rebuilt from the run's journal first
                claim_before_reading(db, resume)
                restored = restore_from_journal(db, resume)
                resume = resolve_run_id(Store(db), resume)
                _check_budget(panel, db, resume, max_cost, dask)
                # By name: typer carries its own copy of click, so the enum is not click's.
                sources = {n: getattr(ctx.get_parameter_source(n), "name", "") for n in ctx.params}
                given = {n for n, source in sources.items() if source not in ("", "DEFAULT")}
                request = ResumeRequest(
                    dataset=dataset,
                    panel=panel,
                    mapping=mapping if "map_" in given else None,
                    chunk_size=chunk_size if "chunk_size" in given else None,
                    max_chars=max_chars if "max_chars" in given else None,
                    no_cache=no_cache,
                    suite=suite,
                )
                warnings = preflight_resume(db, resume, request, restored=True)
                warnings = [restored, *warnings] if restored else warnings
            else:
                from juryflow.planning.run_setup import check_selection

                check_selection(limit, sample)
                _check_budget(panel, db, None, max_cost, dask)
                warnings = preflight(
                    dataset, panel, mapping, quorum, db=db, calibration=calibration,
                    early_stop=early_stop, audit_fraction=audit_fraction, batch=batch,
                )  # fmt: skip
                if shard is not None and run_id is not None:
                    from juryflow.planning.run_setup import preflight_shard

                    warnings += preflight_shard(
                        db, shard, run_id, take_over, dataset=dataset, panel=panel, suite=suite,
                        chunk_size=chunk_size, quorum=quorum, mapping=mapping,
                        use_cache=not no_cache, max_chars=max_chars, calibration=calibration,
                        limit=limit, sample=sample, seed=seed, batch=batch,
                    )  # fmt: skip
            for warning in warnings:
                err.print(Text("warning: ", style="yellow") + output.plain(warning), soft_wrap=True)
            summary = run_evaluation(
                console,
                dict(
                    dataset=dataset,
                    panel=panel,
                    db=db,
                    resume=resume,
                    suite=suite,
                    chunk_size=chunk_size,
                    quorum=quorum,
                    mapping=mapping,
                    use_cache=not no_cache,
                    max_chars=max_chars,
                    calibration=calibration,
                    limit=limit,
                    sample=sample,
                    seed=seed,
                    max_cost=max_cost,
                    workers=workers,
                    shard=shard,
                    run_id=run_id,
                    take_over=take_over,
                    early_stop=early_stop,
                    audit_fraction=audit_fraction,
                    batch=batch,
                    batch_wait=batch_wait,
                ),
                dask=dask,
                origin=panel_note,
            )
        except KeyboardInterrupt:  # before the run's flow began: nothing stored, nothing to resume
            err.print(INTERRUPTED_BEFORE_THE_RUN)
            raise typer.Exit(code=130) from None
        except RunInterrupted as stopped:
            # Ctrl-C, SIGTERM, a cancellation in Prefect or --max-cost spent (exit code 3): the
            # run is marked interrupted and the message says how to resume it.
            err.print(
                output.safe_text(stopped.message), markup=False, highlight=False, soft_wrap=True
            )
            raise typer.Exit(code=stopped.exit_code) from None
        except (DatasetError, PanelError, ValueError, RuntimeError) as error:
            from juryflow.flows.runtime.interrupts import sigint_seen
            from juryflow.storage.failures import stopped_by_ctrl_c

            if stopped_by_ctrl_c(error) or sigint_seen():
                err.print(INTERRUPTED_BEFORE_THE_RUN)
                raise typer.Exit(code=130) from None
            fail(str(error))
            return
    from juryflow.terminal.judge_table import judges_of_run

    # A shard's summary is its part; the run's judges are judged together once it finishes.
    judges = judges_of_run(summary) if shard is None else None
    output.print_run_summary(console, summary, judges)
    from juryflow.analysis.run_health import failure_lines

    # A stopped judge or a run mostly without consensus is stored, but is no success.
    failures = failure_lines(summary)
    for line in failures:
        text = output.safe_text(f"juryflow: {line}", one_line=True)
        err.print(text, markup=False, highlight=False, soft_wrap=True)
    if failures:
        raise typer.Exit(code=1)


def _use_data_path(db: str | None, data_path: str | None) -> None:
    """``--data-path`` for every store this process opens: the first one to attach a new
    lake creates it, and must put its files there."""
    if data_path is None:
        return
    import os

    from juryflow.storage.connection import DATA_PATH_ENV, resolve_target

    resolve_target(db, data_path)  # a DuckDB file with --data-path is refused
    if not data_path.strip():
        fail("--data-path is empty; pass a directory or an s3://... prefix")
    os.environ[DATA_PATH_ENV] = data_path


def _check_budget(
    panel: str | None, db: str | None, resume: str | None, max_cost: float | None, dask: str | None
) -> None:
    """``--max-cost`` that could not be kept is refused before anything is created."""
    if max_cost is not None:
        from juryflow.planning.dry_run import check_budget

        check_budget(panel, db, resume, max_cost, distributed=dask is not None)


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

_register_ops(app)  # `regression`, `reaggregate`, `report` and `serve`

from juryflow.cli.runs import register as _register_runs  # noqa: E402

_register_runs(app)  # `runs`, `export` and `import`

from juryflow.cli.view import register as _register_view  # noqa: E402

_register_view(app)  # `view`

from juryflow.cli.annotations import register as _register_annotations  # noqa: E402

_register_annotations(app)  # `export-annotations`

from juryflow.cli.store import register as _register_store  # noqa: E402

_register_store(app)  # `store compact`

from juryflow.cli.shards import register as _register_shards  # noqa: E402

_register_shards(app)  # `finish`

from juryflow.cli.server import register as _register_server  # noqa: E402

_register_server(app)  # `server start|stop|status`

from juryflow.cli.stub_server import register as _register_stub_server  # noqa: E402

_register_stub_server(app)  # `stub-server`


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


INTERRUPTED_BEFORE_THE_RUN = (
    "juryflow: interrupted (SIGINT) before the run started; nothing was judged"
)


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
