"""Prefect settings juryflow needs before Prefect is imported, and its logging once it is.

Set with ``setdefault`` so that a user's own configuration (a real server, more logging)
always wins.
"""

from __future__ import annotations

import logging
import os

OFFLINE_DEFAULTS = {
    # No telemetry attempts: this tool runs offline and must not phone home.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # The ephemeral API server takes 9-18 s to start on a 2-core machine; the default
    # timeout is shorter than that.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


QUIET_DEFAULTS = {
    # The terminal belongs to juryflow's progress bar and summary; --verbose shows Prefect's.
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # The ephemeral server logs event-flushing errors while it shuts down at exit.
    "PREFECT_LOGGING_SERVER_LEVEL": "CRITICAL",
}


def apply_offline_defaults(quiet: bool = False) -> None:
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if quiet:
        for name, value in QUIET_DEFAULTS.items():
            os.environ.setdefault(name, value)


def quiet_prefect_logging(verbose: bool = False) -> None:
    """Keep the terminal for juryflow's own progress bar and summary.

    The ephemeral server logs event-flushing errors while it shuts down at exit; they are
    about Prefect's bookkeeping, not about the run.
    """
    if verbose:
        return
    import prefect  # noqa: F401  (Prefect configures its loggers on import; adjust after)

    silenced = ("prefect.server", "prefect._internal", "prefect.events", "uvicorn", "docket")
    # A logger's own level wins over its parent's: the loggers that exist already (Prefect
    # made `prefect.events.utilities` on import) are set one by one, or a heartbeat that
    # fails as the process exits still prints its traceback under the run's error line.
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(silenced):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        elif name.startswith("prefect"):
            logging.getLogger(name).setLevel(logging.WARNING)
    for name in silenced:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # The client logs "Starting temporary server" at INFO and "Still processing items" at
    # WARNING while the ephemeral server shuts down: neither is about the run.
    logging.getLogger("prefect").setLevel(logging.ERROR)
    logging.getLogger("prefect.EventsWorker").setLevel(logging.ERROR)
    # Prefect's queue services log under their bare class names, outside "prefect": on a
    # loaded machine "EventsWorker - Still processing items" came after a run's last line.
    for service in ("EventsWorker", "APILogWorker"):
        logging.getLogger(service).setLevel(logging.ERROR)


def quiet_stopped_run() -> None:
    """When a run is stopped on request, Prefect reports each task cancelled on purpose as
    "Crash detected!" and the flow as an error; in quiet mode juryflow's own message says
    what happened and how to resume, so those lines are held back. --verbose keeps them."""
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() >= logging.WARNING:
            logger.setLevel(logging.CRITICAL)
