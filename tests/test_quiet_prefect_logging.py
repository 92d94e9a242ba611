"""Prefect's event errors stay off a user's terminal: a run that failed to start printed its
one error line, then a flow-run heartbeat's traceback (the event could not be sent as the
process exited), because the logger Prefect had made on import kept its own level."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from juryflow.flows.runtime.prefect_env import quiet_prefect_logging


@pytest.fixture
def restored_levels() -> Iterator[None]:
    manager = logging.root.manager
    levels = {
        name: logger.level
        for name, logger in manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restored_levels")
def test_an_event_error_logged_by_a_logger_made_before_is_held_back() -> None:
    import prefect.events.utilities  # noqa: F401  (makes the logger, as any run does)

    emitter = logging.getLogger("prefect.events.utilities")
    emitter.setLevel(logging.NOTSET)
    quiet_prefect_logging()
    assert not emitter.isEnabledFor(logging.ERROR)
    # Prefect's own warnings about the run still show.
    assert logging.getLogger("prefect.flow_runs").isEnabledFor(logging.ERROR)
