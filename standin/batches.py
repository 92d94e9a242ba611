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
batch at the next poll with the unprocessed requests canceled. ``batch_api=False`` answers
404 on every batch route, as vLLM or Ollama do. Counters (``/_stats`` under ``batches``):
files uploaded, batches created, batch requests answered (total and per model), polls,
result downloads and cancels.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import random
import re
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from juryflow.standin.server import (
    FAULTS,
    StubServer,
    _Request,
    _send,
    anthropic_message,
    error_body,
    make_answer,
    openai_completion,
    parse_model,
    prompt_of,
    request_kind,
)

Api = Literal["openai", "anthropic"]
OutcomeKind = Literal["succeeded", "errored", "expired", "canceled"]

OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200 * 1000 * 1000
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256 * 1000 * 1000
_CHAT_ENDPOINT = "/v1/chat/completions"
_WINDOW_SECONDS = 24 * 3600
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Where a batch request is counted in the server's request stats (by_path).
_STATS_PATH: dict[Api, str] = {
    "openai": "batch /v1/chat/completions",
    "anthropic": "batch /v1/messages",
}
_NOT_RUN_EXPIRED = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}
_NOT_RUN_CANCELED = {
    "code": "batch_cancelled",
    "message": "This request was not executed because the batch was cancelled.",
}
_ANTHROPIC_STATES = {"running": "in_progress", "canceling": "canceling"}
_FAULT_STATUS = {"400": 400, "401": 401, "403": 403, "404": 404, "429": 429, "500": 500}


class BatchStats:
    """Batch counters, updated by the server thread and read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.counts: Counter[str] = Counter()
            self.by_model: Counter[str] = Counter()

    def count(self, name: str, model: str | None = None) -> None:
        with self._lock:
            self.counts[name] += 1
            if model is not None:
                self.by_model[model] += 1

    def get(self, name: str) -> int:
        with self._lock:
            return self.counts[name]

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            names = (
                "files_uploaded",
                "batches_created",
                "batch_requests",
                "polls",
                "results_fetched",
                "cancels",
            )
            return {
                **{name: self.counts[name] for name in names},
                "batch_requests_by_model": dict(self.by_model),
            }


@dataclass
class _File:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass(frozen=True)
class _Entry:
    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class _Outcome:
    kind: OutcomeKind
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    """The message or completion when succeeded; the API's error body when errored."""


@dataclass
class _Batch:
    api: Api
    id: str
    entries: list[_Entry]
    created_at: float
    started: float
    key: str
    """The key the batch was created with: a ``401`` fault quotes it, as real-time does."""
    version: str = ""
    input_file_id: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """Validation errors of an OpenAI input file: the batch fails at its first poll."""
    polls: int = 0
    outcomes: dict[str, _Outcome] = field(default_factory=dict)
    state: Literal["running", "canceling", "completed", "canceled", "expired", "failed"] = "running"
    cancel_at: float | None = None
    ended_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in ("completed", "canceled", "expired", "failed")


class BatchStore:
    """One server's files, batches and counters."""

    def __init__(self) -> None:
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self.stats = BatchStats()
        self._ids = itertools.count(1)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"


