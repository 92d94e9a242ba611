"""`juryflow finish RUN`: a sharded run's last step."""

from __future__ import annotations

import json
from typing import Annotated

import duckdb
import typer

from juryflow.cli.runs import DbOption, fail, resolve_or_exit
from juryflow.terminal.output import terminal_console

console = terminal_console()


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
        fail("--format must be table or json")
    run_id = resolve_or_exit(db, run)
    assert run_id is not None
    try:
        status = finish_sharded_run(Store(db), run_id)
    except (ShardError, StoreError) as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot finish run {run_id}: {type(error).__name__}: {error}")
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
    app.command("finish")(finish)
