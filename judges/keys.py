"""Find a judge's API key: its environment variable, then a Prefect Secret block.

Keys are returned to the caller only; they are never logged, stored in a record, or put
in an exception message.
"""

from __future__ import annotations

import logging
import os
from typing import Any
from urllib.parse import urlsplit

from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import PLACEHOLDER_KEY, MissingKeyError
from juryflow.judges.providers.registry import registered_provider
from juryflow.judges.redact import MASK, remember_secret

log = logging.getLogger(__name__)

__all__ = [
    "PLACEHOLDER_KEY",
    "MaskedCredentialsError",
    "resolve_api_key",
    "uses_default_server",
]


class MaskedCredentialsError(RuntimeError):
    """A judge rebuilt from a stored run whose credentials were masked when it was stored."""


def resolve_api_key(spec: JudgeSpec) -> str | None:
    """The key ``spec`` should call its provider with; None for an offline judge.

    A judge whose ``base_url`` names any other server than its provider's own gets the
    provider's variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) only if the panel names it with
    ``api_key_env``: otherwise the real key would travel to whatever server ``base_url``
    names. Such a judge sends a placeholder instead (local servers need no key), or the
    key of the ``api_key_env`` / ``api_key_secret`` the panel does name.
    """
    variable = spec.key_env
    if variable is None:
        return None
    _refuse_masked(spec)
    remember_secret(*spec.credentials())
    default_key_allowed = spec.api_key_env is not None or uses_default_server(spec)

    if default_key_allowed:
        value = os.environ.get(variable, "").strip()
        if value:
            remember_secret(value)
            return value
    if spec.api_key_secret:
        secret = _secret(spec, variable)
        if secret:
            remember_secret(secret)
            return secret
    if not default_key_allowed:
        return PLACEHOLDER_KEY
    raise MissingKeyError(spec.id, variable, spec.api_key_secret)


def _refuse_masked(spec: JudgeSpec) -> None:
    # runs.panel keeps header names and URLs with their credentials masked; a judge rebuilt
    # from it (--resume) would send "***" as a password and "<redacted>" as a header.
    masked = [name for name, value in spec.headers.items() if value == "<redacted>"]
    if spec.base_url is not None and MASK in spec.base_url:
        masked.insert(0, "base_url")
    if masked:
        raise MaskedCredentialsError(
            f"judge {spec.id!r}: its {', '.join(masked)} held credentials, which juryflow never "
            "stores, so the run cannot be continued from the store; start a new run with "
            "the panel file (its scored answers are reused from the cache)"
        )


def uses_default_server(spec: JudgeSpec) -> bool:
    """Whether ``spec`` calls its provider's own API (no base_url, or exactly that host)."""
    if spec.base_url is None:
        return True
    try:
        parts = urlsplit(spec.base_url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and parts.hostname == registered_provider(spec.provider).default_host
        and port in (None, 443)
        and not parts.username
        and not parts.password
    )


def _secret(spec: JudgeSpec, variable: str) -> str | None:
    name = spec.api_key_secret
    assert name is not None
    try:
        from prefect.blocks.system import Secret

        # _sync: this runs from both sync code and inside event loops; the key is needed now.
        block: Any = Secret.load(name, _sync=True)  # type: ignore[call-arg]
        value = block.get()
    except Exception as error:
        # Only the error type: a block-loading failure message could quote the value.
        log.warning(
            "judge %r: could not load Prefect Secret block %r (%s)",
            spec.id,
            name,
            type(error).__name__,
        )
        raise MissingKeyError(spec.id, variable, name) from None
    text = str(value).strip() if value is not None else ""
    return text or None