_STORES: weakref.WeakKeyDictionary[StubServer, BatchStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def store_of(server: StubServer) -> BatchStore:
    # Kept beside the server rather than in it, so the server needs only its routes.
    with _STORES_LOCK:
        store = _STORES.get(server)
        if store is None:
            store = _STORES[server] = BatchStore()
        return store


def stats_of(server: StubServer) -> BatchStats:
    """The batch counters of ``server`` (also in ``GET /_stats`` under ``batches``)."""
    return store_of(server).stats


def is_batch_route(path: str) -> bool:
    return path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches"))


# --- routes --------------------------------------------------------------------------------


async def handle(server: StubServer, request: _Request, writer: asyncio.StreamWriter) -> bool:
    """Answer one request on a batch route (see :func:`is_batch_route`)."""
    path = request.path.split("?", 1)[0].rstrip("/")
    api: Api = "anthropic" if path.startswith("/v1/messages/batches") else "openai"
    if not server.config.batch_api:
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
        fields = _multipart(self.request)
        if fields is None or "file" not in fields:
            return await self.error(400, "expected multipart/form-data with a 'file' field")
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose != "batch":
            return await self.error(400, f"purpose {purpose!r}: this stand-in stores batch files")
        filename, data = fields["file"]
        stored = _File(self.store.new_id("file-stub"), "batch", filename or "", data, _now())
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
        return await _send_bytes(self.writer, stored.data)

    # --- creating batches ---

    async def create_openai_batch(self) -> bool:
        body = self.json_body()
        if body is None:
            return await self.error(400, "body is not a JSON object")
        endpoint = body.get("endpoint")
        if endpoint != _CHAT_ENDPOINT:
            return await self.error(
                400, f"endpoint {endpoint!r}: this stand-in batches /v1/chat/completions"
            )
        if body.get("completion_window") != "24h":
            return await self.error(400, "completion_window must be '24h'")
        stored = self.store.files.get(str(body.get("input_file_id", "")))
        if stored is None or stored.purpose != "batch":
            return await self.error(404, f"No such File object: {body.get('input_file_id')}")
        config = self.server.config
        entries, errors = _openai_entries(
            stored.data,
            config.batch_max_requests or OPENAI_MAX_REQUESTS,
            config.batch_max_bytes or OPENAI_MAX_BYTES,
        )
        batch = self._new_batch(entries, self.store.new_id("batch_stub"))
        batch.input_file_id = stored.id
        batch.errors = errors
        return await _send(self.writer, 200, _openai_batch(batch))

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
        entries: list[_Entry] = []
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
            entries.append(_Entry(custom_id, params))
        batch = self._new_batch(entries, self.store.new_id("msgbatch_stub"))
        return await _send(self.writer, 200, self._anthropic_batch(batch))

    def _new_batch(self, entries: list[_Entry], batch_id: str) -> _Batch:
        headers = self.request.headers
        key = headers.get("x-api-key") or headers.get("authorization", "")
        batch = _Batch(
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

    def _batch(self, batch_id: str) -> _Batch | None:
        batch = self.store.batches.get(batch_id)
        return batch if batch is not None and batch.api == self.api else None

    async def retrieve(self, batch_id: str) -> bool:
        batch = self._batch(batch_id)
        if batch is None:
            return await self.error(404, f"batch {batch_id!r} not found")
        self.store.stats.count("polls")
        _Progress(self.server, self.store, batch).poll()
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

    async def _send_batch(self, batch: _Batch) -> bool:
        payload = _openai_batch(batch) if self.api == "openai" else self._anthropic_batch(batch)
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
                "result": _anthropic_result(batch.outcomes[entry.custom_id]),
            }
            for entry in batch.entries
        ]
        return await _send_bytes(self.writer, _jsonl(lines))

    def _anthropic_batch(self, batch: _Batch) -> dict[str, Any]:
        counts = Counter(outcome.kind for outcome in batch.outcomes.values())
        ended = batch.ended
        host = self.request.headers.get("host", "127.0.0.1")
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else _ANTHROPIC_STATES[batch.state],
            # Like the real API: requests count as processing until the whole batch ends.
            "request_counts": {
                "processing": 0 if ended else len(batch.entries),
                "succeeded": counts["succeeded"] if ended else 0,
                "errored": counts["errored"] if ended else 0,
                "canceled": counts["canceled"] if ended else 0,
                "expired": counts["expired"] if ended else 0,
            },
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.created_at + _WINDOW_SECONDS),
            "ended_at": _rfc3339(batch.ended_at) if batch.ended_at is not None else None,
            "cancel_initiated_at": _rfc3339(batch.cancel_at) if batch.cancel_at else None,
            "archived_at": None,
            "results_url": (
                f"http://{host}/v1/messages/batches/{batch.id}/results" if ended else None
            ),
        }


# --- progress ------------------------------------------------------------------------------


