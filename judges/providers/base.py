"""What every model provider speaks: one request in, one response out, and our own errors.

Each provider module translates its SDK's exceptions into :class:`ProviderError` at the
boundary, so retries, rate limits and the judge never import an SDK.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from juryflow.judges.providers import lean_post
from juryflow.judges.providers.quota_headers import observe_response
from juryflow.judges.redact import (
    header_secrets,
    protect_logs,
    redact_text,
    remember_secret,
    url_secrets,
)
from juryflow.judges.untrusted.loading import DocumentTooLarge, NestingError
from juryflow.maths.records import OutputKind

ErrorKind = Literal["rate_limit", "server", "timeout", "connection", "client", "auth", "not_found"]

PLACEHOLDER_KEY = "not-needed"
"""Sent to servers whose SDK wants a key when the panel names none for a custom base_url."""

TOOL_NAME = "submit_judgment"
"""The one tool / JSON schema name a structured judge answers through."""

REASONING_STEPS = (
    "content_analysis",
    "reference_comparison",
    "hallucination_identification",
    "span_extraction",
    "final_verdict",
)


@dataclass(frozen=True, slots=True)
class ModelRequest:
    prompt: str
    """The per-item part of the prompt (all of it when ``static_prompt`` is empty)."""
    output_kind: OutputKind
    model: str
    temperature: float
    max_tokens: int
    timeout: float
    structured: bool
    static_prompt: str = ""
    """The part of the prompt that is the same for every item, sent before ``prompt`` and
    marked for the provider's prompt cache; empty for a template with no split."""
    prompt_cache_key: str | None = None
    """A stable key per judge and template, sent as OpenAI's ``prompt_cache_key`` so that
    requests sharing the static part reach the machines that cached it."""

    @property
    def full_prompt(self) -> str:
        """Everything the model reads, in order."""
        return self.static_prompt + self.prompt


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str
    """The raw text the model wrote (empty when it only called the tool)."""
    structured: dict[str, Any] | None = None
    """Tool-call / JSON-schema arguments, when the model answered through them."""
    input_tokens: int | None = None
    """Every prompt token, those written to or read from the prompt cache included."""
    output_tokens: int | None = None
    cache_write_tokens: int | None = None
    """Of ``input_tokens``, those written to the prompt cache (None: not reported)."""
    cache_read_tokens: int | None = None
    """Of ``input_tokens``, those served from the prompt cache (None: not reported)."""
    usage_error: str | None = None
    """Why the server's usage report cannot be believed (a count below 0 or past
    MAX_USAGE_TOKENS, cached tokens more than the prompt's), its counts then all None; a
    client raises it as a provider error (:func:`checked_usage`), a batch's answer is
    unscored with it: no judgment is priced from such a report."""


MAX_USAGE_TOKENS = 100_000_000
"""Largest token count one call's usage report may give. The longest contexts are a few
million tokens; a count past this one, like a negative count, is a broken or hostile
server's (one answering ``prompt_tokens: -1000000`` made a run's cost negative)."""


def usage_problem(
    counts: Mapping[str, int | None], parts: Mapping[str, str] | None = None
) -> str | None:
    """Why a usage report's ``counts`` (the server's field names, None for a count it did
    not give) are out of range, or None when they are not; ``parts`` maps a count to the one
    it is part of (OpenAI's cached_tokens of prompt_tokens), which it may not exceed."""
    for name, value in counts.items():
        if value is not None and not 0 <= value <= MAX_USAGE_TOKENS:
            return (
                f"bad usage from the server: {name} = {value:,}, not a token count "
                f"(0 to {MAX_USAGE_TOKENS:,})"
            )
    for part, whole in (parts or {}).items():
        part_count, whole_count = counts.get(part), counts.get(whole)
        if part_count is not None and whole_count is not None and part_count > whole_count:
            return (
                f"bad usage from the server: {part} = {part_count:,} is more than "
                f"{whole} = {whole_count:,}"
            )
    return None


def checked_usage(response: ModelResponse) -> ModelResponse:
    """``response``, or the provider error of its bad usage report: the same server would
    report it again, so it is not retried."""
    if response.usage_error is not None:
        raise ProviderError(response.usage_error, retryable=False, kind="server")
    return response


