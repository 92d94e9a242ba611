"""Shared fixtures: one real Prefect test server per session, real DuckDB files in tmp dirs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Under pytest-xdist each worker gets its own Prefect home: the CLI runs the tests start use an
# ephemeral server whose SQLite database must not be shared by two processes at once.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER and os.environ.get("PREFECT_HOME"):
    os.environ["PREFECT_HOME"] = f"{os.environ['PREFECT_HOME']}-{_XDIST_WORKER}"

# A suite started in the background of a shell without job control (`cmd &` in a script)
# inherits SIGINT ignored, and so would every `juryflow` it starts: their Ctrl-C tests would
# then test nothing. A terminal's foreground job, which they stand for, has it at default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "ragtruth_data2txt_sample.jsonl"
SHARED_DATA = REPO.parent / "shared" / "data" / "ragtruth"


@pytest.fixture(autouse=True)
def own_request_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test starts with an empty cache folder (what one run learns of an endpoint for
    the next, ``header_memory``): what a test sends must not depend on the tests before it."""
    previous = os.environ.get("JURYFLOW_CACHE_DIR")
    os.environ["JURYFLOW_CACHE_DIR"] = str(tmp_path_factory.mktemp("request-cache"))
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("JURYFLOW_CACHE_DIR", None)
        else:
            os.environ["JURYFLOW_CACHE_DIR"] = previous


SESSION_SERVER_OFF = "JURYFLOW_TEST_EPHEMERAL"
"""Set to 1 to let every `juryflow` process the tests start run its own ephemeral server,
as a user's terminal without ``PREFECT_API_URL`` does (tests of that path ask for it)."""


@pytest.fixture(scope="session", autouse=True)
def one_prefect_server_for_the_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """One `prefect server start` the whole session's `juryflow` processes talk to.

    Without it each of them starts an ephemeral server (9-20 s of CPU on 2 cores), which
    was most of the suite's time. Tests of the ephemeral path drop ``PREFECT_API_URL`` from
    their children's environment, as they always did."""
    if os.environ.get("PREFECT_API_URL") or os.environ.get(SESSION_SERVER_OFF) == "1":
        yield
        return
    from tests.prefect_server import running_prefect_server

    with running_prefect_server(tmp_path_factory.mktemp("session-prefect")) as env:
        os.environ["PREFECT_API_URL"] = env["PREFECT_API_URL"]
        try:
            yield
        finally:
            os.environ.pop("PREFECT_API_URL", None)


def _drain_prefect_workers() -> None:
    """Logs and events still queued reach the server before it stops, as Prefect's test
    harness does at its end (else: "Error logging to API" as the session ends)."""
    import inspect

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        try:
            logs = APILogWorker.instance().drain()
            if inspect.isawaitable(logs):
                await logs
        except RuntimeError:  # the worker never started
            pass
        events = EventsWorker.drain_all()
        if inspect.isawaitable(events):
            await events

    run_coro_as_sync(drain())


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """Flows run in this process against the session's server when there is one (a second
    server per test process cost 10-20 s of CPU at start); else Prefect's test harness."""
    url = os.environ.get("PREFECT_API_URL")
    if url:
        import prefect.context
        from prefect.settings import PREFECT_API_URL, temporary_settings

        # the second context is made inside the first: code in a context copied before this
        # one (the global settings) must see the server too
        with (
            temporary_settings(updates={PREFECT_API_URL: url}),
            prefect.context._temporary_global_settings_context(
                prefect.context.get_settings_context()
            ),
        ):
            yield
            _drain_prefect_workers()
        return
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"
