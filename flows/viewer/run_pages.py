"""Pages about runs: the runs list, one run's agreement figures, a comparison of two runs."""

from __future__ import annotations

from starlette.routing import BaseRoute


def routes() -> list[BaseRoute]:
    return []
