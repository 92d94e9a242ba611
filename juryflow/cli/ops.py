"""CLI commands for operations: `regression`, `reaggregate`, `report`, `serve`, `init` and
`finish` (a sharded run's last step).

Registered on the main app by :func:`register` (``juryflow/cli/commands.py``).

One module because `regression` is most of it: its option list repeats the run's options
and adds the gate's thresholds, the A/A check's and the head-to-head panel (about 150
lines of declarations), and the other commands here are a few lines each around a flow.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Annotated, Any, cast

import duckdb
import typer
from rich.console import Console

from juryflow.cli.run_command import (
    BatchOption,
    CalibrationOption,
    ChunkSizeOption,
    DatasetArgument,
    LimitOption,
    MapOption,
    MaxCharsOption,
    MaxCostOption,
    NoCacheOption,
    QuorumOption,
    SampleOption,
    SeedOption,
    WorkersOption,
    estimate_dry_run,
    given_settings,
)
from juryflow.cli.runs import DbOption, resolve_or_exit
from juryflow.cli.runs import fail as _fail
from juryflow.terminal import output
from juryflow.terminal.output import terminal_console
from juryflow.terminal.regression_markdown import head_to_head_line

console = terminal_console()
err = terminal_console(stderr=True)


def _check_store(db: str | None) -> None:
    """Refuse a store the flow cannot use before Prefect starts: inside the flow the same
    error would arrive with Prefect's traceback (and, for regression, as exit code 1)."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.store import Store

    try:
        Store(db).migrate()
    except StoreError as error:
        _fail(str(error))


def _print_summary(summary: dict[str, Any]) -> None:
    try:
        output.print_run_summary(console, summary)
    except KeyError:  # the summary printer expects evaluate's keys; show them plainly
        console.print(output.plain(output.dump_json(summary)))


def regression_command(
    ctx: typer.Context,
    dataset: DatasetArgument = None,
    panel: Annotated[str | None, typer.Option(help="Panel YAML file.")] = None,
    db: DbOption = None,
    suite: Annotated[str | None, typer.Option(help="Suite name (default: dataset:panel).")] = None,
    baseline: Annotated[
        str, typer.Option(help="'last' (last successful run of the suite) or a run id.")
    ] = "last",
    quorum: QuorumOption = None,
    mapping: MapOption = None,
    limit: LimitOption = None,
    sample: SampleOption = None,
    seed: SeedOption = 0,
    chunk_size: ChunkSizeOption = None,
    max_chars: MaxCharsOption = 200_000,
    calibration: CalibrationOption = None,
    batch: BatchOption = None,
    max_cost: MaxCostOption = None,
    workers: WorkersOption = None,
    # Scores are shares in [0, 1], so are their changes; alpha runs from -1 to 1.
    max_mean_increase: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Largest allowed rise of the mean consensus score."),
    ] = 0.05,
    max_flips_to_hallucinated: Annotated[
        int, typer.Option(min=0, help="Largest allowed number of clean → hallucinated flips.")
    ] = 3,
    max_judge_drift: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Largest allowed |mean score change| of any judge."),
    ] = 0.1,
    max_agreement_drop: Annotated[
        float, typer.Option(min=0.0, max=2.0, help="Largest allowed fall of Krippendorff's alpha.")
    ] = 0.1,
    p_value_alpha: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Significance level of the paired test.")
    ] = 0.05,
    no_cache: NoCacheOption = False,
    noise_floor: Annotated[
        bool,
        typer.Option(
            "--noise-floor",
            help="A/A check: re-judge a seeded sample of the baseline's items with its panel "
            "(cache off) and flag only changes beyond the judges' noise.",
        ),
    ] = False,
    noise_sample: Annotated[
        int, typer.Option(min=1, help="Baseline items the A/A check re-judges.")
    ] = 50,
    noise_seed: Annotated[int, typer.Option(help="Seed of the A/A check's sample.")] = 0,
    false_alarm_rate: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="With --noise-floor: the gate's false-alarm rate on A/A runs."
        ),
    ] = 0.05,
    pairwise: Annotated[
        str | None,
        typer.Option(
            help="A panel of pairwise judges that also judges each item's baseline answer "
            "against the new one, in both orders; regressed when the new answers' win share "
            "is below 50 % beyond the noise.",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the new run's calls, tokens and cost per judge (not the A/A check's); "
            "call and write nothing.",
        ),
    ] = False,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="table, or markdown: the verdict for a CI step summary or a pull-request "
            "comment, on stdout.",
        ),
    ] = "table",
) -> None:
    """Judge the suite, compare with the baseline run; exit 1 naming what regressed.

    Over 100 lines: its option list (the new run's options, as `juryflow run` declares
    them, then the gate's thresholds); the body is one request, one flow call, one line."""
    from juryflow.flows.runtime.background_server import use_background_server
    from juryflow.flows.runtime.prefect_env import quiet_prefect_logging, quiet_stopped_run
    from juryflow.planning.run_request import RunRequest
    from juryflow.planning.run_setup import prepare_run

    if format_ not in {"table", "markdown"}:
        _fail("--format must be table or markdown")
    try:
        request = RunRequest.of(**given_settings(ctx))
        if dry_run:
            estimate_dry_run(console, request)
            return
        use_background_server()  # before Prefect's import, which reads PREFECT_API_URL
        from juryflow.flows.regression import RegressionDetected, regression

        # The new run's checks before Prefect starts, as `juryflow run` makes them.
        request, warnings = prepare_run(request)
    except (ValueError, RuntimeError) as error:  # a store that cannot be used included
        _fail(str(error))
        return
    for warning in warnings:
        err.print(output.plain(f"warning: {warning}", "yellow"), soft_wrap=True)
    if baseline not in ("last", ""):
        baseline = resolve_or_exit(request.db, baseline, "--baseline") or baseline
    quiet_prefect_logging()
    # A regression ends its flow run Failed on purpose, and Prefect reports that as an ERROR
    # line; the command's own lines below say what regressed (--verbose is not offered here).
    quiet_stopped_run()
    try:
        state: Any = asyncio.run(
            cast(
                Any,
                regression(
                    request,
                    baseline=baseline,
                    max_mean_increase=max_mean_increase,
                    max_flips_to_hallucinated=max_flips_to_hallucinated,
                    max_judge_drift=max_judge_drift,
                    max_agreement_drop=max_agreement_drop,
                    p_value_alpha=p_value_alpha,
                    noise_floor=noise_floor,
                    noise_sample=noise_sample,
                    noise_seed=noise_seed,
                    false_alarm_rate=false_alarm_rate,
                    pairwise=pairwise,
                    return_state=True,
                ),
            )
        )
    except (ValueError, RuntimeError) as error:
        _fail(str(error))
        return
    if state.is_failed():
        detected = state.result(raise_on_failure=False)
        if isinstance(detected, RegressionDetected) and detected.result:
            _print_outcome(detected.result, baseline, format_, regressed=True)
        else:
            err.print(output.plain(state.message, "bold red"), soft_wrap=True)
        raise typer.Exit(code=1)
    if not state.is_completed():
        _fail(f"the regression flow ended {state.type.value}: {state.message}")
    _print_outcome(state.result(), baseline, format_, regressed=False)


