"""A Prefect API server that outlives the command that starts it (`juryflow server`).

``prefect server start --background`` (Prefect 3.8.8) gives the server pipes for its output
and exits: nothing reads them any more, and the server dies on its next log line. Offline
that is the telemetry error about 20 s after the start, so every recipe built on it fails
within the first minute. The server started here writes to a log file, reads nothing, runs
in its own session (no terminal's Ctrl-C or hang-up reaches it) and has telemetry off; its
pid, address and log are kept in ``$PREFECT_HOME/juryflow-server.json`` so that ``stop``
and ``status`` find it from any shell.

Only the standard library and httpx: starting a server should not pay for Prefect's import.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from juryflow.flows.runtime.prefect_env import OFFLINE_DEFAULTS

STATE_NAME = "juryflow-server.json"
LOG_NAME = "juryflow-server.log"
POLL_SECONDS = 0.5
STOP_GRACE_SECONDS = 20.0
LOG_TAIL_CHARS = 2000


class ServerError(RuntimeError):
    """The server could not be started, found or stopped; the message names the fix."""


@dataclass(frozen=True, slots=True)
class ServerRecord:
    pid: int
    host: str
    port: int
    log: str

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.ui_url}/api"


def prefect_home() -> Path:
    """Where Prefect keeps its database and settings, as Prefect resolves it by default."""
    home = os.environ.get("PREFECT_HOME")
    return Path(home).expanduser() if home else Path.home() / ".prefect"


def _state_file() -> Path:
    return prefect_home() / STATE_NAME


def recorded() -> ServerRecord | None:
    """The server `juryflow server start` left running, if its process is still there."""
    try:
        fields = json.loads(_state_file().read_text(encoding="utf-8"))
        record = ServerRecord(**fields)
    except (OSError, ValueError, TypeError):
        return None
    return record if is_prefect_process(record.pid) else None


def is_prefect_process(pid: int) -> bool:
    """The pid is alive and, where /proc says, still a Prefect server (not a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's: not ours
        return False
    if not Path("/proc/self").exists():  # no /proc (macOS): the signal is all there is
        return True
    try:  # a zombie's cmdline is empty: gone too
        return b"prefect" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def healthy(record: ServerRecord, timeout: float = 2.0) -> bool:
    try:
        # trust_env=False: a proxy from the environment must not stand between us and 127.0.0.1
        with httpx.Client(trust_env=False, timeout=timeout) as client:
            return client.get(f"{record.api_url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def port_taken(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def _log_tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:]


def _detached(
    command: list[str], log_path: Path, env: dict[str, str], what: str
) -> subprocess.Popen[bytes]:
    """``command`` in its own session (no terminal's Ctrl-C or hang-up reaches it), reading
    nothing and writing to the log, which notes its start."""
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n--- {what}: {' '.join(command)}\n")
        log.flush()
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )


def start(
    host: str, port: int, wait_seconds: float, idle_minutes: float | None = None
) -> tuple[ServerRecord, bool]:
    """Start a detached ``prefect server start`` and wait until it answers; returns it and
    whether it was started now (False: the one started before is still running).
    ``idle_minutes``: an idle watch (:mod:`.idle_stop`) stops it after that long unused;
    None: it runs until `juryflow server stop`."""
    running = recorded()
    if running is not None:
        return running, False
    if port_taken(host, port):
        raise ServerError(
            f"{host}:{port} is taken by another program (a Prefect server started another "
            "way?); stop it, or pass --port a free port"
        )
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / LOG_NAME
    env = dict(os.environ)
    for name, value in OFFLINE_DEFAULTS.items():
        env.setdefault(name, value)
    env.pop("PREFECT_API_URL", None)  # the server is the API; it must not look for another
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", host,
               "--port", str(port)]  # fmt: skip
    process = _detached(command, log_path, env, "juryflow server start")
    record = ServerRecord(pid=process.pid, host=host, port=port, log=str(log_path))
    _state_file().write_text(json.dumps(asdict(record)), encoding="utf-8")
    if idle_minutes is not None:
        watch = [sys.executable, "-m", "juryflow.flows.runtime.idle_stop", str(process.pid),
                 str(60.0 * idle_minutes)]  # fmt: skip
        _detached(watch, log_path, env, "its idle watch")
    deadline = time.monotonic() + wait_seconds
    while not healthy(record):
        if process.poll() is not None:
            _state_file().unlink(missing_ok=True)
            raise ServerError(
                f"the Prefect server exited (code {process.returncode}) before it answered; "
                f"its log {log_path} ends:\n{_log_tail(log_path)}"
            )
        if time.monotonic() > deadline:
            raise ServerError(
                f"the Prefect server (pid {process.pid}) did not answer within "
                f"{wait_seconds:g} s; it is left starting: `juryflow server status` tells when "
                f"it is up, `juryflow server stop` stops it, {log_path} says what it does"
            )
        time.sleep(POLL_SECONDS)
    return record, True


def runs_on(record: ServerRecord, host: str | None, port: int | None) -> bool:
    """Whether ``record`` listens on ``host``:``port``; a None part matches any."""
    return (host is None or record.host == host) and (port is None or record.port == port)


def stop(host: str | None = None, port: int | None = None) -> ServerRecord | None:
    """Stop the recorded server and everything it started, if it runs on ``host``:``port``
    (None: any); None when no such server is running."""
    record = recorded()
    if record is not None and not runs_on(record, host, port):
        return None  # another address's server: its record must outlive this call
    _state_file().unlink(missing_ok=True)
    if record is None:
        return None
    # start_new_session made the server the leader of its own process group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while is_prefect_process(record.pid) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, signal.SIGKILL)
    return record
