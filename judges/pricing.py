"""What a call cost: a built-in price table, overridable per panel.

The figures are public list prices in USD per million tokens as of writing (late 2025).
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


def _openai(input: float, output: float, *, cached: float) -> Price:
    return Price(input=input, output=output, cache_write=input, cache_read=cached)


BUILTIN_PRICES: dict[str, Price] = {
    # Anthropic (cache writes and reads at the Price defaults, 1.25x and 0.1x input)
    "claude-opus-4-5": Price(input=5.0, output=25.0),
    "claude-opus-4-1": Price(input=15.0, output=75.0),
    "claude-opus-4": Price(input=15.0, output=75.0),
    "claude-sonnet-4-5": Price(input=3.0, output=15.0),
    "claude-sonnet-4": Price(input=3.0, output=15.0),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, output=4.0),
    # OpenAI: a cache write costs the input price, a read the model's cached-input price
    "gpt-5": _openai(1.25, 10.0, cached=0.125),
    "gpt-5-mini": _openai(0.25, 2.0, cached=0.025),
    "gpt-5-nano": _openai(0.05, 0.4, cached=0.005),
    "gpt-4.1": _openai(2.0, 8.0, cached=0.5),
    "gpt-4.1-mini": _openai(0.4, 1.6, cached=0.1),
    "gpt-4.1-nano": _openai(0.1, 0.4, cached=0.025),
    "gpt-4o": _openai(2.5, 10.0, cached=1.25),
    "gpt-4o-mini": _openai(0.15, 0.6, cached=0.075),
    "o3": _openai(2.0, 8.0, cached=0.5),
    "o3-mini": _openai(1.1, 4.4, cached=0.55),
    "o4-mini": _openai(1.1, 4.4, cached=0.275),
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


# Prompt caches: the shortest prefix each provider caches (shorter ones are billed at the
# input price, silently). Anthropic's by model, as documented; the rest of its models 1,024.
ANTHROPIC_CACHE_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
ANTHROPIC_CACHE_DEFAULT_MIN = 1024
OPENAI_CACHE_MIN_TOKENS = 1024
OPENAI_CACHE_INCREMENT = 128
"""OpenAI caches the longest prefix it has seen from 1,024 tokens on, in steps of 128."""


def anthropic_cache_minimum(model: str) -> int:
    """The shortest prefix Anthropic caches for ``model`` (a shorter one is billed at the
    input price, without an error)."""
    return next(
        (n for name, n in ANTHROPIC_CACHE_MIN_TOKENS if model.startswith(name)),
        ANTHROPIC_CACHE_DEFAULT_MIN,
    )


def cached_prefix_tokens(
    provider: str, model: str, base_url: str | None, prefix_tokens: int
) -> int | None:
    """Of a static prompt prefix of ``prefix_tokens``, how many the provider's cache keeps:
    0 when the prefix is under its minimum; None when juryflow cannot price a cache there
    (an OpenAI-compatible server's cache, if any, has no price of its own).

    Anthropic caches what juryflow marks with ``cache_control`` (the whole static part);
    OpenAI the longest prefix it has seen, in steps of 128 tokens.
    """
    if provider == "anthropic":
        return prefix_tokens if prefix_tokens >= anthropic_cache_minimum(model) else 0
    if provider == "openai" and base_url is None:
        if prefix_tokens < OPENAI_CACHE_MIN_TOKENS:
            return 0
        steps = (prefix_tokens - OPENAI_CACHE_MIN_TOKENS) // OPENAI_CACHE_INCREMENT
        return OPENAI_CACHE_MIN_TOKENS + steps * OPENAI_CACHE_INCREMENT
    return None
