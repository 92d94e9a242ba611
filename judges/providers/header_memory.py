"""Which endpoints answered without rate-limit headers, as earlier runs found.

Under header pacing a judge's first call goes alone, and the others wait for what its
answer's headers say of the budgets: a whole round trip with one call in flight. A local
model server (vLLM, Ollama, llama.cpp) sends no such headers, and paying that round at
every run bought nothing: here a run notes what the first answer of each endpoint said,
and a later run on an endpoint that sent none lets every call go at once. If it has begun
to send them since, the first answers' headers pace the calls after them as usual, and the
next run waits for the first answer again.

Kept in ``rate-limit-headers.json`` in the user's cache folder, under a hash of the
endpoint (its base URL may hold credentials).
"""

from __future__ import annotations

import hashlib
import threading

from juryflow.judges.providers.user_cache import read_cache_file, write_cache_file

FILE_NAME = "rate-limit-headers.json"
FORMAT = 1

_lock = threading.Lock()


def _key(endpoint: str) -> str:
    return hashlib.sha256(endpoint.encode()).hexdigest()


def sent_none_before(endpoint: str) -> bool:
    """Whether the last run that heard from ``endpoint`` got answers without budgets."""
    found = read_cache_file(FILE_NAME, FORMAT).get("endpoints", {})
    return isinstance(found, dict) and found.get(_key(endpoint)) is False


def remember(endpoint: str, sends_headers: bool) -> None:
    """Note what ``endpoint``'s answers carry, for the next run."""
    with _lock:  # two judges' limiters may learn at once
        data = read_cache_file(FILE_NAME, FORMAT)
        found = data.get("endpoints")
        endpoints = found if isinstance(found, dict) else {}
        if endpoints.get(_key(endpoint)) is sends_headers:
            return
        endpoints[_key(endpoint)] = sends_headers
        write_cache_file(FILE_NAME, FORMAT, {"endpoints": endpoints})