class _Progress:
    """Moves a batch on by one poll: processes the requests due, ends it when it is time."""

    def __init__(self, server: StubServer, store: BatchStore, batch: _Batch) -> None:
        self.server = server
        self.store = store
        self.batch = batch
        self.config = server.config

    def poll(self) -> None:
        batch = self.batch
        if batch.ended:
            return
        batch.polls += 1
        if batch.errors:
            self._end("failed")
            return
        if batch.state == "canceling":
            self._end("canceled")
            return
        steps = max(1, self.config.batch_polls_to_finish)
        step = self._step(steps)
        expire = self.config.batch_polls_to_expire
        if expire is not None and step >= expire:
            self._end("expired")
            return
        if self.config.batch_never_finishes:
            return
        total = len(batch.entries)
        due = total if step >= steps - 1 else total * step // (steps - 1)
        for entry in batch.entries[len(batch.outcomes) : due]:
            batch.outcomes[entry.custom_id] = self._answer(entry)
        if step >= steps:
            self._end("completed")

    def _step(self, steps: int) -> int:
        seconds = self.config.batch_seconds_to_finish
        if seconds is None:
            return self.batch.polls
        if seconds <= 0:
            return steps
        return math.floor((time.monotonic() - self.batch.started) / seconds * steps)

    def _end(self, state: Literal["completed", "canceled", "expired", "failed"]) -> None:
        batch = self.batch
        unprocessed: OutcomeKind = "canceled" if state == "canceled" else "expired"
        if state != "failed":
            for entry in batch.entries:
                batch.outcomes.setdefault(entry.custom_id, _Outcome(unprocessed))
        batch.state = state
        batch.ended_at = time.time()
        if batch.api == "openai" and state != "failed":
            self._openai_files()

    def _openai_files(self) -> None:
        batch = self.batch
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for number, entry in enumerate(batch.entries, 1):
            outcome = batch.outcomes[entry.custom_id]
            line = _openai_line(f"batch_req_{batch.id}_{number}", entry.custom_id, outcome)
            (output if outcome.kind == "succeeded" else errors).append(line)
        for lines, attribute in ((output, "output_file_id"), (errors, "error_file_id")):
            if lines:
                stored = _File(
                    self.store.new_id("file-stub"), "batch_output", "", _jsonl(lines), _now()
                )
                self.store.files[stored.id] = stored
                setattr(batch, attribute, stored.id)

    def _answer(self, entry: _Entry) -> _Outcome:
        """One request of the batch, answered as the real-time endpoint would answer it."""
        server, api, body = self.server, self.batch.api, entry.body
        model = str(body.get("model", ""))
        number = server.stats._start(_STATS_PATH[api], model)
        self.store.stats.count("batch_requests", model)
        outcome = self._outcome(api, body, model, number)
        server.stats._finish(outcome.kind if outcome.kind != "errored" else str(outcome.status))
        return outcome

    def _outcome(self, api: Api, body: dict[str, Any], model: str, number: int) -> _Outcome:
        config, server = self.config, self.server
        try:
            rule = parse_model(model, config.default_answer)
        except ValueError as error:
            return _errored(api, 400, str(error))
        step = server._next_step(model)
        fault: str | None
        if step is not None:
            fault = step if step in FAULTS else None
        else:
            fault = rule.fault_for(number - 1) or server._random_fault()
        if fault in ("hang", "drop"):
            return _Outcome("expired")
        if fault == "401":
            return _errored(api, 401, f"stub: Incorrect API key provided: {self.batch.key}")
        if fault in _FAULT_STATUS:
            status = _FAULT_STATUS[fault]
            return _errored(api, status, f"stub: batch request failed with HTTP {status}")
        if fault == "echo":
            return _errored(api, 400, f"stub: cannot route batch {self.batch.id}")
        if api == "anthropic" and self.batch.version >= "2026-10-21":
            sampling = [p for p in ("temperature", "top_p", "top_k") if p in body]
            if sampling:
                return _errored(api, 400, f"{sampling[0]}: Extra inputs are not permitted")
        prompt = prompt_of(body)
        server.stats._prompt(prompt)
        kind = request_kind(body, prompt)
        # The real-time endpoints' seed: a batch answers exactly what a real-time call would.
        rng = random.Random(hashlib.sha256(f"{config.seed}|{model}|{prompt}".encode()).digest())
        try:
            answer = make_answer(
                "broken" if fault == "malformed" else step or rule.answer,
                kind,
                prompt,
                rng,
                config.gold,
                config.seed,
                model,
            )
        except ValueError as error:
            return _errored(api, 400, str(error))
        build = anthropic_message if api == "anthropic" else openai_completion
        return _Outcome("succeeded", 200, build(body, answer, rule, prompt, number))


def _errored(api: Api, status: int, message: str) -> _Outcome:
    return _Outcome("errored", status, error_body(api, status, message))


# --- wire formats --------------------------------------------------------------------------


def _openai_entries(
    data: bytes, max_requests: int, max_bytes: int
) -> tuple[list[_Entry], list[dict[str, Any]]]:
    """The requests of an input file, and what the real API's validation would say of it."""
    entries: list[_Entry] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()

    def fail(code: str, message: str, line: int | None = None) -> None:
        errors.append({"code": code, "message": message, "param": None, "line": line})

    if len(data) > max_bytes:
        fail("file_too_large", f"input file of {len(data):,} bytes exceeds {max_bytes:,} bytes")
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            line = json.loads(raw)
        except ValueError:
            fail("invalid_json_line", "this line is not valid JSON", number)
            continue
        line = line if isinstance(line, dict) else {}
        custom_id, body = line.get("custom_id"), line.get("body")
        if not isinstance(custom_id, str) or not custom_id:
            fail("missing_required_parameter", "custom_id is required", number)
        elif custom_id in seen:
            fail("duplicate_custom_id", f"custom_id {custom_id!r} is not unique", number)
        elif line.get("method") != "POST" or line.get("url") != _CHAT_ENDPOINT:
            fail("invalid_url", f"each line must POST to {_CHAT_ENDPOINT}", number)
        elif not isinstance(body, dict) or not body.get("model"):
            fail("missing_required_parameter", "body.model is required", number)
        else:
            seen.add(custom_id)
            models.add(str(body["model"]))
            entries.append(_Entry(custom_id, body))
    if len(models) > 1:
        fail("mismatched_model", f"one model per batch, found {len(models)}: {sorted(models)}")
    if len(entries) > max_requests:
        fail("too_many_requests", f"{len(entries):,} requests exceed {max_requests:,} per batch")
    if not entries and not errors:
        fail("empty_file", "the input file has no requests")
    return entries, errors


