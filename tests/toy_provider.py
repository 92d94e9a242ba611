"""A toy provider, written as a new provider's module is: one file, its prices in it.

"toyllm" speaks the Chat Completions wire over plain httpx (no SDK), so the stand-in can
answer it; everything juryflow needs to know of it is the ``register_provider`` call.
Importing this module registers it (a provider module inside ``judges/providers/``
registers when the registry is first read).
"""

from __future__ import annotations

import httpx

from juryflow.judges.providers.base import (
    ModelRequest,
    ModelResponse,
    ProviderError,
    error_from_status,
)
from juryflow.judges.providers.price import Price
from juryflow.judges.providers.registry import register_provider

PRICES = {"toy-judge-1": Price(input=2.0, output=4.0)}


@register_provider(
    "toyllm",
    key_env="TOYLLM_API_KEY",
    default_host="api.toyllm.example",
    prices=PRICES,
    family="toy",
    cache_mechanism="no prompt cache",
)
class ToyClient:
    provider: str

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url or "https://api.toyllm.example/v1",
            timeout=timeout,
            headers={"Authorization": f"Bearer {api_key}", **(headers or {})},
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": request.full_prompt}],
        }
        try:
            answer = await self._http.post("/chat/completions", json=body)
        except httpx.TransportError as error:
            raise ProviderError(str(error), retryable=True, kind="connection") from error
        if answer.status_code >= 400:
            raise error_from_status(answer.status_code, answer.text, answer.headers)
        data = answer.json()
        usage = data.get("usage") or {}
        return ModelResponse(
            text=data["choices"][0]["message"]["content"] or "",
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
        )

    def should_retry(self, error: ProviderError) -> bool:
        return error.retryable

    async def aclose(self) -> None:
        await self._http.aclose()
