"""Claude through the Anthropic Messages API (official SDK, SDK retries off: ours do it)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from juryflow.judges.providers.base import (
    TOOL_NAME,
    ModelRequest,
    ModelResponse,
    ProviderError,
    SDKClient,
    SharedSDKs,
    checked_usage,
    dropped_connection,
    error_from_status,
    output_schema,
    refused_body,
    usage_problem,
)
from juryflow.judges.providers.price import Price
from juryflow.judges.providers.registry import register_provider
from juryflow.judges.redact import redact_text
from juryflow.judges.untrusted.loading import DocumentTooLarge, NestingError
from juryflow.maths.records import OutputKind

if TYPE_CHECKING:  # imported when the first client is built (SDKClient says why)
    import anthropic

PRICES: dict[str, Price] = {
    # Public list prices, USD per million tokens (late 2025); cache writes and reads at the
    # Price defaults (1.25x and 0.1x input), batches at half.
    "claude-opus-4-5": Price(input=5.0, output=25.0),
    "claude-opus-4-1": Price(input=15.0, output=75.0),
    "claude-opus-4": Price(input=15.0, output=75.0),
    "claude-sonnet-4-5": Price(input=3.0, output=15.0),
    "claude-sonnet-4": Price(input=3.0, output=15.0),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, output=4.0),
}

CACHE_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
"""The shortest prefix the prompt cache keeps, by model as documented (the rest 1,024);
a shorter one is billed at the input price, silently."""
CACHE_DEFAULT_MIN = 1024


def cache_minimum(model: str) -> int:
    """The shortest prefix Anthropic caches for ``model``."""
    return next((n for name, n in CACHE_MIN_TOKENS if model.startswith(name)), CACHE_DEFAULT_MIN)


def cached_prefix(model: str, base_url: str | None, prefix_tokens: int) -> int | None:
    """juryflow marks the whole static part with ``cache_control``: all of it is cached,
    or none when it is under the model's minimum."""
    return prefix_tokens if prefix_tokens >= cache_minimum(model) else 0


@functools.cache
def _tool_parameters(kind: OutputKind) -> dict[str, Any]:
    # Built once per output kind, not per call; the SDK only reads it.
    return {
        "tools": [
            {
                "name": TOOL_NAME,
                "description": "Submit the hallucination judgment.",
                "input_schema": output_schema(kind),
            }
        ],
        "tool_choice": {"type": "tool", "name": TOOL_NAME},
    }


@register_provider(
    "anthropic",
    key_env="ANTHROPIC_API_KEY",
    default_host="api.anthropic.com",
    prices=PRICES,
    family="anthropic",
    cached_prefix=cached_prefix,
    cache_mechanism="cache_control",
    # The API version the SDK sends rejects every sampling parameter (see _parameters).
    takes_temperature=False,
)
class AnthropicClient(SDKClient["anthropic.AsyncAnthropic"]):
    """A :class:`~juryflow.judges.providers.base.ModelClient` for the Messages API."""

    sdk_name = "anthropic"
    call_path = "/v1/messages"
    shared: SharedSDKs[anthropic.AsyncAnthropic] = SharedSDKs()

    def _new_sdk(self, http: Any) -> anthropic.AsyncAnthropic:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self._sdk_base_url,
            default_query=self._default_query or None,
            timeout=self._timeout,
            max_retries=0,
            default_headers=self._headers or None,
            http_client=http,
        )

    def _parameters(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API body for ``request``: sent as is, or as one request of a batch."""
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            # No temperature: the API version this SDK sends (2026-10-21) rejects every
            # sampling parameter with a 400, and the SDK no longer accepts them.
            "messages": [{"role": "user", "content": _content(request)}],
        }
        if request.structured:
            body.update(_tool_parameters(request.output_kind))
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = self._parameters(request)
        try:
            message = await self._post_json(self.call_path, body, request.timeout)
        except self.sdk_module.APIError as error:
            raise self._translate(error) from None
        except (NestingError, DocumentTooLarge) as error:
            raise refused_body(error) from None
        except ValueError as error:  # a 2xx whose body is not JSON: a misbehaving server
            raise ProviderError(
                f"unreadable response body: {error}", retryable=True, kind="server"
            ) from None
        return checked_usage(_response(message))

    def should_retry(self, error: ProviderError) -> bool:
        # 529 "overloaded" arrives as a 5xx and is retryable like any server error; an
        # explicit 413 (request too large) or 400 will fail identically every time.
        return error.retryable

    def _translate(self, error: anthropic.APIError) -> ProviderError:
        import anthropic

        message = redact_text(_message(error), self._secrets)
        if isinstance(error, anthropic.APITimeoutError) and dropped_connection(error):
            # What the SDK says of a dropped connection over httpx, so reasons stay the same.
            return ProviderError("Connection error.", retryable=True, kind="connection")
        if isinstance(error, anthropic.APITimeoutError):
            return ProviderError(message or "request timed out", retryable=True, kind="timeout")
        if isinstance(error, anthropic.APIConnectionError):
            return ProviderError(message or "connection failed", retryable=True, kind="connection")
        if isinstance(error, anthropic.APIStatusError):
            return error_from_status(error.status_code, message, dict(error.response.headers))
        # A 2xx body the SDK could not read: a misbehaving server or proxy, worth a retry.
        return ProviderError(message or type(error).__name__, retryable=True, kind="server")


_CACHED = {"type": "ephemeral"}
"""The default 5-minute cache: written at 1.25x the input price, read at 0.1x."""


def _content(request: ModelRequest) -> str | list[dict[str, Any]]:
    """The user turn: the static part first, as its own block with the cache breakpoint
    (tools, then that block, are the cached prefix), then the item's part; one string when
    the template has no static part, as before."""
    if not request.static_prompt:
        return request.prompt
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": request.static_prompt, "cache_control": _CACHED}
    ]
    if request.prompt:  # the API refuses an empty text block
        blocks.append({"type": "text", "text": request.prompt})
    return blocks


def _response(message: Any) -> ModelResponse:
    texts: list[str] = []
    structured: dict[str, Any] | None = None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use" and block.get("name") == TOOL_NAME and structured is None:
            answer = block.get("input")
            structured = dict(answer) if isinstance(answer, dict) else None
    usage = message.get("usage") if isinstance(message, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    counts = {name: _count(usage.get(name)) for name in _USAGE_COUNTS}
    problem = usage_problem(counts)
    if problem is not None:
        return ModelResponse(text="".join(texts), structured=structured, usage_error=problem)
    # Anthropic's input_tokens are those after the last cache breakpoint only; the cache's
    # writes and reads are counted apart. Ours count every prompt token, as OpenAI's do.
    uncached = counts["input_tokens"]
    written = counts["cache_creation_input_tokens"]
    read = counts["cache_read_input_tokens"]
    return ModelResponse(
        text="".join(texts),
        structured=structured,
        input_tokens=None if uncached is None else uncached + (written or 0) + (read or 0),
        output_tokens=counts["output_tokens"],
        cache_write_tokens=written,
        cache_read_tokens=read,
    )


_USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
"""The counts of a Messages usage report juryflow reads: each apart from the others."""


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _message(error: anthropic.APIError) -> str:
    api_message = getattr(error, "api_message", None)
    return str(api_message or error.message or type(error).__name__)