class ProviderError(Exception):
    """A failed model call, already classified so retry logic needs no SDK knowledge."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        kind: ErrorKind,
    ) -> None:
        # Error bodies echo keys and headers, and messages end up in stored judgments.
        message = redact_text(message)
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.kind: ErrorKind = kind

    @property
    def fatal(self) -> bool:
        """Whether no call of this judge can succeed: a rejected key or an unknown model.

        Such an answer does not depend on the item, so the judge is stopped (see
        :mod:`juryflow.judges.breaker`) rather than called again for every remaining item.
        """
        return self.kind in ("auth", "not_found")

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.kind}{status}: {self.message}"


class MissingKeyError(RuntimeError):
    """A judge needs an API key that is not available; the message names where to put it."""

    def __init__(self, judge_id: str, variable: str, secret: str | None = None) -> None:
        where = f"set {variable}"
        if secret:
            where += f" or create the Prefect Secret block {secret!r}"
        super().__init__(
            f"judge {judge_id!r} needs an API key: {where} (or api_key_env in the panel file)"
        )
        self.judge_id = judge_id
        self.variable = variable


@runtime_checkable
class ModelClient(Protocol):
    provider: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def should_retry(self, error: ProviderError) -> bool: ...

    async def aclose(self) -> None:
        """Close the HTTP connections opened from the running event loop."""


def output_schema(kind: OutputKind) -> dict[str, Any]:
    """JSON schema of the answer the seed prompts ask for, usable as a tool or response format.

    Written in the strict subset (every property required, no extra properties) so OpenAI's
    ``strict: true`` json_schema mode accepts it unchanged.
    """
    if kind == "score":
        return {
            "type": "object",
            "properties": {
                "score": {
                    "type": "number",
                    "description": "0.0 = fully grounded, 1.0 = mostly fabricated",
                },
                "reasoning": {"type": "string"},
            },
            "required": ["score", "reasoning"],
            "additionalProperties": False,
        }
    if kind == "preference":
        return {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "verdict": {
                    "type": "string",
                    "enum": ["A", "B", "tie"],
                    "description": "the better answer as shown, or tie",
                },
            },
            "required": ["reasoning", "verdict"],
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": {
            "reasoning": {
                "type": "object",
                "properties": {step: {"type": "string"} for step in REASONING_STEPS},
                "required": list(REASONING_STEPS),
                "additionalProperties": False,
            },
            "hallucination_list": {
                "type": "array",
                "items": {"type": "string"},
                "description": "exact substrings of the generated article",
            },
        },
        "required": ["reasoning", "hallucination_list"],
        "additionalProperties": False,
    }


def error_from_status(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> ProviderError:
    """The ProviderError an HTTP error status means, common to the Stainless-built SDKs."""
    headers = headers or {}
    if status == 429:
        retry_after = retry_after_from_headers(headers)
        return ProviderError(
            message, retryable=True, status=status, retry_after=retry_after, kind="rate_limit"
        )
    if status in (401, 403):
        return ProviderError(message, retryable=False, status=status, kind="auth")
    if status == 404:
        # The model name (or, less often, the base_url's path) is unknown to the server.
        return ProviderError(message, retryable=False, status=status, kind="not_found")
    if status == 408:
        return ProviderError(message, retryable=True, status=status, kind="timeout")
    if status >= 500:
        return ProviderError(
            message,
            retryable=True,
            status=status,
            retry_after=retry_after_from_headers(headers),
            kind="server",
        )
    return ProviderError(message, retryable=False, status=status, kind="client")


def refused_body(error: NestingError | DocumentTooLarge) -> ProviderError:
    """The provider error of a 2xx body juryflow will not parse (too deep, too large): the
    same body would come back, so it is not retried."""
    return ProviderError(f"the response body is {error}", retryable=False, kind="server")


def retry_after_from_headers(headers: Mapping[str, str]) -> float | None:
    # retry-after-ms is what Anthropic and OpenAI send for sub-second waits; prefer it.
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if unusable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds)


def client_secrets(
    api_key: str | None, base_url: str | None, headers: Mapping[str, str] | None
) -> tuple[str, ...]:
    """What a client sends that must never come back in a message, remembered process-wide.

    Remembered so that any later record of this process (a retry's summary, a log line, a
    run's error) is cleaned of them too, not only this client's own messages; the SDK's
    HTTP loggers, which print request URLs at DEBUG, get a redacting filter.
    """
    protect_logs()
    key = api_key if api_key != PLACEHOLDER_KEY else None
    secrets = (key or "", *header_secrets(headers), *url_secrets(base_url))
    remember_secret(*secrets)
    return tuple(s for s in secrets if s)


class _Closeable(Protocol):
    def close(self) -> Awaitable[None]: ...


SDK = TypeVar("SDK", bound=_Closeable)

DEFAULT_CONNECTIONS = 8
"""Pool size of an endpoint no judge has sized (a client used on its own): the panel default."""

_SDK_LOCK = threading.Lock()
# Connections each endpoint needs: per limiter key, that limiter's max_concurrency. Summed,
# since every limiter on the endpoint may fill its permits at once.
_DEMAND: dict[Hashable, dict[str, int]] = {}


def size_pool(endpoint: Hashable, limiter_key: str, connections: int) -> None:
    """Record that calls to ``endpoint`` under ``limiter_key`` may hold ``connections`` at once."""
    with _SDK_LOCK:
        _DEMAND.setdefault(endpoint, {})[limiter_key] = connections


def pool_size(endpoint: Hashable) -> int:
    with _SDK_LOCK:
        demand = _DEMAND.get(endpoint)
        return sum(demand.values()) if demand else DEFAULT_CONNECTIONS


class SharedSDKs(Generic[SDK]):
    """One SDK client per endpoint and event loop, shared by every judge calling it.

    An SDK's connection pool belongs to the event loop it first ran on (an aiohttp session
    outright refuses another), and a judge may be called from several loops (Prefect worker
    threads, Dask workers): each loop gets its own client, built on first use, kept for the
    whole run and closed with :meth:`aclose` from that loop. The pool is sized to what the
    endpoint's limiters allow in flight; a judge that raises that after its client was built
    gets a bigger one, the old one being closed with the rest.
    """

    def __init__(self) -> None:
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, tuple[SDK, int]]
        ] = weakref.WeakKeyDictionary()
        self._retired: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[SDK]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, endpoint: Hashable, make: Callable[[int], SDK]) -> SDK:
        loop = asyncio.get_running_loop()
        clients = self._clients.get(loop)
        entry = clients.get(endpoint) if clients is not None else None
        connections = pool_size(endpoint)
        if entry is not None and entry[1] >= connections:
            return entry[0]
        # Only this loop's thread builds this loop's clients: no lock needed past here.
        client = make(connections)
        self._clients.setdefault(loop, {})[endpoint] = (client, connections)
        if entry is not None:
            self._retired.setdefault(loop, []).append(entry[0])
        return client

    def current(self, endpoint: Hashable) -> SDK | None:
        """This loop's client of ``endpoint``, if one was built (for inspection)."""
        entry = self._clients.get(asyncio.get_running_loop(), {}).get(endpoint)
        return entry[0] if entry is not None else None

    async def aclose(self, endpoint: Hashable) -> None:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop, {}).pop(endpoint, None)
        retired = self._retired.pop(loop, [])
        for client in (*retired, *([entry[0]] if entry is not None else [])):
            await client.close()


