"""The background server's idle watch: stops it once no command has used it for a while.

Started beside the server (:func:`juryflow.flows.runtime.detached_server.start` with an idle
time), in its own session, as ``python -m juryflow.flows.runtime.idle_stop PID SECONDS``. It
looks every few seconds: gone with the server; when the server's last use
(:func:`juryflow.flows.runtime.background_server.used_file`) is older than SECONDS and the
API counts no flow run pending or running, it stops the server as `juryflow server stop`
does. A server that does not answer is left alone (it may be starting or busy).

Only the standard library and httpx: this process lives as long as the server.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
import time
from collections.abc import Iterator

import httpx

from juryflow.flows.runtime.detached_server import is_prefect_process, recorded, stop

ACTIVE_STATES = ["PENDING", "RUNNING", "SCHEDULED", "CANCELLING"]


def _last_use() -> float:
    from juryflow.flows.runtime.background_server import used_file

    try:
        return used_file().stat().st_mtime
    except OSError:
        return 0.0


def _busy(api_url: str) -> bool:
    """Some flow run is pending or running (or the API cannot say: then assume so)."""
    try:
        response = httpx.post(
            f"{api_url}/flow_runs/count",
            json={"flow_runs": {"state": {"type": {"any_": ACTIVE_STATES}}}},
            timeout=10.0,
        )
        response.raise_for_status()
        return int(response.json()) > 0
    except (httpx.HTTPError, ValueError):
        return True


@contextlib.contextmanager
def _alone() -> Iterator[bool]:
    """Whether no command holds the lease, holding it alone meanwhile (a command that
    starts now waits, then finds the server stopped and starts another)."""
    from juryflow.flows.runtime.background_server import lease_file

    try:
        handle = lease_file().open("ab")
    except OSError:
        yield False
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def watch(pid: int, idle_seconds: float, poll_seconds: float) -> None:
    started = time.time()
    while True:
        time.sleep(poll_seconds)
        record = recorded()
        if record is None or record.pid != pid or not is_prefect_process(pid):
            return  # stopped, or replaced by another start: not ours to watch any more
        quiet_since = max(_last_use(), started)
        if time.time() - quiet_since < idle_seconds or _busy(record.api_url):
            continue
        with _alone() as alone:
            if alone:  # no command holds the lease: none is starting or running
                stop(record.host, record.port)
                return


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    pid, idle = int(args[0]), float(args[1])
    watch(pid, idle, poll_seconds=min(30.0, max(0.5, idle / 4)))


if __name__ == "__main__":
    main()
