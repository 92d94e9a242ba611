"""Anthropic Message Batches: ``messages.batches.create`` with the Messages API bodies,
``retrieve`` to poll, ``results`` (JSONL) once the batch has ended, ``cancel``.

Split at 100,000 requests or 256 MB of request body, whichever comes first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anthropic

from juryflow.judges.batches.base import (
    BatchNotEnded,
    OnCreated,
    SdkBatchClient,
    answer_each,
    submit_split,
)
from juryflow.judges.batches.records import (
    ANTHROPIC_LIMITS,
    BatchEntry,
    BatchFailure,
    BatchRequest,
    BatchResult,
    BatchState,
    BatchStatus,
    SubmittedBatch,
)
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.anthropic import _response as message_response
from juryflow.judges.providers.base import ProviderError, http_library
from juryflow.judges.redact import redact_text

_ENVELOPE = len(json.dumps({"requests": []}))
# The HTTP status each error type stands for, so a batch error is as fatal or retryable as
# the same error in real time (an unknown model stops the judge, an overload does not).
_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicBatchClient(SdkBatchClient[AnthropicClient]):
    """Message Batches through an :class:`AnthropicClient` (see :class:`SdkBatchClient`)."""

    provider = "anthropic"
    api_name = "the Anthropic API"
    default_limits = ANTHROPIC_LIMITS

    async def _submit(
        self, requests: Sequence[BatchRequest], on_created: OnCreated | None
    ) -> list[SubmittedBatch]:
        bodies = [
            {"custom_id": request.custom_id, "params": self.client._parameters(request.request)}
            for request in requests
        ]
        # Measured as json.dumps writes it by default (spaces, non-ASCII escaped): never
        # less than what the SDK sends, so a batch under the limit here is under it there.
        sizes = [len(json.dumps(body)) + len(", ") for body in bodies]

        async def create(chunk: range) -> str:
            return await self._create(
                [bodies[i] for i in chunk], [requests[i].judge_id for i in chunk]
            )

        return await submit_split(
            self.provider, requests, sizes, self.limits, create, on_created, _ENVELOPE
        )

    async def _create(self, bodies: list[dict[str, Any]], judge_ids: list[str]) -> str:
        try:
            batch = await self.client._sdk().messages.batches.create(
                requests=bodies  # type: ignore[arg-type]  # the Messages API body, as a dict
            )
        except anthropic.APIError as error:
            raise self._creation_error(error, "POST /v1/messages/batches", judge_ids) from None
        return batch.id

    async def poll(self, batch_id: str) -> BatchStatus:
        try:
            return _status(await self.client._sdk().messages.batches.retrieve(batch_id))
        except anthropic.APIError as error:
            raise self.client._translate(error) from None

    async def cancel(self, batch_id: str) -> BatchStatus:
        try:
            return _status(await self.client._sdk().messages.batches.cancel(batch_id))
        except anthropic.APIError as error:
            raise self.client._translate(error) from None

    def results(self, batch: SubmittedBatch) -> AsyncIterator[BatchResult]:
        def missing() -> BatchFailure:
            return BatchFailure("missing", f"no result in batch {batch.batch_id}")

        lines = self._lines(batch.batch_id)
        return answer_each(batch, lines, _custom_id, self._answer, missing)

    def _answer(self, entry: BatchEntry, line: Any) -> BatchResult:
        result = getattr(line, "result", None)
        kind = getattr(result, "type", None)
        if kind == "succeeded":
            message = result.message  # type: ignore[union-attr]
            return BatchResult(entry, response=message_response(message.to_dict()))
        if kind in ("expired", "canceled"):
            return BatchResult(entry, failure=BatchFailure(kind, kind))
        return BatchResult(entry, failure=self._errored(result))

    async def _lines(self, batch_id: str) -> AsyncIterator[Any]:
        sdk = self.client._sdk()
        transport_error = http_library(anthropic).TransportError
        try:
            decoder = await sdk.messages.batches.results(batch_id)
            async for line in decoder:
                yield line
        except anthropic.APIError as error:
            raise self.client._translate(error) from None
        except anthropic.AnthropicError:
            # The SDK's word for a batch without results yet (no results_url).
            raise BatchNotEnded(await self.poll(batch_id)) from None
        except transport_error as error:  # the results stream broke off mid-way
            raise ProviderError(
                f"results of batch {batch_id} broke off: {error}", retryable=True, kind="connection"
            ) from None

    def _errored(self, result: Any) -> BatchFailure:
        outer = getattr(result, "error", None)
        error = getattr(outer, "error", None)
        kind = str(getattr(error, "type", "") or "error")
        message = str(getattr(error, "message", "") or "the request errored")
        # Error bodies may quote keys (some servers echo them), and the reason is stored.
        reason = redact_text(message, self.client._secrets)
        return BatchFailure("errored", reason, _STATUS.get(kind))


def _custom_id(line: Any) -> str:
    return str(getattr(line, "custom_id", ""))


def _status(batch: Any) -> BatchStatus:
    counts = batch.request_counts
    failed = counts.errored + counts.canceled + counts.expired
    total = counts.processing + counts.succeeded + failed
    state: BatchState
    if batch.processing_status == "ended":
        state = "canceled" if batch.cancel_initiated_at is not None else "completed"
    elif batch.processing_status == "canceling":
        state = "canceling"
    else:
        state = "in_progress"
    return BatchStatus(
        batch_id=batch.id,
        state=state,
        provider_state=batch.processing_status,
        succeeded=counts.succeeded,
        failed=failed,
        total=total,
    )
