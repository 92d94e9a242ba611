"""Requests the SDK built in an earlier run, kept on disk, so that a run's calls need no SDK.

The lean call path (:mod:`~juryflow.judges.providers.lean_post`) has the SDK build and send
the first request of each (path, timeout) and replays it for the rest. Building that first
request means importing the SDK: about a second of CPU for ``anthropic`` and a third for
``openai``, paid before a run's first call. Yet for one SDK release, Python, platform,
endpoint and set of headers the request the SDK builds is always the same but for the
body and the secrets it carries. So a recorded request is kept in
``$JURYFLOW_CACHE_DIR/request-templates.json`` (default ``$XDG_CACHE_HOME/juryflow``, else
``~/.cache/juryflow``) under a key of everything it depends on, with every secret of the
client (the key, key-like headers and URL parts: :func:`~juryflow.judges.redact`'s) replaced
by a numbered placeholder; a later run fills in its own secrets and sends it on an aiohttp
session made as the SDK's transport makes it. The SDK is imported only when an answer is an
error, to build the SDK's own exception from it, so reasons stay what they were.

Kept only where nothing outside the key could change the request: a plain ``http://``
endpoint (a local model server; TLS settings are not part of the key), no proxy in the
environment, and no variable of the SDK's own (``ANTHROPIC_*`` / ``OPENAI_*``) but its key
and base URL. Nothing secret is written: the file is checked for every secret before it is.
``tests/test_stored_requests.py`` checks that the bytes on the wire are the SDK's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from typing import Any

from juryflow.judges.providers.lean_post import RequestTemplate
from juryflow.judges.providers.user_cache import cache_dir, read_cache_file, write_cache_file

__all__ = ["FILE_NAME", "cache_dir", "key_of", "lookup", "new_session", "remember", "usable"]

FILE_NAME = "request-templates.json"
FORMAT = 1
"""Bumped when what is stored, or how it is keyed, changes: older entries are not read."""

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_OWN_VARIABLES = ("_API_KEY", "_BASE_URL", "_LOG")
"""The SDK's variables a stored request may be used beside: the key we pass explicitly,
the base URL (part of the key) and logging."""


def usable(sdk_name: str, base_url: str | None) -> bool:
    """Whether a stored request can stand for what the SDK would build here and now."""
    if not base_url or not base_url.startswith("http://") or "@" in base_url.split("/")[2]:
        return False
    if any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARIABLES):
        return False
    prefix = sdk_name.upper() + "_"
    return not any(
        name.startswith(prefix) and not name.endswith(_OWN_VARIABLES) and value
        for name, value in os.environ.items()
    )


@functools.cache
def _versions(sdk_name: str) -> str:
    # The SDK and the HTTP libraries under it: their releases make the headers.
    found = []
    for package in (sdk_name, "httpx", "httpx2", "aiohttp"):
        try:
            found.append(f"{package}={metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package}=-")
    return ",".join(found)


def _mask(text: str, secrets: Sequence[str]) -> str:
    # Longest first, so that a secret holding another is replaced whole.
    for index in sorted(range(len(secrets)), key=lambda i: -len(secrets[i])):
        text = text.replace(secrets[index], f"\x00{index}\x00")
    return text


def _unmask(text: str, secrets: Sequence[str]) -> str:
    for index, secret in enumerate(secrets):
        text = text.replace(f"\x00{index}\x00", secret)
    return text


def key_of(
    sdk_name: str,
    *,
    api_key: str,
    base_url: str,
    headers: Mapping[str, str],
    path: str,
    timeout: float,
    secrets: Sequence[str],
) -> str:
    """Everything the SDK's request for this call depends on but its body and secrets."""
    material = json.dumps(
        [
            FORMAT,
            _versions(sdk_name),
            sys.version,
            platform.platform(),
            platform.machine(),
            _mask(api_key, secrets),
            _mask(base_url, secrets),
            sorted((name, _mask(value, secrets)) for name, value in headers.items()),
            path,
            repr(timeout),
            len(secrets),
            os.environ.get(sdk_name.upper() + "_BASE_URL", ""),
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()


def _stored(template: RequestTemplate, secrets: Sequence[str]) -> dict[str, Any] | None:
    """The template as written to disk, or None when it cannot be written without a secret."""
    entry = {
        "method": template.method,
        "url": _mask(template.url, secrets),
        "headers": [[name, _mask(value, secrets)] for name, value in template.headers],
        "timeout": dict(template.timeout),
    }
    text = json.dumps(entry)
    if any(secret in text for secret in secrets):
        return None
    if _filled(entry, secrets) != replace(template, request=None, timeout=dict(template.timeout)):
        return None  # a placeholder would not give the same request back
    return entry


def _filled(entry: Mapping[str, Any], secrets: Sequence[str]) -> RequestTemplate:
    return RequestTemplate(
        method=str(entry["method"]),
        url=_unmask(str(entry["url"]), secrets),
        headers=tuple((str(n), _unmask(str(v), secrets)) for n, v in entry["headers"]),
        timeout=dict(entry["timeout"]),
    )


def _read_all() -> dict[str, Any]:
    # No file yet, or one another version wrote: the SDK records anew.
    return read_cache_file(FILE_NAME, FORMAT)


def lookup(key: str, secrets: Sequence[str]) -> RequestTemplate | None:
    """The stored request of ``key`` with these secrets filled in, or None."""
    entry = _read_all().get("requests", {}).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        return _filled(entry, secrets)
    except (KeyError, TypeError, ValueError):
        return None


def remember(key: str, template: RequestTemplate, secrets: Sequence[str]) -> None:
    """Keep ``template`` under ``key`` for later runs; silently not where it cannot be
    written (a read-only home: the next run records again)."""
    entry = _stored(template, secrets)
    if entry is None:
        return
    data = _read_all()
    found = data.get("requests")
    requests: dict[str, Any] = found if isinstance(found, dict) else {}
    if requests.get(key) == entry:
        return
    requests[key] = entry
    write_cache_file(FILE_NAME, FORMAT, {"requests": requests})


def new_session(connections: int) -> Any:
    """An aiohttp session as the SDKs' aiohttp transport makes one for an ``http://`` URL
    (its connector's limit and keep-alive; the pool sized as :func:`~juryflow.judges.
    providers.base.http_client` sizes the SDK's)."""
    import aiohttp

    connector = aiohttp.TCPConnector(keepalive_timeout=5.0, limit=connections)
    return aiohttp.ClientSession(connector=connector)
