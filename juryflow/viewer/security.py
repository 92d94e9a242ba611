"""What keeps a web page elsewhere from using the viewer: same-origin writes, known hosts,
and headers that stop the browser from running or fetching anything the viewer did not send.

A pure ASGI middleware (not ``BaseHTTPMiddleware``), so that it wraps every response,
static files and error pages included, without buffering them.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from juryflow.pages.templating import environment

SAFE_METHODS = frozenset({"GET", "HEAD"})

# Inline styles: the pages carry their CSS in <style> (and SVG charts use style attributes);
# scripts only from the viewer's own /static/, never inline, never from anywhere else.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def host_name(host_header: str) -> str:
    """``Host`` without its port: ``127.0.0.1:8080`` → ``127.0.0.1``, ``[::1]:80`` → ``::1``."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def cross_origin_reason(scope: Scope) -> str | None:
    """Why a state-changing request does not come from the viewer's own pages, or None."""
    headers = Headers(scope=scope)
    own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}".lower()
    origin = headers.get("origin")
    referer = headers.get("referer")
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return "it came from another site"
    if origin is not None:
        return None if origin.lower() == own else f"it came from {origin!r}, not {own}"
    if referer is None:
        return "it names no Origin nor Referer"
    parts = urlsplit(referer)
    source = f"{parts.scheme}://{parts.netloc}".lower()
    return None if source == own else f"it came from a page of {source!r}, not {own}"


def _page(status: int, message: str) -> HTMLResponse:
    # error.html extends base.html, which reads nothing from the request
    body = environment().get_template("error.html").render(status=status, message=message)
    return HTMLResponse(body, status_code=status)


class ViewerSecurity:
    """Refuses writes from other origins (403) and requests for unknown hosts (421), and
    adds :data:`SECURITY_HEADERS` to every response."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] | None = None) -> None:
        self.app = app
        self.allowed_hosts = (
            None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers[name] = value
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope) -> HTMLResponse | None:
        if self.allowed_hosts is not None:
            host = host_name(Headers(scope=scope).get("host", "")).lower()
            if host not in self.allowed_hosts:
                return _page(
                    421,
                    f"this viewer answers only at {', '.join(sorted(self.allowed_hosts))}; "
                    "open it by that address (or start it with --host)",
                )
        if scope["method"] not in SAFE_METHODS:
            reason = cross_origin_reason(scope)
            if reason is not None:
                return _page(
                    403,
                    f"refused: a change to the store must come from the viewer's own pages, "
                    f"and {reason}",
                )
        return None
