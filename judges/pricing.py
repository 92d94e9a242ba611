"""What a call cost: the providers' price tables, overridable per panel.

Each provider's module declares its table (:mod:`juryflow.judges.providers.registry`): public
list prices in USD per million tokens as of writing (late 2025).
Prompt caching: Anthropic writes its 5-minute cache at 1.25x and reads it at 0.1x the
input price (the :class:`Price` defaults); OpenAI charges nothing extra for a write and its
own cached-input price for a read (``cache_read`` below). Batch APIs: half of every price
at both providers (the default; ``batch_input`` / ``batch_output`` override it). Prices
change: override them with ``prices:`` in the panel file rather than trusting this table
for billing.
"""

from __future__ import annotations

from collections.abc import Mapping

from juryflow.judges.providers.price import Price
from juryflow.judges.providers.registry import (
    model_prices,
    provider_names,
    registered_provider,
)


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an override, else the table; dated names fall back to their base.

    ``claude-sonnet-4-5-20250929`` and ``gpt-4o-mini-2024-07-18`` are priced as
    ``claude-sonnet-4-5`` and ``gpt-4o-mini`` (the longest known name they extend).
    """
    tables = (overrides or {}, model_prices())
    for table in tables:
        if model in table:
            return table[model]
    for table in tables:
        bases = [name for name in table if model.startswith(name + "-")]
        if bases:
            return table[max(bases, key=len)]
    return None


def cost_usd(
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    overrides: Mapping[str, Price] | None = None,
    *,
    cache_write_tokens: int | None = None,
    cache_read_tokens: int | None = None,
    batch: bool = False,
) -> float | None:
    """USD for one call; None when the model's price or the usage is unknown (shown "n/a").

    ``input_tokens`` counts every prompt token; ``cache_write_tokens`` and
    ``cache_read_tokens`` (None: none reported) are those of them priced at the prompt
    cache's prices; ``batch`` prices the call at the batch API's (see :meth:`Price.cost`).

    Unknown includes local models: they may cost nothing in money, but claiming 0.0 would
    hide a missing price for a hosted model with an unusual name.
    """
    if model is None or input_tokens is None or output_tokens is None:
        return None
    price = price_for(model, overrides)
    if price is None:
        return None
    return price.cost(
        input_tokens,
        output_tokens,
        cache_write_tokens=cache_write_tokens,
        cache_read_tokens=cache_read_tokens,
        batch=batch,
    )


def cached_prefix_tokens(
    provider: str, model: str, base_url: str | None, prefix_tokens: int
) -> int | None:
    """Of a static prompt prefix of ``prefix_tokens``, how many the provider's cache keeps:
    0 when the prefix is under its minimum; None when juryflow cannot price a cache there
    (an offline judge, an OpenAI-compatible server's cache).

    Each provider's module says how its cache works (Anthropic caches what juryflow marks
    with ``cache_control``; OpenAI the longest prefix it has seen, in steps of 128 tokens).
    """
    if provider not in provider_names():
        return None
    return registered_provider(provider).cached_prefix(model, base_url, prefix_tokens)