def _openai_batch(batch: _Batch) -> dict[str, Any]:
    state = batch.state
    status = {
        "completed": "completed",
        "canceled": "cancelled",
        "expired": "expired",
        "failed": "failed",
        "canceling": "cancelling",
    }.get(state)
    total = len(batch.entries)
    if status is None:
        if batch.polls == 0:
            status = "validating"
        elif len(batch.outcomes) == total:
            status = "finalizing"
        else:
            status = "in_progress"
    created = int(batch.created_at)
    ended = int(batch.ended_at) if batch.ended_at is not None else None
    succeeded = sum(o.kind == "succeeded" for o in batch.outcomes.values())
    failed = sum(o.kind == "errored" for o in batch.outcomes.values())
    usage = [o.body.get("usage") or {} for o in batch.outcomes.values() if o.kind == "succeeded"]
    input_tokens = sum(int(u.get("prompt_tokens", 0)) for u in usage)
    output_tokens = sum(int(u.get("completion_tokens", 0)) for u in usage)
    models = {str(entry.body.get("model", "")) for entry in batch.entries}
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": _CHAT_ENDPOINT,
        "model": models.pop() if len(models) == 1 else None,
        "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": created,
        "in_progress_at": created if batch.polls and not batch.errors else None,
        "expires_at": created + _WINDOW_SECONDS,
        "finalizing_at": ended if status == "completed" else None,
        "completed_at": ended if status == "completed" else None,
        "failed_at": ended if status == "failed" else None,
        "expired_at": ended if status == "expired" else None,
        "cancelling_at": int(batch.cancel_at) if batch.cancel_at else None,
        "cancelled_at": ended if status == "cancelled" else None,
        "request_counts": {"total": total, "completed": succeeded, "failed": failed},
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
        "metadata": None,
    }


def _openai_line(line_id: str, custom_id: str, outcome: _Outcome) -> dict[str, Any]:
    if outcome.kind in ("succeeded", "errored"):
        response = {
            "status_code": outcome.status,
            "request_id": f"req_{line_id}",
            "body": outcome.body,
        }
        return {"id": line_id, "custom_id": custom_id, "response": response, "error": None}
    error = _NOT_RUN_EXPIRED if outcome.kind == "expired" else _NOT_RUN_CANCELED
    return {"id": line_id, "custom_id": custom_id, "response": None, "error": error}


def _anthropic_result(outcome: _Outcome) -> dict[str, Any]:
    if outcome.kind == "succeeded":
        return {"type": "succeeded", "message": outcome.body}
    if outcome.kind == "errored":
        return {"type": "errored", "error": outcome.body}
    return {"type": outcome.kind}


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")


def _now() -> int:
    return int(time.time())


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _multipart(request: _Request) -> dict[str, tuple[str | None, bytes]] | None:
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    content_type = request.headers.get("content-type", "")
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not content_type.startswith("multipart/form-data") or match is None:
        return None
    delimiter = b"--" + match.group(1).encode("latin-1")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in request.body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        disposition = next(
            (
                line
                for line in head.decode("utf-8", "replace").split("\r\n")
                if line.lower().startswith("content-disposition")
            ),
            "",
        )
        name = re.search(r'\bname="([^"]*)"', disposition)
        filename = re.search(r'\bfilename="([^"]*)"', disposition)
        if name is not None:
            fields[name.group(1)] = (
                filename.group(1) if filename else None,
                content.removesuffix(b"\r\n"),
            )
    return fields


async def _send_bytes(writer: asyncio.StreamWriter, data: bytes) -> bool:
    lines = [
        "HTTP/1.1 200 OK",
        "content-type: application/octet-stream",
        f"content-length: {len(data)}",
        "connection: keep-alive",
        f"request-id: req_stub_{time.monotonic_ns()}",
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
    await writer.drain()
    return True
