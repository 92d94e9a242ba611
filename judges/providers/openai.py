"""OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp, LM Studio) via Chat Completions.

Official SDK with its retries off (ours do it). ``base_url`` points it at any compatible
server; such servers that reject ``response_format`` are used with
``structured_output: false`` in the panel file.
"""

from __future__ import annotations

import json
from typing import Any

import openai

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

_NO_TEMPERATURE_PREFIXES = ("o1", "o3", "o4")
"""Reasoning models that reject any ``temperature``."""


class OpenAIClient:
    """A :class:`~juryflow.judges.providers.base.ModelClient` for Chat Completions."""

    provider = "openai"

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
            lambda: openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout,
                max_retries=0,
                default_headers=self._headers or None,
            )
        )

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIClient(base_url={self._base_url!r})"

    def _sdk(self) -> openai.AsyncOpenAI:
        return self._sdks.get()

    async def aclose(self) -> None:
        await self._sdks.aclose()

    def _parameters(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": "user", "content": request.prompt}],
            "timeout": request.timeout,
        }
        if not request.model.startswith(_NO_TEMPERATURE_PREFIXES):
            kwargs["temperature"] = request.temperature
        # OpenAI deprecated max_tokens (its reasoning models reject it), while most
        # compatible servers only know max_tokens.
        if self._base_url is None:
            kwargs["max_completion_tokens"] = request.max_tokens
        else:
            kwargs["max_tokens"] = request.max_tokens
        if request.structured:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": TOOL_NAME,
                    "schema": output_schema(request.output_kind),
                    "strict": True,
                },
            }
        return kwargs

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            completion = await self._sdk().chat.completions.create(**self._parameters(request))
        except openai.APIError as error:
            raise self._translate(error) from None

        text = ""
        structured: dict[str, Any] | None = None
        if completion.choices:
            message = completion.choices[0].message
            text = message.content or ""
            # Some compatible servers answer a schema request with a tool call instead.
            for call in message.tool_calls or ():
                function = getattr(call, "function", None)
                if function is not None and function.name == TOOL_NAME:
                    structured = _json_object(function.arguments)
                    if structured is None:
                        text = text or function.arguments
                    break
            if structured is None and request.structured:
                structured = _json_object(text)
        usage = completion.usage
        return ModelResponse(
            text=text,
            structured=structured,
            input_tokens=usage.prompt_tokens if usage else None,
            output_tokens=usage.completion_tokens if usage else None,
        )

    def should_retry(self, error: ProviderError) -> bool:
        return error.retryable

    def _translate(self, error: openai.APIError) -> ProviderError:
        message = redact_text(error.message or type(error).__name__, self._secrets)
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


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None (the parser then reports why the text is unusable)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
