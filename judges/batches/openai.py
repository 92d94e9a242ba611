"""OpenAI Batch API: requests as a JSONL file (``files.create``), a batch over it
(``batches.create``), and the answers in its output and error files (``files.content``).

One model per batch (the API refuses a file that mixes them), so requests are grouped by
model before they are split at 50,000 requests / 200 MB per file.

Each batch carries its intent's marker in its ``metadata``, so a run that lost a batch's id
(killed while creating it, or a create that timed out) finds it by listing the batches.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any, Final

import openai

from juryflow.judges.batches.base import (
    FOUND_EARLIER_SECONDS,
    BatchNotEnded,
    OnCreated,
    OnCreating,
    SdkBatchClient,
    answer_each,
    submit_split,
)
from juryflow.judges.batches.records import (
    OPENAI_LIMITS,
    BatchEntry,
    BatchFailure,
    BatchIntent,
    BatchRequest,
    BatchResult,
    BatchState,
    BatchStatus,
    FailureKind,
    SubmittedBatch,
)
from juryflow.judges.providers.lean_post import MAX_RESPONSE_BYTES
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.judges.providers.openai import _response as completion_response
from juryflow.judges.redact import redact_text
from juryflow.judges.untrusted.loading import load_json

ENDPOINT: Final = "/v1/chat/completions"
MARKER_KEY: Final = "juryflow_intent"
"""The batch's ``metadata`` key holding its intent's marker."""
_PAGE = 100  # batches per listing page: the API's largest
_UPLOAD_TIMEOUT = 600.0  # seconds: a 200 MB file takes longer than one judge call
_STATES: dict[str, BatchState] = {
    "validating": "validating",
    "in_progress": "in_progress",
    "finalizing": "finalizing",
    "cancelling": "canceling",
    "completed": "completed",
    "cancelled": "canceled",
    "expired": "expired",
    "failed": "failed",
}
# The codes of requests that never ran, in the error file.
_NOT_RUN: dict[str, FailureKind] = {"batch_expired": "expired", "batch_cancelled": "canceled"}


class OpenAIBatchClient(SdkBatchClient[OpenAIClient]):
    """The Batch API through an :class:`OpenAIClient`, one model per batch (see
    :class:`SdkBatchClient`)."""

    provider = "openai"
    marks_batches = True  # in its metadata
    api_name = "the OpenAI API"
    default_limits = OPENAI_LIMITS

    def _line(self, request: BatchRequest) -> bytes:
        line = {
            "custom_id": request.custom_id,
            "method": "POST",
            "url": ENDPOINT,
            "body": self.client._parameters(request.request),
        }
        return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    async def _submit(
        self,
        requests: Sequence[BatchRequest],
        on_created: OnCreated | None,
        on_creating: OnCreating | None,
    ) -> list[SubmittedBatch]:
        by_model: dict[str, list[BatchRequest]] = {}
        for request in requests:
            by_model.setdefault(request.request.model, []).append(request)
        submitted: list[SubmittedBatch] = []
        for group in by_model.values():
            lines = [self._line(request) for request in group]

            async def create(
                chunk: range,
                marker: str,
                group: list[BatchRequest] = group,
                lines: list[bytes] = lines,
            ) -> str:
                data = b"".join(lines[i] for i in chunk)
                return await self._create(data, [group[i].judge_id for i in chunk], marker)

            sizes = [len(line) for line in lines]
            submitted += await submit_split(
                self.provider, group, sizes, self.limits, create, on_created, 0, on_creating
            )
        return submitted

    async def _create(self, data: bytes, judge_ids: list[str], marker: str) -> str:
        sdk = self.client._sdk()
        try:
            uploaded = await sdk.files.create(
                file=("juryflow-batch.jsonl", data, "application/jsonl"),
                purpose="batch",
                timeout=_UPLOAD_TIMEOUT,
            )
        except openai.APIError as error:
            raise self._creation_error(error, "POST /files", judge_ids) from None
        try:
            batch = await sdk.batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata={MARKER_KEY: marker},
            )
        except openai.APIError as error:
            # The file is of no use without its batch; left, it would count against storage.
            with contextlib.suppress(openai.APIError):
                await sdk.files.delete(uploaded.id)
            raise self._creation_error(error, "POST /batches", judge_ids) from None
        return batch.id

    async def find(self, intents: Sequence[BatchIntent], known: Collection[str]) -> dict[str, str]:
        """By the marker in each batch's metadata, listing newest first back to the
        earliest intent (less the clocks' leeway)."""
        wanted = {intent.marker for intent in intents}
        if not wanted:
            return {}
        since = min(intent.at for intent in intents) - FOUND_EARLIER_SECONDS
        found: dict[str, str] = {}
        judge_ids = [entry.judge_id for intent in intents for entry in intent.entries[:1]]
        try:
            async for batch in self.client._sdk().batches.list(limit=_PAGE):
                if batch.created_at < since:
                    break
                marker = (batch.metadata or {}).get(MARKER_KEY)
                if marker in wanted and batch.id not in known:
                    found.setdefault(marker, batch.id)
                    if len(found) == len(wanted):
                        break
        except openai.APIError as error:
            raise self._creation_error(error, "GET /batches", judge_ids) from None
        return found

    async def poll(self, batch_id: str) -> BatchStatus:
        return _status(await self._retrieve(batch_id))

    async def cancel(self, batch_id: str) -> BatchStatus:
        try:
            return _status(await self.client._sdk().batches.cancel(batch_id))
        except openai.APIError as error:
            raise self.client._translate(error) from None

    async def _retrieve(self, batch_id: str) -> Any:
        try:
            return await self.client._sdk().batches.retrieve(batch_id)
        except openai.APIError as error:
            raise self.client._translate(error) from None

    async def results(self, batch: SubmittedBatch) -> AsyncIterator[BatchResult]:
        remote = await self._retrieve(batch.batch_id)
        status = _status(remote)
        if not status.ended:
            raise BatchNotEnded(status)
        files = () if status.state == "failed" else (remote.output_file_id, remote.error_file_id)
        lines = self._files_lines([file_id for file_id in files if file_id])
        async for result in answer_each(
            batch, lines, _custom_id, self._result, lambda: _unanswered(status)
        ):
            yield result

    async def _files_lines(self, file_ids: list[str]) -> AsyncIterator[dict[str, Any]]:
        for file_id in file_ids:
            async for line in self._lines(file_id):
                yield line

    async def _lines(self, file_id: str) -> AsyncIterator[dict[str, Any]]:
        content = self.client._sdk().files.with_streaming_response.content
        try:
            async with content(file_id) as response:
                async for text in response.iter_lines():
                    if not text.strip():
                        continue
                    try:
                        line = load_json(text, max_size=MAX_RESPONSE_BYTES)
                    except ValueError:
                        # a torn line, or one nested or sized past what any answer needs:
                        # its request comes back as missing, like one the batch left out
                        continue
                    if isinstance(line, dict):
                        yield line
        except openai.APIError as error:
            raise self.client._translate(error) from None

    def _result(self, entry: BatchEntry, line: dict[str, Any]) -> BatchResult:
        response = line.get("response")
        if isinstance(response, dict):
            status = response.get("status_code")
            body = response.get("body")
            if isinstance(status, int) and 200 <= status < 300:
                return BatchResult(entry, response=completion_response(body, entry.structured))
            return BatchResult(entry, failure=self._errored(_message(body), status))
        error = line.get("error")
        error = error if isinstance(error, dict) else {}
        code = str(error.get("code") or "")
        if code in _NOT_RUN:
            return BatchResult(entry, failure=BatchFailure(_NOT_RUN[code], _NOT_RUN[code]))
        message = str(error.get("message") or code or "no response and no error")
        return BatchResult(entry, failure=self._errored(message, None))

    def _errored(self, message: str, status: int | None) -> BatchFailure:
        # Error bodies may quote keys (some servers echo them), and the reason is stored.
        return BatchFailure("errored", redact_text(message, self.client._secrets), status)


def _custom_id(line: dict[str, Any]) -> str:
    return str(line.get("custom_id"))


def _status(batch: Any) -> BatchStatus:
    counts = batch.request_counts
    errors = batch.errors.data if batch.errors is not None and batch.errors.data else []
    message = "; ".join(
        f"line {e.line}: {e.message}" if e.line is not None else str(e.message) for e in errors
    )
    return BatchStatus(
        batch_id=batch.id,
        state=_STATES.get(batch.status, "in_progress"),
        provider_state=batch.status,
        succeeded=counts.completed if counts is not None else 0,
        failed=counts.failed if counts is not None else 0,
        total=counts.total if counts is not None else 0,
        message=message or None,
    )


def _unanswered(status: BatchStatus) -> BatchFailure:
    """The failure of a request the ended batch has no line for."""
    if status.state == "failed":
        return BatchFailure("failed", f"batch failed: {status.message or 'no reason given'}")
    if status.state in ("expired", "canceled"):
        return BatchFailure(status.state, status.state)
    return BatchFailure("missing", f"no result in batch {status.batch_id}")


def _message(body: object) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
    return json.dumps(body)[:500]
