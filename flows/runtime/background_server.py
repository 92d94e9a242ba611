"""One Prefect server per user, kept in the background and reused by every command that
runs a flow: seconds to a result instead of a private server's start per command.

Without ``PREFECT_API_URL`` (in the environment or the active Prefect profile) a command
that runs a flow would start a temporary server of its own (9-20 s on 2 cores). Instead,
:func:`use_background_server` points this process at the server `juryflow server start`
keeps (:mod:`.detached_server`), starting it on first need, and records the use; an idle
watch (:mod:`.idle_stop`) stops that server once no command has used it for
``JURYFLOW_SERVER_IDLE_MINUTES`` (default 30) and no flow run is running.

Who gets it (``JURYFLOW_SERVER``): ``background`` always; ``ephemeral`` never (a private
server per command, the old way); ``auto`` (the default) when a person runs the command
at a terminal (stdin and stdout are terminals). Scripts, CI jobs and schedulers keep a
self-contained command unless they ask: nothing is left running behind them.

Must run before Prefect is imported: Prefect reads its settings once, at import.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import sys
import time
import tomllib
from pathlib import Path
from typing import IO

from juryflow.flows.runtime.detached_server import (
    ServerError,
    healthy,
    port_taken,
    prefect_home,
    recorded,
    start,
)

MODE_VARIABLE = "JURYFLOW_SERVER"
IDLE_VARIABLE = "JURYFLOW_SERVER_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 30.0
USED_NAME = "juryflow-server.used"
LEASE_NAME = "juryflow-server.lease"
FIRST_PORT = 4200
START_WAIT_SECONDS = 180.0


def used_file() -> Path:
    """Touched by every command that uses the background server: the idle watch's clock."""
    return prefect_home() / USED_NAME


def profile_api_url() -> str | None:
    """``PREFECT_API_URL`` of the active Prefect profile (read without importing Prefect)."""
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or prefect_home() / "profiles.toml")
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active")
    found = profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")
    return str(found) if found else None


def wanted() -> bool:
    """Whether this command should use the background server (see the module docs)."""
    if os.environ.get("PREFECT_API_URL") or profile_api_url():
        return False  # a server of the user's own choosing wins
    mode = os.environ.get(MODE_VARIABLE, "auto").strip().lower()
    if mode == "background":
        return True
    if mode == "ephemeral":
        return False
    return sys.stdin.isatty() and sys.stdout.isatty()


def idle_minutes() -> float:
    try:
        return max(0.05, float(os.environ.get(IDLE_VARIABLE, DEFAULT_IDLE_MINUTES)))
    except ValueError:
        return DEFAULT_IDLE_MINUTES


def _free_port(host: str) -> int:
    port = FIRST_PORT
    while port_taken(host, port) and port < FIRST_PORT + 100:
        port += 1
    return port


def use_background_server() -> str | None:
    """Point this process at the background server (started now if none runs) and return
    its API URL; None when this command keeps to a private server, or when the background
    one cannot be started (then the private one is the fallback, as before)."""
    if not wanted():
        return None
    _hold_lease()
    record = recorded()
    if record is None or not healthy(record):
        host = "127.0.0.1"
        try:
            record, _ = start(host, _free_port(host), START_WAIT_SECONDS, idle_minutes())
        except ServerError as error:
            print(f"juryflow: no background Prefect server ({error}); using a private one",
                  file=sys.stderr)  # fmt: skip
            return None
    touch_used()
    # The idle clock starts when the command ends, however long its run took.
    atexit.register(touch_used)
    os.environ["PREFECT_API_URL"] = record.api_url
    return record.api_url


_lease: list[IO[bytes]] = []


def lease_file() -> Path:
    """Held (shared) by every command using the background server for as long as it runs;
    the idle watch stops the server only when it can take it alone."""
    return prefect_home() / LEASE_NAME


def _hold_lease() -> None:
    """Take a shared hold on the lease for this process's life (waits while the idle watch
    is stopping the server: the command then starts a new one)."""
    if _lease:
        return
    path = lease_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("ab")
    fcntl.flock(handle, fcntl.LOCK_SH)
    _lease.append(handle)  # kept open: the hold ends with the process


def touch_used() -> None:
    """Record a use of the background server now."""
    path = used_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{time.time():.0f}\n", encoding="utf-8")
