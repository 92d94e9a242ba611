"""The batch client of a judge's model client."""

from __future__ import annotations

from juryflow.judges.batches.anthropic import AnthropicBatchClient
from juryflow.judges.batches.base import BatchClient, BatchUnsupported
from juryflow.judges.batches.openai import OpenAIBatchClient
from juryflow.judges.batches.records import BatchLimits
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.base import ModelClient
from juryflow.judges.providers.openai import OpenAIClient


def batch_client(
    client: ModelClient, judge_id: str, limits: BatchLimits | None = None
) -> BatchClient:
    """A batch client on ``client``'s endpoint; ``limits`` default to the provider's."""
    if isinstance(client, OpenAIClient):
        return OpenAIBatchClient(client, limits) if limits else OpenAIBatchClient(client)
    if isinstance(client, AnthropicClient):
        return AnthropicBatchClient(client, limits) if limits else AnthropicBatchClient(client)
    raise BatchUnsupported([judge_id], f"provider {client.provider!r}", "no batch client")
