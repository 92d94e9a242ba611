"""How a viewer page answers: rendered from a template, or the one-line error page; and the
viewer's state as a request sees it. Used by the app and by every page module."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from juryflow.pages.templating import environment
from juryflow.viewer.state import ViewerState


def state_of(request: Request) -> ViewerState:
    state: ViewerState = request.app.state.viewer
    return state


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page rendered from ``template`` (which extends ``base.html``)."""
    page = environment().get_template(template).render(request=request, **context)
    return HTMLResponse(page, status_code=status_code)


def error_page(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    """The one-line page of a request that cannot be answered."""
    response = render(request, "error.html", status, status=status, message=_one_line(message))
    if headers:
        response.headers.update(headers)
    return response


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "error"
