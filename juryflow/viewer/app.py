"""The viewer's Starlette app: routes of every page, templates, one shared state.

Pages raise :class:`starlette.exceptions.HTTPException` with a one-line ``detail`` for a bad
parameter (400) or an unknown run or item (404); the handlers here turn it, and the store's
own errors, into an ``error.html`` page: never a traceback.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from juryflow.storage.connection import StoreError, StoreLockedError
from juryflow.storage.reads.analysis import RunNotFound
from juryflow.storage.reads.run_queries import RunIdError
from juryflow.viewer import item_pages, run_pages
from juryflow.viewer.rendering import error_page
from juryflow.viewer.security import ViewerSecurity
from juryflow.viewer.state import ViewerState

# Resolved, so that an editable install (which links each file) finds files added since.
STATIC_DIR = Path(__file__).resolve().parent / "static"
RETRY_AFTER_SECONDS = 5


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
