"""`juryflow server start|stop|status`: one Prefect API server kept running for many commands.

Without ``PREFECT_API_URL`` every command that runs a flow starts a private Prefect server
(seconds each time). ``prefect server start --background`` dies within a minute offline (see
:mod:`juryflow.flows.runtime.detached_server`); this one keeps running until stopped.
"""

from __future__ import annotations

from typing import Annotated

import typer

from juryflow.cli.help_format import App
from juryflow.cli.runs import fail
from juryflow.terminal import output
from juryflow.terminal.output import terminal_console

server_app = App(
    help="A Prefect server kept running for every juryflow command (faster starts, a UI).",
    no_args_is_help=True,
)
console = terminal_console(highlight=False)


def _say(line: str) -> None:
    console.print(output.plain(line, one_line=True), soft_wrap=True)


@server_app.command("start")
def start_command(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on --host.")] = 4200,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    wait: Annotated[
        float,
        typer.Option(min=1.0, metavar="SECONDS", help="How long to wait for it to answer."),
    ] = 180.0,
) -> None:
    """Start a Prefect server in the background (log in $PREFECT_HOME); it keeps running
    after this command and the terminal end, until `juryflow server stop`."""
    from juryflow.flows.runtime.detached_server import ServerError, start

    try:
        record, started = start(host, port, wait)
    except ServerError as error:
        fail(str(error))
        return
    what = "started" if started else "already running"
    _say(f"Prefect server {what}: {record.ui_url} (pid {record.pid}, log {record.log})")
    _say("point juryflow (and prefect) at it in this shell:")
    _say(f"  export PREFECT_API_URL={record.api_url}")
    _say("stop it with: juryflow server stop")


@server_app.command("stop")
def stop_command(
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Stop it only if it runs on this port."),
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="Stop it only if it listens on this address.")
    ] = None,
) -> None:
    """Stop the server `juryflow server start` started (the one on --host/--port, when
    given)."""
    from juryflow.flows.runtime.detached_server import stop

    record = stop(host, port)
    if record is None:
        _say(_none_runs(host, port))
        return
    _say(f"Prefect server {record.ui_url} (pid {record.pid}) stopped")


def _none_runs(host: str | None, port: int | None) -> str:
    """Why nothing was stopped: no server at all, or none at the address asked for (then
    what does run, so the next command can name it)."""
    from juryflow.flows.runtime.detached_server import port_taken, recorded

    if host is None and port is None:
        return "no server started by `juryflow server start` is running"
    line = f"no server started by `juryflow server start` runs on {_address(host, port)}"
    running = recorded()
    if running is not None:
        return (
            f"{line}; the one it started runs on {running.host}:{running.port}: "
            f"`juryflow server stop --port {running.port}` stops it"
        )
    if port is not None and port_taken(host or "127.0.0.1", port):
        # a server started another way (`prefect server start`) is not ours to kill
        return f"{line}; another program listens there: stop it the way it was started"
    return line


def _address(host: str | None, port: int | None) -> str:
    if host is None:
        return f"port {port}"
    return host if port is None else f"{host}:{port}"


@server_app.command("status")
def status_command() -> None:
    """Whether the server `juryflow server start` started is running and answering
    (exit code 1 when it is not)."""
    from juryflow.flows.runtime.detached_server import healthy, recorded

    record = recorded()
    if record is None:
        _say("no server started by `juryflow server start` is running")
        raise typer.Exit(code=1)
    state = "answering" if healthy(record) else "running, not answering yet"
    _say(f"Prefect server {record.ui_url} (pid {record.pid}): {state}; API {record.api_url}")
    if state != "answering":
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add `server start|stop|status` to the juryflow command line."""
    app.add_typer(server_app, name="server")