@functools.cache
def http_library(module: ModuleType) -> ModuleType:
    """The HTTP library an SDK is built on: httpx, or httpx2 in the SDKs' recent releases.

    Read from the SDK itself, since both may be installed and only its own one's types
    (limits, the raw response type) mean anything to it.
    """
    return sys.modules[type(module.DEFAULT_CONNECTION_LIMITS).__module__.split(".")[0]]


def split_query(base_url: str | None) -> tuple[str | None, dict[str, str]]:
    """``base_url`` without its query, and the query's parameters.

    The SDKs append their paths to the base URL as text, so ``https://h/v1?api-version=1``
    became ``https://h/v1?api-version=1/chat/completions``; the parameters go to every
    request as the SDK's ``default_query`` instead (Azure's api-version, a proxy's key).
    """
    if not base_url:
        return base_url, {}
    parts = urlsplit(base_url)
    if not parts.query:
        return base_url, {}
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query="", fragment="")), query


def http_client(module: ModuleType, connections: int, base_url: str | None) -> Any:
    """The SDK's own async HTTP client on its fastest transport, pooled to ``connections``.

    aiohttp (the SDKs' ``[aiohttp]`` extra) costs about half the CPU per call of the default
    httpx transport; without it installed, the SDK's httpx client is used. Both set
    TCP_NODELAY (asyncio does it for every TCP transport). Either way every response, an
    error's too, passes its rate-limit headers to the limiter that admitted the call.
    """
    limits = http_library(module).Limits(
        max_connections=connections, max_keepalive_connections=connections
    )
    hooks = {"request": [lean_post.record_request], "response": [_observe_quota]}
    if _has_userinfo(base_url):
        # user:password@ in base_url: httpx turns it into a Basic header, which the aiohttp
        # transport then passes along with the URL, and aiohttp refuses to send both.
        return module.DefaultAsyncHttpxClient(limits=limits, event_hooks=hooks)
    aiohttp_client = getattr(module, "DefaultAioHttpClient", None)  # absent in older SDKs
    if aiohttp_client is not None:
        try:
            return aiohttp_client(limits=limits, event_hooks=hooks)
        except RuntimeError:  # the SDK says the aiohttp extra is not installed
            pass
    return module.DefaultAsyncHttpxClient(limits=limits, event_hooks=hooks)


async def _observe_quota(response: Any) -> None:
    # Headers only: the SDK reads the body, and a hook that raised would fail the call.
    observe_response(response.headers)


