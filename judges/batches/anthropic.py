"""Anthropic Message Batches: ``messages.batches.create`` with the Messages API bodies,
``retrieve`` to poll, ``results`` (JSONL) once the batch has ended, ``cancel``.

Split at 100,000 requests or 256 MB of request body, whichever comes first.

A Message Batch keeps nothing of the caller's (no metadata), so a batch whose id a run lost
(killed while creating it, or a create that timed out) is found among the listed batches by
what it is: as many requests as its intent, created around the intent's time, no batch the
run knows already, and, once it has ended, answering exactly the intent's ``custom_id``s.
The run creates its batches one at a time per provider (``flows.batching``), so at most one
intent of a run is open when it is killed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

import anthropic

from juryflow.judges.batches.base import (
    FOUND_EARLIER_SECONDS,
    BatchNotEnded,
    OnCreated,
    OnCreating,
    SdkBatchClient,
    answer_each,
    in_window,
    submit_split,
)
from juryflow.judges.batches.records import (
    ANTHROPIC_LIMITS,
    BatchEntry,
    BatchFailure,
    BatchIntent,
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
_PAGE = 100  # batches per listing page
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
    marks_batches = False  # a Message Batch keeps nothing of the caller's
    api_name = "the Anthropic API"
    default_limits = ANTHROPIC_LIMITS

    async def _submit(
        self,
        requests: Sequence[BatchRequest],
        on_created: OnCreated | None,
        on_creating: OnCreating | None,
    ) -> list[SubmittedBatch]:
        bodies = [
            {"custom_id": request.custom_id, "params": self.client._parameters(request.request)}
            for request in requests
        ]
        # Measured as json.dumps writes it by default (spaces, non-ASCII escaped): never
        # less than what the SDK sends, so a batch under the limit here is under it there.
        sizes = [len(json.dumps(body)) + len(", ") for body in bodies]

        async def create(chunk: range, _marker: str) -> str:
            # the API keeps no marker: the intent's size and time find the batch instead
            return await self._create(
                [bodies[i] for i in chunk], [requests[i].judge_id for i in chunk]
            )

        return await submit_split(
            self.provider, requests, sizes, self.limits, create, on_created, _ENVELOPE, on_creating
        )

    async def _create(self, bodies: list[dict[str, Any]], judge_ids: list[str]) -> str:
        try:
            batch = await self.client._sdk().messages.batches.create(
                requests=bodies  # type: ignore[arg-type]  # the Messages API body, as a dict
            )
        except anthropic.APIError as error:
            raise self._creation_error(error, "POST /v1/messages/batches", judge_ids) from None
        return batch.id

    async def find(self, intents: Sequence[BatchIntent], known: Collection[str]) -> dict[str, str]:
        """Each intent's batch among those listed (see the module's docstring), the oldest
        intent first taking the earliest batch that fits it."""
        if not intents:
            return {}
        since = min(intent.at for intent in intents) - FOUND_EARLIER_SECONDS
        judge_ids = [entry.judge_id for intent in intents for entry in intent.entries[:1]]
        listed: list[Any] = []
        try:
            async for batch in self.client._sdk().messages.batches.list(limit=_PAGE):
                if batch.created_at.timestamp() < since:
                    break
                if batch.id not in known:
                    listed.append(batch)
        except anthropic.APIError as error:
            raise self._creation_error(error, "GET /v1/messages/batches", judge_ids) from None
        listed.sort(key=lambda batch: batch.created_at)
        found: dict[str, str] = {}
        taken: set[str] = set()
        for intent in sorted(intents, key=lambda intent: intent.at):
            for batch in listed:
                if (
                    batch.id not in taken
                    and _total(batch) == len(intent.entries)
                    and in_window(intent, batch.created_at.timestamp())
                    and await self._answers(batch, intent)
                ):
                    found[intent.marker] = batch.id
                    taken.add(batch.id)
                    break
        return found

    async def _answers(self, batch: Any, intent: BatchIntent) -> bool:
        """Whether ``batch`` may be ``intent``'s by what it answers: an ended batch answers
        exactly the intent's requests; a running one cannot say yet."""
        if batch.processing_status != "ended":
            return True
        wanted = {entry.custom_id for entry in intent.entries}
        try:
            answered = {_custom_id(line) async for line in self._lines(batch.id)}
        except ProviderError:
            return True  # its results are gone (archived): size and time must do
        return answered == wanted

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
        except (ValueError, RecursionError):
            # The SDK parses each line with json.loads: a line that is not JSON, or nested
            # past Python's recursion limit, ends the reading there, and the requests not
            # read come back as missing, like ones the batch left out (as OpenAI's do).
            return
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


def _total(batch: Any) -> int:
    counts = batch.request_counts
    return int(
        counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
    )


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
