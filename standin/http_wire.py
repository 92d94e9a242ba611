"""The stand-in's HTTP/1.1: requests read off a stream, answers written to it, the APIs'
error bodies. Shared by the server and its batch routes."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    kinds = {
        400: ("invalid_request_error", "invalid_request_error"),
        401: ("authentication_error", "invalid_api_key"),
        403: ("permission_error", "permission_denied"),
        404: ("not_found_error", "not_found"),
        429: ("rate_limit_error", "rate_limit_exceeded"),
        500: ("api_error", "server_error"),
    }
    anthropic_type, openai_code = kinds.get(status, ("api_error", "error"))
    if api == "anthropic":
        return {"type": "error", "error": {"type": anthropic_type, "message": message}}
    return {
        "error": {"message": message, "type": anthropic_type, "param": None, "code": openai_code}
    }


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One model request as the stand-in received it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) < 2:
        return None
    method, path = parts[0].upper(), parts[1]
    headers: dict[str, str] = {}
    for _ in range(200):
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
    return Request(method, path, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    for _ in range(1_000_000):
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            break
        chunks.append(await reader.readexactly(size))
        await reader.readline()
    return b"".join(chunks)


async def send(
    writer: asyncio.StreamWriter,
    status: int,
    payload: dict[str, Any] | bytes,
    headers: dict[str, str] | None = None,
) -> bool:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: keep-alive",
        f"request-id: req_stub_{time.monotonic_ns()}",
    ]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()
    return True
