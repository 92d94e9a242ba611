"""The ephemeral Prefect API server of a `juryflow run`, owned so that it never outlives it.

Prefect starts its ephemeral server (``SubprocessASGIServer``) lazily, from whichever thread
first needs the API, as a plain child in juryflow's process group. Two faults follow: Ctrl-C
reaches the server with the rest of the group, so it dies first and the run's last state
changes, logs and events fail against it; and after ``kill -9`` of juryflow nothing stops it
(≈230 MB left running).

So juryflow starts it itself, before the flow, from the main thread:

- in its own session, so that a terminal's Ctrl-C reaches only juryflow, which stops the
  server after the run has stopped and flushed;
- through :func:`main` here, which makes the kernel kill it when juryflow dies
  (``PR_SET_PDEATHSIG``) and also watches juryflow's pid from a thread, for the cases the
  kernel signal misses (a parent thread that exited, a platform without ``prctl``).

Registered as Prefect's default instance, the same server serves every client, events
worker and log worker of the process, exactly as Prefect's own would.

This module's top level imports only the standard library: the server process starts
through it and should not pay for juryflow's imports.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_SECONDS = 0.5
STOP_GRACE_SECONDS = 3.0


def die_with_parent(parent: int, kernel_signal: bool = True) -> None:
    """Watch the parent from a thread and leave when it is gone; with ``kernel_signal``,
    also ask the kernel for SIGKILL then (it fires when the parent *thread* that started
    this process ends, so only for a process started from a thread that lasts)."""
    if kernel_signal:
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before prctl took effect: then we were re-parented already.
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="juryflow-parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """``python -m juryflow.flows.runtime.prefect_server PARENT_PID UVICORN_ARGS...``: uvicorn,
    tied to PARENT."""
    args = list(sys.argv[1:] if argv is None else argv)
    die_with_parent(int(args[0]))
    from uvicorn.main import main as uvicorn_main

    sys.argv = ["uvicorn", *args[1:]]
    uvicorn_main()


def _owned_server_class() -> Any:
    from prefect.server.api.server import SubprocessASGIServer

    class OwnedServer(SubprocessASGIServer):
        """Prefect's ephemeral server, started in its own session and tied to this process."""

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            import prefect
            from prefect.settings import get_current_settings

            # The same command and environment as Prefect's own (3.8.8), through main().
            server_env = {
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
            }
            return subprocess.Popen(
                args=[
                    sys.executable,
                    "-m",
                    "juryflow.flows.runtime.prefect_server",
                    str(os.getpid()),
                    "--app-dir",
                    str(prefect.__module_path__.parent),
                    "--factory",
                    "prefect.server.api.server:create_app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "error",
                    "--lifespan",
                    "on",
                ],
                env={
                    **os.environ,
                    **server_env,
                    **get_current_settings().to_environment_variables(exclude_unset=True),
                },
                start_new_session=True,
            )

        def stop(self) -> None:
            # Prefect's stop waits 5 s after SIGTERM; the run is over, so be brisker.
            process = self.server_process
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            super().stop()

    return OwnedServer


def configured_api_url() -> str | None:
    """The Prefect API this process talks to (``PREFECT_API_URL`` from the environment or
    the active profile), None when Prefect would start a temporary one."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def needs_ephemeral_server() -> bool:
    """True when Prefect would start an ephemeral server: when no API URL is set.

    (Prefect 3.8.8's client starts one then whatever the ephemeral-mode setting says: it
    tests the setting object, which is always true, not its value.)
    """
    from prefect.settings import PREFECT_API_URL

    return not PREFECT_API_URL.value()


def start_owned_server() -> Any | None:
    """Start the ephemeral server juryflow owns; None when Prefect has a server already.

    Must run in the main thread: the kernel's parent-death signal follows the thread that
    started the child.
    """
    if not needs_ephemeral_server():
        return None
    from prefect.server.api.server import SubprocessASGIServer

    existing = SubprocessASGIServer._instances.get(None)
    if existing is not None and existing.running:
        return None  # a test harness, or an earlier run of this process
    SubprocessASGIServer._instances.pop(None, None)
    server = _owned_server_class()()  # registers itself as Prefect's default instance
    server.start()
    return server


def kill_now(server: Any | None) -> None:
    """Stop the server without waiting: juryflow is leaving at once (a second Ctrl-C)."""
    process = getattr(server, "server_process", None)
    if process is not None and process.poll() is None:
        with contextlib.suppress(OSError):
            process.kill()


if __name__ == "__main__":
    main()
