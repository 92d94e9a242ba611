"""Model calls that skip the SDK's per-call request building, on the SDK's own connections.

Building a request through a Stainless SDK (options model, header merge, URL parsing, an
httpx request, the httpx-to-aiohttp adapter and back) costs about as much CPU as the HTTP
exchange itself, and for one judge it yields the same URL and headers on every call: the
SDKs send no per-request idempotency key, a zero retry count (ours retry) and the call's
timeout. So the SDK builds and sends the first request of each (path, timeout) itself; a
request hook on its HTTP client records what it built, and the later calls replay that
request with a new JSON body, through the same aiohttp session (same pool, same
connections). Errors still come out as the SDK's own exception classes, built by the SDK
from the answer, so the providers' translation and every reason stay as they were.

Only the SDKs' aiohttp transport is replayed; a client on httpx (no aiohttp, or a base_url
with user:password@) keeps the SDK's whole path. ``JURYFLOW_SDK_CALLS=1`` turns replay off.
``tests/test_lean_post.py`` checks, per provider, that the bytes on the wire are the SDK's.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import ssl
import sys
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import orjson

from juryflow.judges.providers.quota_headers import observe_response
from juryflow.judges.untrusted.loading import DocumentTooLarge, load_json


@functools.cache
def _aiohttp() -> ModuleType | None:
    """aiohttp, imported at the first call rather than with this module: it costs about
    0.2 s of CPU, which a panel's validation or an offline run would pay for nothing.
    None when the SDKs' [aiohttp] extra is absent: every call takes the SDK's path."""
    try:
        import aiohttp
    except ImportError:
        return None
    return aiohttp


def _module() -> Any:
    # Only the replay's own paths call this, and they run only when enabled() found it.
    aiohttp = _aiohttp()
    assert aiohttp is not None
    return aiohttp


MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Largest response body read from a model call, in bytes (as sent, compressed or not). An
answer over ``MAX_ANSWER_CHARS`` (200,000 characters, about 1.2 MB as escaped JSON at the
worst) is refused anyway; a body many times that is a broken or hostile server's, refused
before it is held whole or parsed."""

_TemplateKey = tuple[str, float]
"""(path, timeout): what makes two calls of one client send different URLs or headers."""


@dataclass(frozen=True, slots=True)
class RequestTemplate:
    """A request the SDK built and sent, to be sent again with another body."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    """Every header the SDK sent but Content-Length, which aiohttp sets for the new body."""
    timeout: Mapping[str, float | None]
    """httpx's timeout extension (connect, read, write, pool), read as the adapter does."""
    request: Any = None
    """The SDK's httpx request, which the SDK's exceptions carry."""


class _Slot:
    """Where the request hook leaves the request a recorded call made."""

    __slots__ = ("request",)

    def __init__(self) -> None:
        self.request: Any = None


_RECORDING: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "juryflow_lean_recording", default=None
)
_TEMPLATES: weakref.WeakKeyDictionary[Any, dict[_TemplateKey, RequestTemplate]] = (
    weakref.WeakKeyDictionary()
)


async def record_request(request: Any) -> None:
    """httpx request hook: hand the request over when the current call is being recorded."""
    slot = _RECORDING.get()
    if slot is not None:
        slot.request = request


def enabled() -> bool:
    return _aiohttp() is not None and os.environ.get("JURYFLOW_SDK_CALLS", "") in ("", "0")


def template(sdk: Any, path: str, timeout: float) -> RequestTemplate | None:
    """The request to replay for this call, or None: the SDK must send it (and is recorded)."""
    templates = _TEMPLATES.get(sdk)
    return templates.get((path, timeout)) if templates is not None else None


@contextlib.contextmanager
def recording(sdk: Any, path: str, timeout: float) -> Iterator[None]:
    """Record the request the SDK sends inside the block as the template of (path, timeout).

    Kept only when the SDK's answer came back over its aiohttp session (that is what the
    replay uses), whatever its status: the request the SDK built does not depend on it.
    """
    slot = _Slot()
    token = _RECORDING.set(slot)
    try:
        yield
    finally:
        _RECORDING.reset(token)
        if slot.request is not None and _session(sdk) is not None:
            _TEMPLATES.setdefault(sdk, {})[(path, timeout)] = _template_of(slot.request)


def _template_of(request: Any) -> RequestTemplate:
    return RequestTemplate(
        method=request.method,
        url=str(request.url),
        headers=tuple(
            (name, value)
            for name, value in request.headers.multi_items()
            if name.lower() != "content-length"
        ),
        timeout=dict(request.extensions.get("timeout", {})),
        request=request,
    )


def _session(sdk: Any) -> Any:
    """The aiohttp session under the SDK's HTTP client, once it has sent a request."""
    transport = getattr(getattr(sdk, "_client", None), "_transport", None)
    session = getattr(transport, "client", None)
    aiohttp = _aiohttp()
    if aiohttp is None or not isinstance(session, aiohttp.ClientSession) or session.closed:
        return None
    return session


def encode(body: Mapping[str, Any]) -> bytes:
    """A JSON body as the SDKs write it (their ``openapi_dumps`` on plain values).

    orjson writes the same bytes as ``json.dumps(ensure_ascii=False)`` for every string,
    dict, list, bool, None, 64-bit integer and float the two print alike, and writes a
    12,000-character prompt in a tenth of the time (25 against 2 µs a call, on the event
    loop); any other value (a float printed with a small exponent, ``inf``, a huge
    integer, a lone surrogate) goes through ``json`` as before.
    """
    if _alike_in_orjson(body):
        with contextlib.suppress(orjson.JSONEncodeError):
            return orjson.dumps(body)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


