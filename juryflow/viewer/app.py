"""The viewer's Starlette app: routes of every page, templates, one shared state.

Pages raise :class:`starlette.exceptions.HTTPException` with a one-line ``detail`` for a bad
parameter (400) or an unknown run or item (404); the handlers here turn it, and the store's
own errors, into an ``error.html`` page: never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from juryflow.pages.templating import environment
from juryflow.storage.connection import StoreError, StoreLockedError
from juryflow.storage.reads.analysis import RunNotFound
from juryflow.storage.reads.run_queries import RunIdError
from juryflow.viewer.security import ViewerSecurity
from juryflow.viewer.state import ViewerState

# Resolved, so that an editable install (which links each file) finds files added since.
STATIC_DIR = Path(__file__).resolve().parent / "static"
RETRY_AFTER_SECONDS = 5


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


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_page(request, exc.status_code, str(exc.detail), dict(exc.headers or {}))


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_page(request, 404, str(exc.args[0] if exc.args else exc))


async def _busy(request: Request, exc: Exception) -> Response:
    return error_page(
        request,
        503,
        f"the store is busy: {exc}; reload this page in a moment",
        {"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _store_error(request: Request, exc: Exception) -> Response:
    return error_page(request, 500, str(exc))


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette still logs the traceback on the server's stderr; the page stays one line.
    return error_page(request, 500, f"internal error: {type(exc).__name__}: {exc}")


def create_app(state: ViewerState) -> Starlette:
    # Imported here: the page modules import render and state_of from this module.
    from juryflow.viewer import item_pages, run_pages

    routes: list[BaseRoute] = [
        *run_pages.routes(),
        *item_pages.routes(),
        Mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(ViewerSecurity, allowed_hosts=state.allowed_hosts)],
        exception_handlers={
            HTTPException: _http_error,
            RunNotFound: _not_found,
            RunIdError: _not_found,
            StoreLockedError: _busy,
            StoreError: _store_error,
            Exception: _unexpected,
        },
    )
    app.state.viewer = state
    return app
