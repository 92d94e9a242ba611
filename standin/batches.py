"""The stand-in's batch APIs: OpenAI Files + Batch, and Anthropic Message Batches.

Wire formats as the real APIs (the official SDKs' ``files``, ``batches`` and
``messages.batches`` methods run unchanged against them):

- OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``; ``POST /v1/batches``,
  ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. Output and error files are
  JSONL lines ``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
  "error"}``; a request never run has ``response: null`` and ``error.code``
  ``batch_expired`` or ``batch_cancelled``.
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``POST .../{id}/cancel``, ``GET .../{id}/results`` (JSONL ``{"custom_id", "result":
  {"type": "succeeded" | "errored" | "canceled" | "expired", ...}}``).

Each request in a batch is answered as the real-time endpoints answer it (the model-name
rule, scripted steps, random faults, :func:`~juryflow.standin.server.make_answer`), with
``usage``, and counted once in the server's request stats under its model, when the batch
processes it. Faults mean, inside a batch: ``400``/``401``/``403``/``404``/``429``/``500``
an errored request with that status, ``hang`` and ``drop`` a request never run before the
window closed (expired), ``malformed`` a broken answer.

Time is polls: each retrieve of a batch is one step (or ``batch_seconds_to_finish`` spread
over the same steps); ``StubConfig.batch_polls_to_finish`` steps end it. OpenAI shows
validating (at creation), in_progress, finalizing (all processed), then completed;
Anthropic in_progress, then ended. ``batch_never_finishes`` keeps a batch in progress,
``batch_polls_to_expire`` expires what is unprocessed at that step, a cancel ends the
batch at the next poll with the unprocessed requests canceled. ``batch_api=False`` (or a
local ``dialect``) answers 404 on every batch route, as vLLM or Ollama do. Counters
(``/_stats`` under ``batches``): files uploaded, batches created, batch requests answered
(total and per model), polls, result downloads and cancels.

This module holds the routes; the state is in :mod:`~juryflow.standin.batch_state`, how a
batch moves on in :mod:`~juryflow.standin.batch_progress`, the wire formats in
:mod:`~juryflow.standin.batch_wire`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from juryflow.standin.batch_progress import Progress
from juryflow.standin.batch_state import (
    ANTHROPIC_MAX_BYTES,
    ANTHROPIC_MAX_REQUESTS,
    OPENAI_MAX_BYTES,
    OPENAI_MAX_REQUESTS,
    Api,
    Batch,
    BatchStore,
    Entry,
    StoredFile,
    stats_of,
    store_of,
)
from juryflow.standin.batch_wire import (
    CHAT_ENDPOINT,
    anthropic_batch,
    anthropic_result,
    jsonl,
    multipart,
    now,
    openai_batch,
    openai_entries,
    send_bytes,
)
from juryflow.standin.server import StubServer, _Request, _send, error_body

__all__ = ["handle", "is_batch_route", "stats_of"]

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def is_batch_route(path: str) -> bool:
    return path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches"))


# --- routes --------------------------------------------------------------------------------


async def handle(server: StubServer, request: _Request, writer: asyncio.StreamWriter) -> bool:
    """Answer one request on a batch route (see :func:`is_batch_route`)."""
    path = request.path.split("?", 1)[0].rstrip("/")
    api: Api = "anthropic" if path.startswith("/v1/messages/batches") else "openai"
    if not server.config.serves_batches:
        # What a FastAPI-based server (vLLM) says of a route it does not have.
        return await _send(writer, 404, {"detail": "Not Found"})
    routes = _Routes(server, store_of(server), request, writer, api)
    parts = path.strip("/").split("/")[1:]  # without "v1"
    method = request.method
    if api == "anthropic":
        parts = parts[2:]  # without "messages", "batches"
        if not parts and method == "POST":
            return await routes.create_message_batch()
        if len(parts) == 1 and method == "GET":
            return await routes.retrieve(parts[0])
        if len(parts) == 2 and parts[1] == "cancel" and method == "POST":
            return await routes.cancel(parts[0])
        if len(parts) == 2 and parts[1] == "results" and method == "GET":
            return await routes.anthropic_results(parts[0])
    elif parts[0] == "files":
        if len(parts) == 1 and method == "POST":
            return await routes.upload()
        if len(parts) == 2 and method == "GET":
            return await routes.file(parts[1])
        if len(parts) == 2 and method == "DELETE":
            return await routes.delete_file(parts[1])
        if len(parts) == 3 and parts[2] == "content" and method == "GET":
            return await routes.file_content(parts[1])
    else:
        if len(parts) == 1 and method == "POST":
            return await routes.create_openai_batch()
        if len(parts) == 2 and method == "GET":
            return await routes.retrieve(parts[1])
        if len(parts) == 3 and parts[2] == "cancel" and method == "POST":
            return await routes.cancel(parts[1])
    return await _send(writer, 404, error_body(api, 404, f"no route {method} {path}"))


class _Routes:
    def __init__(
        self,
        server: StubServer,
        store: BatchStore,
        request: _Request,
        writer: asyncio.StreamWriter,
        api: Api,
    ) -> None:
        self.server = server
        self.store = store
        self.request = request
        self.writer = writer
        self.api: Api = api

    @property
    def host(self) -> str:
        return self.request.headers.get("host", "127.0.0.1")

    async def error(self, status: int, message: str) -> bool:
        return await _send(self.writer, status, error_body(self.api, status, message))

    def json_body(self) -> dict[str, Any] | None:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    # --- OpenAI files ---

    async def upload(self) -> bool:
        fields = multipart(self.request)
        if fields is None or "file" not in fields:
            return await self.error(400, "expected multipart/form-data with a 'file' field")
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose != "batch":
            return await self.error(400, f"purpose {purpose!r}: this stand-in stores batch files")
        filename, data = fields["file"]
        stored = StoredFile(self.store.new_id("file-stub"), "batch", filename or "", data, now())
        self.store.files[stored.id] = stored
        self.store.stats.count("files_uploaded")
        return await _send(self.writer, 200, stored.payload())

    async def file(self, file_id: str) -> bool:
        stored = self.store.files.get(file_id)
        if stored is None:
            return await self.error(404, f"No such File object: {file_id}")
        return await _send(self.writer, 200, stored.payload())

    async def delete_file(self, file_id: str) -> bool:
        if self.store.files.pop(file_id, None) is None:
            return await self.error(404, f"No such File object: {file_id}")
        return await _send(self.writer, 200, {"id": file_id, "object": "file", "deleted": True})

    async def file_content(self, file_id: str) -> bool:
        stored = self.store.files.get(file_id)
        if stored is None:
            return await self.error(404, f"No such File object: {file_id}")
        if stored.purpose == "batch_output":
            self.store.stats.count("results_fetched")
        return await send_bytes(self.writer, stored.data)

    # --- creating batches ---

    async def create_openai_batch(self) -> bool:
        body = self.json_body()
        if body is None:
            return await self.error(400, "body is not a JSON object")
        endpoint = body.get("endpoint")
        if endpoint != CHAT_ENDPOINT:
            return await self.error(
                400, f"endpoint {endpoint!r}: this stand-in batches /v1/chat/completions"
            )
        if body.get("completion_window") != "24h":
            return await self.error(400, "completion_window must be '24h'")
        stored = self.store.files.get(str(body.get("input_file_id", "")))
        if stored is None or stored.purpose != "batch":
            return await self.error(404, f"No such File object: {body.get('input_file_id')}")
        config = self.server.config
        entries, errors = openai_entries(
            stored.data,
            config.batch_max_requests or OPENAI_MAX_REQUESTS,
            config.batch_max_bytes or OPENAI_MAX_BYTES,
        )
        batch = self._new_batch(entries, self.store.new_id("batch_stub"))
        batch.input_file_id = stored.id
        batch.errors = errors
        return await _send(self.writer, 200, openai_batch(batch))

    async def create_message_batch(self) -> bool:
        body = self.json_body()
        requests = body.get("requests") if body is not None else None
        if not isinstance(requests, list) or not requests:
            return await self.error(400, "requests: a non-empty list is required")
        config = self.server.config
        limit = config.batch_max_requests or ANTHROPIC_MAX_REQUESTS
        if len(requests) > limit:
            return await self.error(400, f"requests: at most {limit:,} requests per batch")
        size_limit = config.batch_max_bytes or ANTHROPIC_MAX_BYTES
        if len(self.request.body) > size_limit:
            message = f"request body of {len(self.request.body):,} bytes exceeds {size_limit:,}"
            return await self.error(413, message)
        entries: list[Entry] = []
        seen: set[str] = set()
        for index, entry in enumerate(requests):
            entry = entry if isinstance(entry, dict) else {}
            custom_id, params = entry.get("custom_id"), entry.get("params")
            where = f"requests.{index}"
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                message = (
                    f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                )
                return await self.error(400, message)
            if custom_id in seen:
                return await self.error(400, f"{where}.custom_id: {custom_id!r} is not unique")
            if not isinstance(params, dict) or not params.get("model"):
                return await self.error(400, f"{where}.params.model: Field required")
            seen.add(custom_id)
            entries.append(Entry(custom_id, params))
        batch = self._new_batch(entries, self.store.new_id("msgbatch_stub"))
        return await _send(self.writer, 200, anthropic_batch(batch, self.host))

    def _new_batch(self, entries: list[Entry], batch_id: str) -> Batch:
        headers = self.request.headers
        key = headers.get("x-api-key") or headers.get("authorization", "")
        batch = Batch(
            api=self.api,
            id=batch_id,
            entries=entries,
            created_at=time.time(),
            started=time.monotonic(),
            key=key.removeprefix("Bearer ").strip(),
            version=headers.get("anthropic-version", ""),
        )
        self.store.batches[batch_id] = batch
        self.store.stats.count("batches_created")
        return batch

    # --- polling, cancelling, results ---

    def _batch(self, batch_id: str) -> Batch | None:
        batch = self.store.batches.get(batch_id)
        return batch if batch is not None and batch.api == self.api else None

    async def retrieve(self, batch_id: str) -> bool:
        batch = self._batch(batch_id)
        if batch is None:
            return await self.error(404, f"batch {batch_id!r} not found")
        self.store.stats.count("polls")
        Progress(self.server, self.store, batch).poll()
        return await self._send_batch(batch)

    async def cancel(self, batch_id: str) -> bool:
        batch = self._batch(batch_id)
        if batch is None:
            return await self.error(404, f"batch {batch_id!r} not found")
        self.store.stats.count("cancels")
        if not batch.ended and batch.cancel_at is None:
            batch.cancel_at = time.time()
            batch.state = "canceling"
        return await self._send_batch(batch)

    async def _send_batch(self, batch: Batch) -> bool:
        payload = openai_batch(batch) if self.api == "openai" else anthropic_batch(batch, self.host)
        return await _send(self.writer, 200, payload)

    async def anthropic_results(self, batch_id: str) -> bool:
        batch = self._batch(batch_id)
        if batch is None:
            return await self.error(404, f"batch {batch_id!r} not found")
        if not batch.ended:
            return await self.error(400, f"batch {batch_id!r} is still processing")
        self.store.stats.count("results_fetched")
        lines = [
            {
                "custom_id": entry.custom_id,
                "result": anthropic_result(batch.outcomes[entry.custom_id]),
            }
            for entry in batch.entries
        ]
        return await send_bytes(self.writer, jsonl(lines))