_INT64 = 2**63


def _alike_in_orjson(value: Any) -> bool:
    """Whether orjson prints ``value`` as ``json.dumps`` does (strings checked by orjson)."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    if isinstance(value, float):
        # json prints 1e-05 and inf where orjson prints 0.00001 and null.
        return value == 0.0 or (1e-4 <= abs(value) < 1e16)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _alike_in_orjson(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_alike_in_orjson(v) for v in value)
    return False


async def replay(sdk: Any, sdk_module: ModuleType, sent: RequestTemplate, body: bytes) -> Any:
    """Send ``body`` as ``sent`` was sent; the answer's JSON, or the SDK's exception for it.

    Raised as the SDK raises them: ``APIStatusError`` subclasses for 4xx/5xx (built by the
    SDK from the answer), ``APITimeoutError`` and ``APIConnectionError`` with the aiohttp
    error as their cause, ValueError for a 2xx whose body is not JSON.
    """
    session = _session(sdk)
    if session is None:  # the client was closed under us: the SDK says what that means
        raise sdk_module.APIConnectionError(request=sent.request)
    try:
        answer = await exchange(session, sent, body)
    except (_module().ClientError, OSError) as error:
        raise sdk_error(sdk, sdk_module, sent, error)  # noqa: B904 - its cause is set
    return read_answer(sdk, sent, answer)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    raw_headers: Any
    headers: Mapping[str, str]
    content: bytes


async def exchange(session: Any, sent: RequestTemplate, body: bytes) -> Answer:
    """One request on ``session`` as the SDKs' aiohttp transport sends it; aiohttp's errors
    are raised as they are (:func:`sdk_error` maps them as the transport does)."""
    timeout = sent.timeout
    async with session.request(
        sent.method,
        sent.url,
        headers=sent.headers,
        data=body,
        allow_redirects=False,
        auto_decompress=False,
        compress=False,
        timeout=_module().ClientTimeout(
            sock_connect=timeout.get("connect"),
            sock_read=timeout.get("read"),
            connect=timeout.get("pool"),
        ),
    ) as answer:
        content = await _bounded_read(answer.content, MAX_RESPONSE_BYTES)
        return Answer(answer.status, answer.raw_headers, answer.headers, content)


async def _bounded_read(stream: Any, limit: int) -> bytes:
    """The whole body, or DocumentTooLarge as soon as it passes ``limit`` bytes (what came
    so far is dropped, and the connection with it)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream.iter_any():
        size += len(chunk)
        if size > limit:
            raise DocumentTooLarge(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def response_json(content: bytes) -> Any:
    """A response body's JSON: NestingError past ``MAX_NESTING_DEPTH``, DocumentTooLarge past
    ``MAX_RESPONSE_BYTES``, JSONDecodeError when it is not JSON (all ValueErrors; see
    :func:`~juryflow.judges.providers.base.refused_body`)."""
    return load_json(content, max_size=MAX_RESPONSE_BYTES)


def sdk_request(sdk: Any, sent: RequestTemplate) -> Any:
    """The SDK's httpx request for ``sent`` (what its exceptions carry)."""
    if sent.request is not None:
        return sent.request
    http = _adapter(sdk).httpx
    return http.Request(
        sent.method, sent.url, headers=list(sent.headers), extensions={"timeout": sent.timeout}
    )


def _adapter(sdk: Any) -> ModuleType:
    # The SDK's own aiohttp adapter: its map of aiohttp's errors and the httpx it maps to.
    return sys.modules[type(sdk._client._transport).__module__]


def sdk_error(sdk: Any, sdk_module: ModuleType, sent: RequestTemplate, error: Exception) -> Any:
    """The SDK's exception for an aiohttp error of :func:`exchange`, caused as the SDK's
    transport causes it (the httpx error, whose cause is aiohttp's); ``error`` itself when
    the transport would not map it."""
    adapter = _adapter(sdk)
    http = adapter.httpx
    try:
        with adapter.map_aiohttp_exceptions():
            raise error
    except http.TimeoutException as mapped:
        return _caused(sdk_module.APITimeoutError(request=sdk_request(sdk, sent)), mapped)
    except (http.RequestError, ssl.SSLError) as mapped:
        return _caused(sdk_module.APIConnectionError(request=sdk_request(sdk, sent)), mapped)
    except Exception as unmapped:  # re-raised by the caller as it came
        return unmapped


def _caused(error: Exception, cause: BaseException) -> Exception:
    # What ``raise error from cause`` would set, for an error raised by the caller.
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


def read_answer(sdk: Any, sent: RequestTemplate, answer: Answer) -> Any:
    """The answer's JSON; the SDK's status error for a 4xx/5xx; a compressed body decoded
    as the SDK's httpx would have."""
    observe_response(answer.headers)
    content = answer.content
    if answer.status >= 400 or "content-encoding" in answer.headers:
        http = _adapter(sdk).httpx
        response = http.Response(
            status_code=answer.status,
            headers=answer.raw_headers,
            content=content,
            request=sdk_request(sdk, sent),
        )
        if answer.status >= 400:
            raise sdk._make_status_error_from_response(response)
        content = response.content
    return response_json(content)
