"""Pages about items: a run's items (paged, sorted, filtered, searched) and one item, with
its adjudication form."""

from __future__ import annotations

from starlette.routing import BaseRoute


def routes() -> list[BaseRoute]:
    return []
