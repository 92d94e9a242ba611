"""`juryflow view`: the local web app over the store. Registered by ``juryflow/cli/commands.py``."""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING, Annotated

import duckdb
import typer
from rich.console import Console

from juryflow.cli.runs import DbOption, fail
from juryflow.terminal import output

if TYPE_CHECKING:
    from juryflow.storage.store import Store

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

REVIEWER_ENV = "JURYFLOW_REVIEWER"


def reviewer_name(given: str | None) -> str:
    """``--reviewer``, else ``$JURYFLOW_REVIEWER``, else the user this process runs as."""
    for name in (given, os.environ.get(REVIEWER_ENV)):
        if name and name.strip():
            return name.strip()
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a container's numeric user)
        return "reviewer"


def _open_store(db: str | None) -> Store:
    """The store, checked to be a juryflow store with runs, or one line and exit 2."""
    from juryflow.storage.connection import StoreError
    from juryflow.storage.store import Store
    from juryflow.storage.store.base import has_table

    store = Store(db)
    try:
        with store.read() as con:
            has_runs = has_table(con, "runs")
    except StoreError as error:
        fail(str(error))
    except duckdb.Error as error:
        fail(f"cannot read the store {store.path}: {type(error).__name__}: {error}")
    if not has_runs:
        fail(f"{store.path} holds no juryflow runs yet; run `juryflow run --db {store.path}` first")
    return store


def view_command(
    db: DbOption = None,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on (0: a free one).")
    ] = 8080,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; anything but loopback lets others in."),
    ] = "127.0.0.1",
    reviewer: Annotated[
        str | None,
        typer.Option(help="Who adjudicates (default: $JURYFLOW_REVIEWER, else your user name)."),
    ] = None,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open it in your browser ($BROWSER, else the default).")
    ] = False,
) -> None:
    """Browse the store's runs and items in a browser, and adjudicate what the judges dispute."""
    from juryflow.viewer.security import LOOPBACK_HOSTS
    from juryflow.viewer.server import (
        BindError,
        bind,
        is_loopback,
        make_server,
        serve,
        stopped_by_ctrl_c,
        url_of,
    )
    from juryflow.viewer.state import ViewerState

    store = _open_store(db)
    name = reviewer_name(reviewer)
    try:
        sock = bind(host, port)
    except BindError as error:
        fail(str(error))
        return
    loopback = is_loopback(host)
    # On loopback, requests must name a loopback host: a page whose domain was pointed at
    # 127.0.0.1 (DNS rebinding) is refused. Elsewhere the user chose who may connect.
    state = ViewerState(
        store=store,
        reviewer=name,
        allowed_hosts=LOOPBACK_HOSTS | {host.lower()} if loopback else None,
    )
    server = make_server(state)
    # From here on Ctrl-C is how the viewer is meant to stop, even before it serves.
    try:
        with stopped_by_ctrl_c(server):
            if not loopback:
                err.print(
                    output.plain(
                        f"warning: listening on {host}: anyone who can reach this machine on "
                        f"port {sock.getsockname()[1]} can read and annotate {store.path}",
                        one_line=True,
                    ),
                    style="yellow",
                    soft_wrap=True,
                )
            console.print(
                output.plain(
                    f"juryflow view: {url_of(sock)} (store {store.path}, reviewer {name}; "
                    "Ctrl-C stops)",
                    one_line=True,
                ),
                soft_wrap=True,
            )
            if open_browser:
                _open_in_browser(url_of(sock))
            serve(server, sock)
    except KeyboardInterrupt:  # a Ctrl-C in the instant before the handler was in place
        pass
    finally:
        sock.close()


def _open_in_browser(url: str) -> None:
    """Open ``url`` from a thread: the socket already listens, so the page waits for the
    server rather than the server for a browser command that may not return at once."""
    import threading
    import webbrowser

    def opening() -> None:
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            err.print(
                output.plain(f"warning: no browser could be opened; go to {url}", one_line=True),
                style="yellow",
                soft_wrap=True,
            )

    threading.Thread(target=opening, name="juryflow-open-browser", daemon=True).start()


def register(app: typer.Typer) -> None:
    """Add the ``view`` command to ``app``."""
    app.command("view")(view_command)
