"""Serving the viewer with uvicorn: the socket is bound here first, so that a port in use or
a host that is not this machine's is one line naming the fix, and ``--port 0`` has a number
to print before the first request."""

from __future__ import annotations

import errno
import ipaddress
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from juryflow.viewer.app import create_app
from juryflow.viewer.state import ViewerState

BACKLOG = 128


class BindError(ValueError):
    """The viewer cannot listen where asked; the message says what to pass instead."""


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port the system picks)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        detail = getattr(error, "strerror", None) or str(error)
        raise BindError(
            f"--host {host!r} is not an address of this machine ({detail}); "
            "pass --host 127.0.0.1 (or an address this machine has)"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as error:
        sock.close()
        raise BindError(_bind_problem(host, port, error)) from None
    sock.set_inheritable(True)
    return sock


def _bind_problem(host: str, port: int, error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use (another viewer or server?); "
            "pass --port another number, or --port 0 for a free one"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return f"--host {host} is not an address of this machine; pass --host 127.0.0.1"
    if error.errno == errno.EACCES:
        return f"port {port} needs administrator rights; pass --port 1024 or above"
    return f"cannot listen on {host}:{port}: {error.strerror or error}; pass another --host/--port"


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is this machine's own loopback."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses
    )


def url_of(sock: socket.socket) -> str:
    """The address to open in a browser: an all-addresses bind is reached at loopback."""
    address, port = sock.getsockname()[:2]
    ip = ipaddress.ip_address(str(address).split("%")[0])
    if ip.is_unspecified:
        ip = ipaddress.ip_address("::1" if ip.version == 6 else "127.0.0.1")
    shown = f"[{ip}]" if ip.version == 6 else str(ip)
    return f"http://{shown}:{port}/"


def _server(app: ASGIApp) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    return uvicorn.Server(config)


@contextmanager
def stopped_by_ctrl_c(server: uvicorn.Server) -> Iterator[None]:
    """Within the block, Ctrl-C asks ``server`` to shut down instead of raising
    KeyboardInterrupt: the same whether it comes before uvicorn serves or while it does
    (uvicorn then takes the signal over, and hands it back to this handler when done)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        server.should_exit = True

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def make_server(state: ViewerState) -> uvicorn.Server:
    return _server(create_app(state))


def serve(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve in the foreground until ``server.should_exit`` (Ctrl-C, see
    :func:`stopped_by_ctrl_c`) or SIGTERM."""
    server.run(sockets=[sock])


@dataclass(frozen=True)
class RunningViewer:
    """A viewer served from a background thread (tests, notebooks)."""

    server: uvicorn.Server
    thread: threading.Thread
    url: str

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_in_thread(
    state: ViewerState,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = 10.0,
    app: ASGIApp | None = None,
) -> RunningViewer:
    """Serve ``state`` from a daemon thread; returns once the server accepts requests.

    ``app``: one made by :func:`juryflow.viewer.app.create_app` with routes added (tests).
    """
    sock = bind(host, port)
    server = _server(app or create_app(state))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="juryflow-view", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the viewer did not start; see its log above")
        time.sleep(0.02)
    return RunningViewer(server, thread, url_of(sock))
