"""Options of `juryflow run` kept apart so that the run command stays readable: those that
decide what judging costs (early stopping, batch mode) and its estimate (``--dry-run``),
and the rule for a resumed run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

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


def refuse_settings_on_resume(**given: object) -> None:
    """A resumed run keeps the settings it started with; silently ignoring new ones would
    mislead, so they are refused."""
    named = [f"--{name}" for name, value in given.items() if value is not None]
    if named:
        raise ValueError(
            f"--resume continues a run with the settings it started with; drop {', '.join(named)}"
            " (or start a new run, or re-aggregate it: juryflow reaggregate RUN --consensus ...)"
        )


def estimate_dry_run(
    console: Console,
    dataset: str | None,
    panel: str | None,
    db: str | None,
    mapping: dict[str, str],
    quorum: int | None,
    no_cache: bool,
    max_chars: int,
    limit: int | None,
    sample: int | None,
    seed: int,
    max_cost: float | None,
    resume: str | None,
    batch: bool | None,
) -> None:
    """``run --dry-run``: the estimate, without Prefect, keys, calls or writes."""
    from juryflow.planning.dry_run import estimate_run
    from juryflow.terminal import output

    if resume is not None:
        raise ValueError(
            "--dry-run estimates a new run; drop --resume (a resumed run judges only the "
            "(item, judge) pairs it has not stored)"
        )
    estimate = estimate_run(
        dataset,
        panel,
        mapping,
        db=db,
        quorum=quorum,
        use_cache=not no_cache,
        max_chars=max_chars,
        limit=limit,
        sample=sample,
        seed=seed,
        max_cost=max_cost,
        batch=batch,
    )
    output.print_dry_run(console, estimate)
