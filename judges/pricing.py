"""What a call cost: a built-in price table, overridable per panel.

The figures are public list prices in USD per million tokens as of writing (late 2025),
without batch or prompt-caching discounts. Prices change: override them with ``prices:``
in the panel file rather than trusting this table for billing.
"""

from __future__ import annotations

from collections.abc import Mapping

from juryflow.judges.panel import Price

BUILTIN_PRICES: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-5": Price(input=5.0, output=25.0),
    "claude-opus-4-1": Price(input=15.0, output=75.0),
    "claude-opus-4": Price(input=15.0, output=75.0),
    "claude-sonnet-4-5": Price(input=3.0, output=15.0),
    "claude-sonnet-4": Price(input=3.0, output=15.0),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, output=4.0),
    # OpenAI
    "gpt-5": Price(input=1.25, output=10.0),
    "gpt-5-mini": Price(input=0.25, output=2.0),
    "gpt-5-nano": Price(input=0.05, output=0.4),
    "gpt-4.1": Price(input=2.0, output=8.0),
    "gpt-4.1-mini": Price(input=0.4, output=1.6),
    "gpt-4.1-nano": Price(input=0.1, output=0.4),
    "gpt-4o": Price(input=2.5, output=10.0),
    "gpt-4o-mini": Price(input=0.15, output=0.6),
    "o3": Price(input=2.0, output=8.0),
    "o3-mini": Price(input=1.1, output=4.4),
    "o4-mini": Price(input=1.1, output=4.4),
}


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an override, else the table; dated names fall back to their base.

    ``claude-sonnet-4-5-20250929`` and ``gpt-4o-mini-2024-07-18`` are priced as
    ``claude-sonnet-4-5`` and ``gpt-4o-mini`` (the longest known name they extend).
    """
    for table in (overrides or {}, BUILTIN_PRICES):
        if model in table:
            return table[model]
    for table in (overrides or {}, BUILTIN_PRICES):
        bases = [name for name in table if model.startswith(name + "-")]
        if bases:
            return table[max(bases, key=len)]
    return None


def cost_usd(
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    overrides: Mapping[str, Price] | None = None,
) -> float | None:
    """USD for one call; None when the model's price or the usage is unknown (shown "n/a").

    Unknown includes local models: they may cost nothing in money, but claiming 0.0 would
    hide a missing price for a hosted model with an unusual name.
    """
    if model is None or input_tokens is None or output_tokens is None:
        return None
    price = price_for(model, overrides)
    if price is None:
        return None
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000
