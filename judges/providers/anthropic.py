"""Claude through the Anthropic Messages API (official SDK, SDK retries off: ours do it)."""

from __future__ import annotations

from typing import Any

import anthropic

from juryflow.judges.providers.base import (
    TOOL_NAME,
    ModelRequest,
    ModelResponse,
    ProviderError,
    SDKPerLoop,
    client_secrets,
    error_from_status,
    output_schema,
)
from juryflow.judges.redact import redact_text


class AnthropicClient:
    """A :class:`~juryflow.judges.providers.base.ModelClient` for the Messages API."""

    provider = "anthropic"

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
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._secrets = client_secrets(api_key, base_url, self._headers)
        self._sdks = SDKPerLoop(
            lambda: anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout,
                max_retries=0,
                default_headers=self._headers or None,
            )
        )

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicClient(base_url={self._base_url!r})"

    def _sdk(self) -> anthropic.AsyncAnthropic:
        return self._sdks.get()

    async def aclose(self) -> None:
        await self._sdks.aclose()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            # No temperature: the API version this SDK sends (2026-10-21) rejects every
            # sampling parameter with a 400, and the SDK no longer accepts them.
            "messages": [{"role": "user", "content": request.prompt}],
            "timeout": request.timeout,
        }
        if request.structured:
            kwargs["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": "Submit the hallucination judgment.",
                    "input_schema": output_schema(request.output_kind),
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        try:
            message = await self._sdk().messages.create(**kwargs)
        except anthropic.APIError as error:
            raise self._translate(error) from None

        texts: list[str] = []
        structured: dict[str, Any] | None = None
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use" and block.name == TOOL_NAME and structured is None:
                structured = dict(block.input) if isinstance(block.input, dict) else None
        usage = message.usage
        return ModelResponse(
            text="".join(texts),
            structured=structured,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
        )

    def should_retry(self, error: ProviderError) -> bool:
        # 529 "overloaded" arrives as a 5xx and is retryable like any server error; an
        # explicit 413 (request too large) or 400 will fail identically every time.
        return error.retryable

    def _translate(self, error: anthropic.APIError) -> ProviderError:
        message = redact_text(_message(error), self._secrets)
        if isinstance(error, anthropic.APITimeoutError):
            return ProviderError(message or "request timed out", retryable=True, kind="timeout")
        if isinstance(error, anthropic.APIConnectionError):
            return ProviderError(message or "connection failed", retryable=True, kind="connection")
        if isinstance(error, anthropic.APIStatusError):
            return error_from_status(error.status_code, message, dict(error.response.headers))
        # A 2xx body the SDK could not read: a misbehaving server or proxy, worth a retry.
        return ProviderError(message or type(error).__name__, retryable=True, kind="server")


def _message(error: anthropic.APIError) -> str:
    api_message = getattr(error, "api_message", None)
    return str(api_message or error.message or type(error).__name__)
