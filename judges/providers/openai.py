"""OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp, LM Studio) via Chat Completions.

Official SDK with its retries off (ours do it). ``base_url`` points it at any compatible
server; such servers that reject ``response_format`` are used with
``structured_output: false`` in the panel file.
"""

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
from juryflow.judges.untrusted.loading import DocumentTooLarge, NestingError, load_json
from juryflow.maths.records import OutputKind

if TYPE_CHECKING:  # imported when the first client is built (SDKClient says why)
    import openai


def _price(input: float, output: float, *, cached: float) -> Price:
    # A cache write costs the input price, a read the model's cached-input price.
    return Price(input=input, output=output, cache_write=input, cache_read=cached)


PRICES: dict[str, Price] = {
    # Public list prices, USD per million tokens (late 2025); batches at half.
    "gpt-5": _price(1.25, 10.0, cached=0.125),
    "gpt-5-mini": _price(0.25, 2.0, cached=0.025),
    "gpt-5-nano": _price(0.05, 0.4, cached=0.005),
    "gpt-4.1": _price(2.0, 8.0, cached=0.5),
    "gpt-4.1-mini": _price(0.4, 1.6, cached=0.1),
    "gpt-4.1-nano": _price(0.1, 0.4, cached=0.025),
    "gpt-4o": _price(2.5, 10.0, cached=1.25),
    "gpt-4o-mini": _price(0.15, 0.6, cached=0.075),
    "o3": _price(2.0, 8.0, cached=0.5),
    "o3-mini": _price(1.1, 4.4, cached=0.55),
    "o4-mini": _price(1.1, 4.4, cached=0.275),
}

CACHE_MIN_TOKENS = 1024
CACHE_INCREMENT = 128
"""OpenAI caches the longest prefix it has seen from 1,024 tokens on, in steps of 128."""


def cached_prefix(model: str, base_url: str | None, prefix_tokens: int) -> int | None:
    """The longest prefix OpenAI's automatic cache keeps; None on another server (an
    OpenAI-compatible server's cache, if any, has no price of its own)."""
    if base_url is not None:
        return None
    if prefix_tokens < CACHE_MIN_TOKENS:
        return 0
    return (
        CACHE_MIN_TOKENS + (prefix_tokens - CACHE_MIN_TOKENS) // CACHE_INCREMENT * CACHE_INCREMENT
    )


_NO_TEMPERATURE_PREFIXES = ("o1", "o3", "o4")
"""Reasoning models that reject any ``temperature``."""


@functools.cache
def _response_format(kind: OutputKind) -> dict[str, Any]:
    # Built once per output kind, not per call; the SDK only reads it.
    return {
        "type": "json_schema",
        "json_schema": {"name": TOOL_NAME, "schema": output_schema(kind), "strict": True},
    }


@register_provider(
    "openai",
    key_env="OPENAI_API_KEY",
    default_host="api.openai.com",
    prices=PRICES,
    cached_prefix=cached_prefix,
)
class OpenAIClient(SDKClient["openai.AsyncOpenAI"]):
    """A :class:`~juryflow.judges.providers.base.ModelClient` for Chat Completions."""

    sdk_name = "openai"
    call_path = "/chat/completions"
    shared: SharedSDKs[openai.AsyncOpenAI] = SharedSDKs()

    def _new_sdk(self, http: Any) -> openai.AsyncOpenAI:
        import openai

        return openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._sdk_base_url,
            default_query=self._default_query or None,
            timeout=self._timeout,
            max_retries=0,
            default_headers=self._headers or None,
            http_client=http,
        )

    def _parameters(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            # The static part first: OpenAI caches the longest prefix it has seen (from
            # 1,024 tokens) by itself, and compatible servers with prefix caching (vLLM)
            # reuse it too. One string, which every compatible server reads.
            "messages": [{"role": "user", "content": request.full_prompt}],
        }
        if not request.model.startswith(_NO_TEMPERATURE_PREFIXES):
            body["temperature"] = request.temperature
        # OpenAI deprecated max_tokens (its reasoning models reject it), while most
        # compatible servers only know max_tokens.
        if self._base_url is None:
            body["max_completion_tokens"] = request.max_tokens
            # Routes the calls sharing a prefix to the machines holding it. OpenAI's own;
            # a compatible server may refuse a parameter it does not know.
            if request.prompt_cache_key:
                body["prompt_cache_key"] = request.prompt_cache_key
        else:
            body["max_tokens"] = request.max_tokens
        if request.structured:
            body["response_format"] = _response_format(request.output_kind)
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            completion = await self._post_json(
                self.call_path, self._parameters(request), request.timeout
            )
        except self.sdk_module.APIError as error:
            raise self._translate(error) from None
        except (NestingError, DocumentTooLarge) as error:
            raise refused_body(error) from None
        except ValueError as error:  # a 2xx whose body is not JSON: a misbehaving server
            raise ProviderError(
                f"unreadable response body: {error}", retryable=True, kind="server"
            ) from None
        return checked_usage(_response(completion, request.structured))

    def should_retry(self, error: ProviderError) -> bool:
        return error.retryable

    def _translate(self, error: openai.APIError) -> ProviderError:
        import openai

        message = redact_text(error.message or type(error).__name__, self._secrets)
        if isinstance(error, openai.APITimeoutError) and dropped_connection(error):
            # What the SDK says of a dropped connection over httpx, so reasons stay the same.
            return ProviderError("Connection error.", retryable=True, kind="connection")
        if isinstance(error, openai.APITimeoutError):
            return ProviderError(message, retryable=True, kind="timeout")
        if isinstance(error, openai.APIConnectionError):
            return ProviderError(message, retryable=True, kind="connection")
        if isinstance(error, openai.APIStatusError):
            translated = error_from_status(error.status_code, message, dict(error.response.headers))
            if error.code == "insufficient_quota":
                # A 429 that no amount of waiting fixes: the account is out of credit.
                translated.retryable = False
            return translated
        return ProviderError(message, retryable=True, kind="server")


def _response(completion: Any, structured_request: bool) -> ModelResponse:
    completion = completion if isinstance(completion, dict) else {}
    text = ""
    structured: dict[str, Any] | None = None
    choices = completion.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        message = message if isinstance(message, dict) else {}
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = str(text)
        # Some compatible servers answer a schema request with a tool call instead.
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and function.get("name") == TOOL_NAME:
                arguments = function.get("arguments")
                arguments = arguments if isinstance(arguments, str) else ""
                structured = _json_object(arguments)
                if structured is None:
                    text = text or arguments
                break
        if structured is None and structured_request:
            structured = _json_object(text)
    usage = completion.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    counts = {
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "cached_tokens": _count(details.get("cached_tokens")),
    }
    # prompt_tokens counts the cached tokens too: never fewer than them.
    problem = usage_problem(counts, {"cached_tokens": "prompt_tokens"})
    if problem is not None:
        return ModelResponse(text=text, structured=structured, usage_error=problem)
    return ModelResponse(
        text=text,
        structured=structured,
        # Writes to the cache are not reported (nor charged extra).
        input_tokens=counts["prompt_tokens"],
        output_tokens=counts["completion_tokens"],
        cache_read_tokens=counts["cached_tokens"],
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None (the parser then reports why the text is unusable,
    nesting too deep included)."""
    try:
        value = load_json(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
