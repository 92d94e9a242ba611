"""The stand-in's batch APIs: OpenAI Files + Batch, and Anthropic Message Batches.

Wire formats as the real APIs (the official SDKs' ``files``, ``batches`` and
``messages.batches`` methods run unchanged against them):

- OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``; ``POST /v1/batches`` (with
  its ``metadata``, up to 16 pairs), ``GET /v1/batches`` (newest first, ``limit`` and
  ``after``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. Output and
  error files are JSONL lines ``{"id", "custom_id", "response": {"status_code",
  "request_id", "body"}, "error"}``; a request never run has ``response: null`` and
  ``error.code`` ``batch_expired`` or ``batch_cancelled``.
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches`` (newest first,
  ``limit``, ``after_id`` and ``before_id``), ``GET /v1/messages/batches/{id}``,
  ``POST .../{id}/cancel``, ``GET .../{id}/results`` (JSONL ``{"custom_id", "result":
  {"type": "succeeded" | "errored" | "canceled" | "expired", ...}}``).

Each request in a batch is answered as the real-time endpoints answer it (the model-name
rule, scripted steps, random faults, :func:`~juryflow.standin.model.make_answer`), with
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
(total and per model), polls, result downloads, cancels and lists. A listing shows each
batch as it stands; it is no poll, and moves none on.

``BatchStore.hold`` (tests) holds a request at a step of creating or polling a batch (see
``batch_state.HOLD_STEPS``) until its connection closes, then drops it: what a provider
sees of a client killed there. A test waits for the ``held`` count, kills the client, and
counts the batches its resume creates.

This module holds the routes; the state is in :mod:`~juryflow.standin.batch_state`, how a
batch moves on in :mod:`~juryflow.standin.batch_progress`, the wire formats in
:mod:`~juryflow.standin.batch_wire`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from typing import Any
from urllib.parse import parse_qs

from juryflow.standin.batch_progress import Progress
from juryflow.standin.batch_state import (
    ANTHROPIC_MAX_BYTES,
    ANTHROPIC_MAX_REQUESTS,
    HELD,
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
from juryflow.standin.http_wire import Request, error_body, send
from juryflow.standin.model import ServerState

__all__ = ["handle", "is_batch_route", "stats_of"]

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The APIs' page sizes: (default, largest)
_PAGE = {"openai": (20, 100), "anthropic": (20, 1000)}
# OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512
_METADATA_PAIRS, _METADATA_KEY, _METADATA_VALUE = 16, 64, 512


def is_batch_route(path: str) -> bool:
    return path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches"))


# --- routes --------------------------------------------------------------------------------


async def handle(server: ServerState, request: Request, writer: asyncio.StreamWriter) -> bool:
    """Answer one request on a batch route (see :func:`is_batch_route`)."""
    path = request.path.split("?", 1)[0].rstrip("/")
    api: Api = "anthropic" if path.startswith("/v1/messages/batches") else "openai"
    if not server.config.serves_batches:
        # What a FastAPI-based server (vLLM) says of a route it does not have.
        return await send(writer, 404, {"detail": "Not Found"})
    routes = _Routes(server, store_of(server), request, writer, api)
    parts = path.strip("/").split("/")[1:]  # without "v1"
    method = request.method
    if api == "anthropic":
        parts = parts[2:]  # without "messages", "batches"
        if not parts and method == "POST":
            return await routes.create_message_batch()
        if not parts and method == "GET":
            return await routes.list_batches()
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
        if len(parts) == 1 and method == "GET":
            return await routes.list_batches()
        if len(parts) == 2 and method == "GET":
            return await routes.retrieve(parts[1])
        if len(parts) == 3 and parts[2] == "cancel" and method == "POST":
            return await routes.cancel(parts[1])
    return await send(writer, 404, error_body(api, 404, f"no route {method} {path}"))


class _Routes:
    def __init__(
        self,
        server: ServerState,
        store: BatchStore,
        request: Request,
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
        return await send(self.writer, status, error_body(self.api, status, message))

    async def held(self, step: str) -> bool:
        """Whether the request is held at ``step`` (``BatchStore.hold``): then it waits
        until its connection closes (its client killed, or the server stopping), and the
        caller drops it, as a provider drops a request whose client went away."""
        name = f"{self.api}:{step}"
        if name not in self.store.hold:
            return False
        self.store.stats.count(HELD + name)
        # A killed client's connection is half-closed, not closed: it ends when the server
        # stops and aborts it. A reset connection says so by raising here.
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
        return True

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
        if await self.held("upload"):
            return False
        stored = StoredFile(self.store.new_id("file-stub"), "batch", filename or "", data, now())
        self.store.files[stored.id] = stored
        self.store.stats.count("files_uploaded")
        if await self.held("uploaded"):
            return False
        return await send(self.writer, 200, stored.payload())

    async def file(self, file_id: str) -> bool:
        stored = self.store.files.get(file_id)
        if stored is None:
            return await self.error(404, f"No such File object: {file_id}")
        return await send(self.writer, 200, stored.payload())

    async def delete_file(self, file_id: str) -> bool:
        if self.store.files.pop(file_id, None) is None:
            return await self.error(404, f"No such File object: {file_id}")
        return await send(self.writer, 200, {"id": file_id, "object": "file", "deleted": True})

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
        metadata = body.get("metadata")
        refusal = _metadata_refusal(metadata)
        if refusal is not None:
            return await self.error(400, refusal)
        if await self.held("create"):
            return False
        config = self.server.config
        entries, errors = openai_entries(
            stored.data,
            config.batch_max_requests or OPENAI_MAX_REQUESTS,
            config.batch_max_bytes or OPENAI_MAX_BYTES,
        )
        batch = self._new_batch(entries, self.store.new_id("batch_stub"))
        batch.input_file_id = stored.id
        batch.errors = errors
        batch.metadata = dict(metadata) if metadata else None
        if await self.held("created"):
            return False
        return await send(self.writer, 200, openai_batch(batch))

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
        if await self.held("create"):
            return False
        batch = self._new_batch(entries, self.store.new_id("msgbatch_stub"))
        if await self.held("created"):
            return False
        return await send(self.writer, 200, anthropic_batch(batch, self.host))

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
        if await self.held("poll"):
            return False
        self.store.stats.count("polls")
        Progress(self.server, self.store, batch).poll()
        return await self._send_batch(batch)

    async def list_batches(self) -> bool:
        """This API's batches, newest first, a page at a time as the real APIs page them:
        OpenAI by ``after`` (the last id of the page before), Anthropic by ``after_id``
        (older) or ``before_id`` (newer), each page with ``has_more``."""
        query = parse_qs(self.request.path.partition("?")[2])
        default, largest = _PAGE[self.api]
        try:
            limit = int(query.get("limit", [default])[0])
        except ValueError:
            return await self.error(400, "limit: an integer is required")
        if not 1 <= limit <= largest:
            return await self.error(400, f"limit: from 1 to {largest}")
        batches = [b for b in reversed(self.store.batches.values()) if b.api == self.api]
        ids = [b.id for b in batches]
        after = query.get("after" if self.api == "openai" else "after_id", [None])[0]
        before = query.get("before_id", [None])[0] if self.api == "anthropic" else None
        for cursor in (after, before):
            if cursor is not None and cursor not in ids:
                return await self.error(400, f"no batch {cursor!r} to page from")
        if after is not None:
            batches = batches[ids.index(after) + 1 :]
            page = batches[:limit]
        elif before is not None:
            batches = batches[: ids.index(before)]
            page = batches[-limit:]
        else:
            page = batches[:limit]
        has_more = len(batches) > len(page)
        self.store.stats.count("lists")
        if self.api == "openai":
            data = [openai_batch(b) for b in page]
            payload: dict[str, Any] = {"object": "list", "data": data, "has_more": has_more}
        else:
            data = [anthropic_batch(b, self.host) for b in page]
            payload = {"data": data, "has_more": has_more}
        payload["first_id"] = page[0].id if page else None
        payload["last_id"] = page[-1].id if page else None
        return await send(self.writer, 200, payload)

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
        return await send(self.writer, 200, payload)

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


def _metadata_refusal(metadata: object) -> str | None:
    """What the OpenAI API says of a batch's ``metadata`` it refuses (None: accepted)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        return "metadata: an object of string keys and values is required"
    if len(metadata) > _METADATA_PAIRS:
        return f"metadata: at most {_METADATA_PAIRS} pairs"
    for key, value in metadata.items():
        if not isinstance(value, str) or len(key) > _METADATA_KEY or len(value) > _METADATA_VALUE:
            return (
                f"metadata.{key}: keys of at most {_METADATA_KEY} characters, string values "
                f"of at most {_METADATA_VALUE}"
            )
    return None
