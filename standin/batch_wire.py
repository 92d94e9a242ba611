"""The batch APIs' wire formats: input files read, batch objects and result lines written."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from juryflow.standin.batch_state import Batch, Entry, Outcome
from juryflow.standin.http_wire import Request

CHAT_ENDPOINT = "/v1/chat/completions"
WINDOW_SECONDS = 24 * 3600
NOT_RUN_EXPIRED = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}
NOT_RUN_CANCELED = {
    "code": "batch_cancelled",
    "message": "This request was not executed because the batch was cancelled.",
}
_ANTHROPIC_STATES = {"running": "in_progress", "canceling": "canceling"}


def openai_entries(
    data: bytes, max_requests: int, max_bytes: int
) -> tuple[list[Entry], list[dict[str, Any]]]:
    """The requests of an input file, and what the real API's validation would say of it."""
    entries: list[Entry] = []
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
        elif line.get("method") != "POST" or line.get("url") != CHAT_ENDPOINT:
            fail("invalid_url", f"each line must POST to {CHAT_ENDPOINT}", number)
        elif not isinstance(body, dict) or not body.get("model"):
            fail("missing_required_parameter", "body.model is required", number)
        else:
            seen.add(custom_id)
            models.add(str(body["model"]))
            entries.append(Entry(custom_id, body))
    if len(models) > 1:
        fail("mismatched_model", f"one model per batch, found {len(models)}: {sorted(models)}")
    if len(entries) > max_requests:
        fail("too_many_requests", f"{len(entries):,} requests exceed {max_requests:,} per batch")
    if not entries and not errors:
        fail("empty_file", "the input file has no requests")
    return entries, errors


def openai_batch(batch: Batch) -> dict[str, Any]:
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
        "endpoint": CHAT_ENDPOINT,
        "model": models.pop() if len(models) == 1 else None,
        "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": created,
        "in_progress_at": created if batch.polls and not batch.errors else None,
        "expires_at": created + WINDOW_SECONDS,
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
        "metadata": batch.metadata,
    }


def openai_line(line_id: str, custom_id: str, outcome: Outcome) -> dict[str, Any]:
    if outcome.kind in ("succeeded", "errored"):
        response = {
            "status_code": outcome.status,
            "request_id": f"req_{line_id}",
            "body": outcome.body,
        }
        return {"id": line_id, "custom_id": custom_id, "response": response, "error": None}
    error = NOT_RUN_EXPIRED if outcome.kind == "expired" else NOT_RUN_CANCELED
    return {"id": line_id, "custom_id": custom_id, "response": None, "error": error}


def anthropic_result(outcome: Outcome) -> dict[str, Any]:
    if outcome.kind == "succeeded":
        return {"type": "succeeded", "message": outcome.body}
    if outcome.kind == "errored":
        return {"type": "errored", "error": outcome.body}
    return {"type": outcome.kind}


def anthropic_batch(batch: Batch, host: str) -> dict[str, Any]:
    """A Message Batch object; its results URL on ``host``, as the client reached us."""
    counts = Counter(outcome.kind for outcome in batch.outcomes.values())
    ended = batch.ended
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
        "created_at": rfc3339(batch.created_at),
        "expires_at": rfc3339(batch.created_at + WINDOW_SECONDS),
        "ended_at": rfc3339(batch.ended_at) if batch.ended_at is not None else None,
        "cancel_initiated_at": rfc3339(batch.cancel_at) if batch.cancel_at else None,
        "archived_at": None,
        "results_url": (f"http://{host}/v1/messages/batches/{batch.id}/results" if ended else None),
    }


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")


def now() -> int:
    return int(time.time())


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def multipart(request: Request) -> dict[str, tuple[str | None, bytes]] | None:
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


async def send_bytes(writer: asyncio.StreamWriter, data: bytes) -> bool:
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