def _has_userinfo(url: str | None) -> bool:
    try:
        parts = urlsplit(url or "")
        return parts.username is not None or parts.password is not None
    except ValueError:
        return False


def transport_of(sdk: Any) -> str:
    """Which transport an SDK client built by :func:`http_client` sends through."""
    transport = getattr(getattr(sdk, "_client", None), "_transport", None)
    return "aiohttp" if type(transport).__name__ == "AiohttpTransport" else "httpx"


class SDKClient(Generic[SDK]):
    """What the Anthropic and OpenAI clients share: their endpoint, the secrets they send,
    and one SDK client per endpoint and event loop (:class:`SharedSDKs`) on the SDK's own
    HTTP client (:func:`http_client`). A subclass names its SDK module, its registry of
    shared clients and how to build the SDK client.

    The SDK is imported when a client is first built, not with this module: importing
    ``anthropic`` takes about a second of CPU and ``openai`` a third, which every run paid
    before its first call, and a run that judges through one provider never needs the
    other."""

    provider: str
    sdk_name: str
    """The SDK's module name, imported on first use (:attr:`sdk_module`)."""
    call_path: str
    """Where a judgment's request goes (``base_url`` + this)."""
    shared: SharedSDKs[SDK]

    @functools.cached_property
    def sdk_module(self) -> ModuleType:
        # Looked up once per client: every call passes it on to the replay.
        return importlib.import_module(self.sdk_name)

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._sdk_base_url, self._default_query = split_query(base_url)
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._secrets = client_secrets(api_key, base_url, self._headers)
        # Judges with the same key, server and headers share one client (and pool) per loop;
        # the timeout is not part of it: every call sends its own.
        self.endpoint = (self.provider, api_key, base_url, tuple(sorted(self._headers.items())))

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(base_url={self._base_url!r})"

    def _new_sdk(self, http: Any) -> SDK:
        raise NotImplementedError

    def _sdk(self) -> SDK:
        return self.shared.get(
            self.endpoint,
            lambda connections: self._new_sdk(
                http_client(self.sdk_module, connections, self._base_url)
            ),
        )

    async def _post_json(self, path: str, body: dict[str, Any], timeout: float) -> Any:
        """POST ``body`` to ``path``; the answer's JSON, or the SDK's own exception.

        The SDK's generic POST builds and sends the first call of each (path, timeout); the
        rest replay its request with their own body (:mod:`~juryflow.judges.providers.
        lean_post`), the same bytes on the wire for a fraction of the CPU.
        """
        if not lean_post.enabled():
            response = await self._sdk_post(self._sdk(), path, body, timeout)
            return lean_post.response_json(response.content)
        sdk = self._sdk()
        sent = lean_post.template(sdk, path, timeout)
        if sent is not None:
            return await lean_post.replay(sdk, self.sdk_module, sent, lean_post.encode(body))
        with lean_post.recording(sdk, path, timeout):
            response = await self._sdk_post(sdk, path, body, timeout)
        return lean_post.response_json(response.content)

    async def _sdk_post(self, sdk: Any, path: str, body: dict[str, Any], timeout: float) -> Any:
        # The SDK's generic POST: its auth, headers, timeouts and typed errors, but the body
        # read once as JSON instead of also built into a typed response per call.
        return await sdk.post(
            path,
            body=body,
            cast_to=http_library(self.sdk_module).Response,
            options={"timeout": timeout},
        )

    def warm(self, timeout: float | None = None) -> None:
        """Build this loop's SDK client (its connection pool, its TLS context) before the
        first call: the first call goes alone under header pacing and the others wait for
        its answer, so its set-up would be waited for by every call of the judge."""
        self._sdk()

    def size_pool(self, limiter_key: str, connections: int) -> None:
        size_pool(self.endpoint, limiter_key, connections)

    def transport(self) -> str | None:
        """The transport of this loop's client ("aiohttp" or "httpx"), None before any call."""
        sdk = self.shared.current(self.endpoint)
        return transport_of(sdk) if sdk is not None else None

    async def aclose(self) -> None:
        await self.shared.aclose(self.endpoint)


def dropped_connection(error: BaseException) -> bool:
    """Whether an SDK "timeout" was really the server closing the connection.

    The SDKs' aiohttp transport maps every aiohttp connection error, a dropped connection
    included, to a connect timeout; the cause it keeps says which it was, so that the stored
    reason stays "connection" as with httpx.
    """
    try:
        import aiohttp
    except ImportError:
        return False
    seen: BaseException | None = error
    for _ in range(6):  # SDK error <- httpx(2) error <- aiohttp error
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            return False
        if isinstance(seen, aiohttp.ServerTimeoutError):
            return False
        if isinstance(seen, aiohttp.ClientConnectionError):
            return True
    return False
