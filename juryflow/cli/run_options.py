"""Options of `juryflow run` kept apart so that the run command stays readable: those that
decide what judging costs (early stopping, batch mode), and the rule for a resumed run."""

from __future__ import annotations

from typing import Annotated

import typer

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


def refuse_settings_on_resume(**given: object) -> None:
    """A resumed run keeps the settings it started with; silently ignoring new ones would
    mislead, so they are refused."""
    named = [f"--{name}" for name, value in given.items() if value is not None]
    if named:
        raise ValueError(
            f"--resume continues a run with the settings it started with; drop {', '.join(named)}"
            " (or start a new run, or re-aggregate it: juryflow reaggregate RUN --consensus ...)"
        )
