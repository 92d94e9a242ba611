"""`juryflow run`: its options, one name each (so that the command is its option list and
one call), how the options given become one
:class:`~juryflow.planning.run_request.RunRequest`, and what the command does with it:
check it, run it (or estimate it, ``--dry-run``), show its summary. `juryflow regression`
takes the same options for its new run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from juryflow.cli.runs import fail
from juryflow.cli.user_files import default_panel
from juryflow.flows.runtime.prefect_env import quiet_prefect_logging
from juryflow.terminal import output
from juryflow.terminal.output import terminal_console

STARTED = time.monotonic()
"""When the command began (the command line's import, a fraction of a second after the
interpreter's start): the summary's duration is the command's, not only its judging's."""

if TYPE_CHECKING:
    from rich.console import Console

    from juryflow.planning.run_request import RunRequest

EarlyStopOption = Annotated[
    bool | None,
    typer.Option(
        "--early-stop/--no-early-stop",
        help="Call a judge only while its answer can still change the item's consensus "
        "(the result is unchanged; default: the panel's early_stop).",
    ),
]

AuditFractionOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        max=1.0,
        metavar="F",
        help="With --early-stop: this share of the items gets every judge anyway; "
        "agreement is measured on them (default: the panel's, 0.1).",
    ),
]


ChunkSizeOption = Annotated[
    int | None,
    typer.Option(min=1, max=1_000_000, help="Items per Prefect task (500; with --batch 10,000)."),
]

BatchOption = Annotated[
    bool | None,
    typer.Option(
        "--batch/--no-batch",
        help="Send the LLM judges' calls through their providers' batch APIs, at half the "
        "price; answers may take up to 24 hours (default: the panel's batch).",
    ),
]

BatchWaitOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        metavar="SECONDS",
        help="With --batch: stop the run (resumable, exit code 3) after this long waiting "
        "for batches, leaving them to finish; --resume reads them (default: no limit).",
    ),
]


DatasetArgument = Annotated[
    str | None, typer.Argument(help="JSONL, CSV or Parquet file (default: bundled sample).")
]
PanelOption = Annotated[
    str | None,
    typer.Option(help="Panel YAML file (default: ./panel.yaml, else the offline panel)."),
]
MapOption = Annotated[
    list[str] | None,
    typer.Option("--map", help="Prompt variable from a column: VAR=COLUMN (repeatable)."),
]
QuorumOption = Annotated[
    int | None, typer.Option(help="Judges that must answer: 1 to the panel size.")
]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Call models again.")]
ResumeOption = Annotated[str | None, typer.Option(help="Continue this interrupted run.")]
SuiteOption = Annotated[str | None, typer.Option(help="Suite name for regressions.")]
MaxCharsOption = Annotated[
    int, typer.Option(min=1, max=1_000_000_000, help="Longest accepted value.")
]
DaskOption = Annotated[
    str | None,
    typer.Option(help="Run chunk tasks on Dask: 'local' or a scheduler address."),
]
WorkersOption = Annotated[
    str | None,
    typer.Option(
        metavar="N|auto",
        help="Processes making the model calls, 1-64, or 'auto': one per core unless the "
        "panel's concurrency or rate limits leave a process idle (the start line says "
        "why). Default: one per 256 concurrent calls of the panel, at most one per core.",
    ),
]
CalibrationOption = Annotated[
    str | None,
    typer.Option(help="Combine the judges by this stored calibration (juryflow calibrate)."),
]
LimitOption = Annotated[
    int | None, typer.Option(min=1, help="Judge only the first N items of the dataset.")
]
SampleOption = Annotated[
    int | None,
    typer.Option(min=1, help="Judge N items drawn at random from the whole dataset."),
]
SeedOption = Annotated[
    int, typer.Option(min=0, max=2**31 - 1, help="Seed of --sample (same seed, same items).")
]
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print each judge's calls, estimated tokens and cost; call and write nothing.",
    ),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        metavar="USD",
        help="Start no model call once this run's calls cost this much; the run is left "
        "resumable (exit code 3).",
    ),
]
ShardOption = Annotated[
    str | None,
    typer.Option(
        metavar="I/N",
        help="Judge only shard I of N of the items (with --run-id; see `juryflow finish`).",
    ),
]
RunIdOption = Annotated[
    str | None,
    typer.Option("--run-id", help="The run every shard of a sharded run writes to."),
]
TakeOverOption = Annotated[
    bool,
    typer.Option(
        "--take-over", help="Claim the shard from a process on another machine that is gone."
    ),
]
DataPathOption = Annotated[
    str | None,
    typer.Option(
        "--data-path",
        help="Where a new DuckLake store (--db ducklake:...) keeps its Parquet files "
        "(default: $JURYFLOW_DATA_PATH).",
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Prefect's own log lines too (its flow and task runs)."),
]


def given_settings(ctx: typer.Context) -> dict[str, Any]:
    """The run settings among the options the user gave (on the line or through their
    environment variable), by the :class:`~juryflow.planning.run_request.RunRequest` field
    each sets; options left at their default are left to the request's own, and options
    of the command that are no run setting (``--dry-run``, a regression's thresholds) out."""
    from juryflow.planning.run_request import RunRequest

    # By name: typer carries its own copy of click, so the enum is not click's.
    given = {
        name: value
        for name, value in ctx.params.items()
        if getattr(ctx.get_parameter_source(name), "name", "") not in ("", "DEFAULT")
    }
    if "no_cache" in given:
        given["use_cache"] = not given.pop("no_cache")
    return {name: value for name, value in given.items() if name in RunRequest.model_fields}


def estimate_dry_run(console: Console, request: RunRequest) -> None:
    """``run --dry-run``: the estimate, without Prefect, keys, calls or writes."""
    from juryflow.planning.dry_run import estimate_run
    from juryflow.terminal import output

    output.print_dry_run(console, estimate_run(request))


INTERRUPTED_BEFORE_THE_RUN = (
    "juryflow: interrupted (SIGINT) before the run started; nothing was judged"
)


def start_run(ctx: typer.Context, *, dry_run: bool, verbose: bool) -> None:
    """The run the command line's options ask for (or its estimate, with ``--dry-run``);
    every failure a user can cause is one line and an exit code."""
    from juryflow.flows.runtime.background_server import use_background_server
    from juryflow.flows.runtime.interrupts import RunInterrupted, honour_sigint
    from juryflow.storage.connection import Patience, patient_waits

    console, err = terminal_console(), terminal_console(stderr=True)
    if not dry_run:
        # Before Prefect is imported: it reads PREFECT_API_URL once, at import.
        use_background_server()
    honour_sigint()
    quiet_prefect_logging(verbose)
    # A run waits for a store another process holds as long as it takes, from its first
    # look at it on (saying so), as its writes do: a reader never makes a run fail.
    with patient_waits(Patience()):
        try:
            summary = _judge(ctx, console, err, dry_run=dry_run)
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
        except (ValueError, RuntimeError) as error:  # DatasetError and PanelError included
            from juryflow.flows.runtime.interrupts import sigint_seen
            from juryflow.storage.failures import stopped_by_ctrl_c

            if stopped_by_ctrl_c(error) or sigint_seen():
                err.print(INTERRUPTED_BEFORE_THE_RUN)
                raise typer.Exit(code=130) from None
            fail(str(error))
    if summary is not None:
        _show_summary(console, err, summary, sharded=ctx.params.get("shard") is not None)


def _judge(
    ctx: typer.Context, console: Console, err: Console, *, dry_run: bool
) -> dict[str, Any] | None:
    """The request of the options given, checked, then run (None for a dry run)."""
    from rich.text import Text

    from juryflow.planning.run_request import RunRequest
    from juryflow.planning.run_setup import prepare_run
    from juryflow.runner import run_evaluation

    request = RunRequest.of(**given_settings(ctx))
    panel, panel_note = default_panel(request.panel, request.resume)
    if panel != request.panel:
        request = request.model_copy(update={"panel": panel})
    if dry_run:
        # no start line to carry it: a dry run says where its panel came from first
        if panel_note:
            err.print(output.plain(panel_note, one_line=True), soft_wrap=True)
        estimate_dry_run(console, request)
        return None
    request, warnings = prepare_run(request)
    for warning in warnings:
        err.print(Text("warning: ", style="yellow") + output.plain(warning), soft_wrap=True)
    return run_evaluation(console, request, origin=panel_note)


def _show_summary(
    console: Console, err: Console, summary: dict[str, Any], *, sharded: bool
) -> None:
    from juryflow.analysis.run_health import failure_lines
    from juryflow.terminal.judge_table import judges_of_run

    # A shard's summary is its part; the run's judges are judged together once it finishes.
    judges = None if sharded else judges_of_run(summary)
    summary = {**summary, "command_seconds": time.monotonic() - STARTED}
    output.print_run_summary(console, summary, judges)
    # A stopped judge or a run mostly without consensus is stored, but is no success.
    failures = failure_lines(summary)
    for line in failures:
        text = output.safe_text(f"juryflow: {line}", one_line=True)
        err.print(text, markup=False, highlight=False, soft_wrap=True)
    if failures:
        raise typer.Exit(code=1)
