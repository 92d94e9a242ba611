"""The viewer's Starlette app: routes of every page, templates, one shared state."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute

from juryflow.viewer import item_pages, run_pages
from juryflow.viewer.state import ViewerState
from juryflow.viewer.templating import environment


def state_of(request: Request) -> ViewerState:
    state: ViewerState = request.app.state.viewer
    return state


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page rendered from ``template`` (which extends ``base.html``)."""
    page = environment().get_template(template).render(request=request, **context)
    return HTMLResponse(page, status_code=status_code)


def create_app(state: ViewerState) -> Starlette:
    routes: list[BaseRoute] = [*run_pages.routes(), *item_pages.routes()]
    app = Starlette(routes=routes)
    app.state.viewer = state
    return app