def _print_outcome(result: dict[str, Any], baseline: str, format_: str, *, regressed: bool) -> None:
    """The regression's outcome as lines (stderr when it regressed), or as Markdown; the
    Markdown also goes to the CI job's summary when there is one ($GITHUB_STEP_SUMMARY)."""
    from juryflow.terminal.regression_markdown import append_step_summary, regression_markdown

    comparison = result.get("comparison")
    text = (
        regression_markdown(comparison, "juryflow regression")
        if comparison is not None
        else f"### juryflow regression: no baseline\n\n{result['message']}\n"
    )
    append_step_summary(text)
    if format_ == "markdown":
        console.print(output.plain(text), soft_wrap=True, end="")
        return
    if regressed:
        _print_regression(result, baseline, err, "bold red")
    else:
        _print_regression(result, baseline, console)


def _print_regression(result: dict[str, Any], baseline: str, to: Console, style: str = "") -> None:
    """The outcome naming the baseline and how many items paired with it; then a warning
    line for each reason the baseline may not be comparable (stderr)."""
    head = f"run {result['run_id']} (suite {result['suite']})"
    comparison = result.get("comparison")
    if comparison is None:  # nothing to compare with: the message says so
        to.print(output.plain(f"{head}: {result['message']}", style), soft_wrap=True)
        return
    chosen = "the suite's last successful run" if baseline in ("last", "") else "pinned"
    to.print(
        output.plain(
            f"{head} vs baseline {comparison['baseline_run_id']} ({chosen}): "
            f"{comparison['n_paired']} of {comparison['n_items']} items paired; "
            f"{result['message']}",
            style,
        ),
        soft_wrap=True,
    )
    to.print(output.plain(_change_line(comparison), style), soft_wrap=True)
    head_to_head = head_to_head_line(comparison)
    if head_to_head is not None:
        to.print(output.plain(head_to_head, style), soft_wrap=True)
    for warning in comparison.get("baseline_warnings", []):
        err.print(output.plain(f"warning: {warning}", "yellow"), soft_wrap=True)


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3g}"


