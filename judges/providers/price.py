"""What a model's tokens cost: the price record a provider's table and a panel's ``prices:`` use."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

CACHE_WRITE_FACTOR = 1.25
"""A prompt-cache write, as a multiple of the input price: Anthropic's 5-minute cache."""
CACHE_READ_FACTOR = 0.1
"""A prompt-cache read, as a multiple of the input price: Anthropic's (and gpt-5's)."""
BATCH_DISCOUNT = 0.5
"""What the batch APIs of Anthropic and OpenAI charge, as a share of the real-time price,
for input, output, cache writes and cache reads alike."""


class Price(BaseModel):
    """US dollars per million tokens.

    ``cache_write`` / ``cache_read`` price the input tokens written to / read from the
    provider's prompt cache; absent, they are 1.25x and 0.1x ``input`` (Anthropic's rates;
    give OpenAI models their cached-input price as ``cache_read``). ``batch_input`` /
    ``batch_output`` price calls sent through a batch API; absent, half the real-time
    prices. In a batch, cache writes and reads take the discount of the input price.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    batch_input: float | None = Field(default=None, ge=0)
    batch_output: float | None = Field(default=None, ge=0)

    def input_price(self, batch: bool = False) -> float:
        if not batch:
            return self.input
        return self.batch_input if self.batch_input is not None else self.input * BATCH_DISCOUNT

    def output_price(self, batch: bool = False) -> float:
        if not batch:
            return self.output
        if self.batch_output is not None:
            return self.batch_output
        return self.output * BATCH_DISCOUNT

    def cache_write_price(self, batch: bool = False) -> float:
        price = self.cache_write
        if price is None:
            price = self.input * CACHE_WRITE_FACTOR
        return price * self._batch_share(batch)

    def cache_read_price(self, batch: bool = False) -> float:
        price = self.cache_read
        if price is None:
            price = self.input * CACHE_READ_FACTOR
        return price * self._batch_share(batch)

    def _batch_share(self, batch: bool) -> float:
        if not batch:
            return 1.0
        return self.input_price(True) / self.input if self.input > 0 else BATCH_DISCOUNT

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_write_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        batch: bool = False,
    ) -> float:
        """USD for one call. ``input_tokens`` counts every prompt token; those of them
        written to or read from the prompt cache are priced at the cache's prices."""
        written = cache_write_tokens or 0
        read = cache_read_tokens or 0
        # A server whose cache counts exceed its input count is trusted on the cache counts.
        uncached = max(input_tokens - written - read, 0)
        return (
            uncached * self.input_price(batch)
            + written * self.cache_write_price(batch)
            + read * self.cache_read_price(batch)
            + output_tokens * self.output_price(batch)
        ) / 1_000_000