def _change_line(comparison: dict[str, Any]) -> str:
    """The mean change with its paired bootstrap interval beside the Wilcoxon p-value, and
    the A/A noise floor it was held against (when measured)."""
    p = comparison.get("p_value")
    line = (
        f"mean consensus change {_signed(comparison.get('mean_delta'))} "
        f"(95% bootstrap CI {_signed(comparison.get('ci_low'))} to "
        f"{_signed(comparison.get('ci_high'))}; Wilcoxon p={'–' if p is None else f'{p:.3g}'})"
    )
    floor = comparison.get("noise_floor")
    if floor is None:
        return line
    if floor.get("mean_delta") is None:
        return f"{line}; noise floor not measured (A/A check of {floor['aa_items']} items)"
    return (
        f"{line}; noise floor {_signed(floor['mean_delta'])} for "
        f"{floor['n_paired']} items, flips {floor['flips_to_hallucinated']}, from an A/A check "
        f"of {floor['aa_items']} items (run {comparison.get('noise_run_id')}, false-alarm "
        f"rate {floor['false_alarm_rate']:g})"
    )


def reaggregate_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run whose judgments to reuse.")],
    quorum: Annotated[
        int | None, typer.Option(min=1, help="Judges that must answer (default: the run's).")
    ] = None,
    min_votes: Annotated[
        int | None,
        typer.Option(
            min=1, help="Judges that must mark a character (--consensus spans=at_least:K)."
        ),
    ] = None,
    consensus: Annotated[
        list[str] | None,
        typer.Option(
            "--consensus",
            help="A rule, FAMILY=RULE (repeatable): score=median|mean|trimmed_mean[:P]|"
            "weighted_median; spans=majority|at_least:K|union|weighted[:T]|dawid_skene; "
            "verdict=auto|majority|at_least:K|weighted[:T]|score:T|spans|dawid_skene.",
        ),
    ] = None,
    calibration: Annotated[
        str | None, typer.Option(help="Apply this stored calibration (juryflow calibrate).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Recompute RUN's consensus from its stored judgments into a new run; no judge is called."""
    from juryflow.flows.reaggregate import reaggregate
    from juryflow.flows.runtime.prefect_env import quiet_prefect_logging

    _check_store(db)
    run_id = resolve_or_exit(db, run_id) or run_id
    quiet_prefect_logging()
    try:
        summary = asyncio.run(
            reaggregate(
                run_id=run_id,
                db=db,
                quorum=quorum,
                min_votes=min_votes,
                consensus=consensus,
                calibration=calibration,
            )
        )
    except (ValueError, RuntimeError) as error:
        _fail(str(error))
        return
    console.print(
        output.plain(
            f"run {summary['run_id']} re-aggregates {summary['parent_run_id']} "
            f"(quorum {summary['quorum']}; {summary['consensus']})"
        ),
        soft_wrap=True,
    )
    _print_summary(summary)


def _refuse_existing(target: Path, force: bool) -> None:
    """A report is cheap to remake but the file it would replace may not be (another run's
    page, someone's notes): replacing it is asked for, not assumed."""
    if target.exists() and not force:
        _fail(f"{target} exists; pass --force to overwrite it, or -o another path")


def report_command(
    run_id: Annotated[
        str | None, typer.Argument(metavar="[RUN]", help="Run id (default: the latest run).")
    ] = None,
    output_path: Annotated[
        str, typer.Option("--output", "-o", help="HTML file to write.")
    ] = "report.html",
    top: Annotated[int, typer.Option(min=1, max=10_000, help="Disputed items to show.")] = 15,
    db: DbOption = None,
    gold: Annotated[
        str,
        typer.Option(
            "--gold",
            help="Whose labels are the human labels: dataset, annotations (from `juryflow "
            "view`) or both (an item's newest annotation, else the dataset's label).",
        ),
    ] = "dataset",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a self-contained HTML report of RUN (no script, no network)."""
    from juryflow.cli.analysis import gold_source
    from juryflow.report.html import write_report
    from juryflow.storage.connection import StoreError
    from juryflow.storage.paths import writable_file
    from juryflow.storage.store import Store

    source = gold_source(gold)
    store = Store(db)
    run_id = resolve_or_exit(db, run_id)
    try:
        target = writable_file(output_path, "--output")  # before the report is made, not after
        _refuse_existing(target, force)
        chosen = run_id or store.latest_run_id()
        if chosen is None:
            _fail(f"no run in {store.path}; run `juryflow run` first")
            return
        path = write_report(store, chosen, output_path, top=top, gold=source)
    except (StoreError, ValueError) as error:
        _fail(str(error))
        return
    console.print(output.plain(f"report of run {chosen} written to {path}"), soft_wrap=True)


def serve_command(
    dataset: Annotated[
        str | None, typer.Argument(help="JSONL, CSV or Parquet file (default: bundled sample).")
    ] = None,
    panel: Annotated[str | None, typer.Option(help="Panel YAML file.")] = None,
    db: DbOption = None,
    suite: Annotated[str | None, typer.Option(help="Suite name.")] = None,
    baseline: Annotated[str, typer.Option(help="'last' or a pinned run id.")] = "last",
    evaluate_cron: Annotated[str, typer.Option(help="Cron of evaluate-serve.")] = "0 2 * * *",
    regression_cron: Annotated[str, typer.Option(help="Cron of regression-serve.")] = "30 2 * * *",
    timezone: Annotated[str, typer.Option(help="Timezone of the cron schedules.")] = "UTC",
    noise_floor: Annotated[
        bool,
        typer.Option(
            "--noise-floor",
            help="regression-serve runs the A/A check first (see `juryflow regression`).",
        ),
    ] = False,
) -> None:
    """Serve evaluate-serve and regression-serve from this process (needs a Prefect API)."""
    from juryflow.flows.runtime.prefect_server import configured_api_url
    from juryflow.flows.serve import ServeError, check_no_collision, serve_nightly

    try:
        check_no_collision()
    except ServeError as error:
        _fail(str(error))
    stopped_by = ["Ctrl-C"]

    def _stop_on_sigterm(signum: int, frame: object) -> None:
        # A service manager (systemd, Docker, a Prefect work pool) stops a server with
        # SIGTERM: end as Ctrl-C does, in one line, instead of dying without a word.
        stopped_by[0] = "SIGTERM"
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # installed before the line that says it serves: a SIGTERM after that line is caught
    api = configured_api_url()
    where = (
        f"on the Prefect server {api} (its UI: {api.removesuffix('/api')})"
        if api
        else "on a temporary Prefect server that ends with this command; to see them in a UI, "
        "`juryflow server start` and set PREFECT_API_URL"
    )
    try:
        console.print(
            output.plain(f"serving evaluate-serve and regression-serve {where} (Ctrl-C stops)"),
            soft_wrap=True,
        )
        serve_nightly(
            dataset=dataset,
            panel=panel,
            db=db,
            suite=suite,
            baseline=baseline,
            evaluate_cron=evaluate_cron,
            regression_cron=regression_cron,
            timezone=timezone,
            thresholds={"noise_floor": True} if noise_floor else None,
        )
    except KeyboardInterrupt:
        console.print(
            output.plain(f"stopped serving evaluate-serve and regression-serve ({stopped_by[0]})")
        )
        raise typer.Exit(143 if stopped_by[0] == "SIGTERM" else 130) from None


def init_command(
    directory: Annotated[
        str, typer.Argument(metavar="[DIR]", help="Where to write it (made if missing).")
    ] = ".",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite starter files that already exist.")
    ] = False,
) -> None:
    """Write a starter project (dataset, panels, a prompt file of your own) that runs as is."""
    from pathlib import Path

    from juryflow.cli.init_project import InitError, next_command, write_starter

    target = Path(directory)
    try:
        written = write_starter(target, force=force)
    except InitError as error:
        _fail(str(error))
        return
    for path, what in written:
        console.print(output.plain(f"wrote {path}  ({what})"), soft_wrap=True)
    console.print(output.plain(f"next: {next_command(target)}"), soft_wrap=True)


def finish(
    run: Annotated[str, typer.Argument(help="The sharded run (its --run-id, or a prefix).")],
    db: DbOption = None,
    format_: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Check every shard of RUN finished and every (item, judge) is stored once, then mark
    the run completed. The last shard to finish does this itself; run it to check, or after
    resuming a shard by hand."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.shards import ShardError, finish_sharded_run
    from juryflow.storage.store import Store

    if format_ not in {"table", "json"}:
        _fail("--format must be table or json")
    run_id = resolve_or_exit(db, run)
    assert run_id is not None
    try:
        status = finish_sharded_run(Store(db), run_id)
    except (ShardError, StoreError) as error:
        _fail(str(error))
        return
    except duckdb.Error as error:
        _fail(f"cannot finish run {run_id}: {type(error).__name__}: {error}")
        return
    if format_ == "json":
        console.print_json(json.dumps(status.to_dict()))
        return
    console.print(
        f"run {status.run_id}: {status.status}; {len(status.shards)} shards finished, "
        f"{status.items} items, {status.judgments} judgments, each (item, judge) once",
        highlight=False,
    )
    for row in status.shards:  # every one finished: finish_sharded_run checked it
        finished = f"{row.finished_at:%Y-%m-%d %H:%M:%S}" if row.finished_at else "-"
        console.print(
            f"  shard {row.shard}/{row.n_shards}  {row.owner or '-'}  finished {finished}",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.command("regression")(regression_command)
    app.command("reaggregate")(reaggregate_command)
    app.command("report")(report_command)
    app.command("serve")(serve_command)
    app.command("init")(init_command)
    app.command("finish")(finish)
