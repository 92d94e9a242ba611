"""Find a judge's API key: its environment variable, then a Prefect Secret block.

Keys are returned to the caller only; they are never logged, stored in a record, or put
in an exception message.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from judges.panel import JudgeSpec
from judges.providers.base import MissingKeyError

log = logging.getLogger(__name__)

PLACEHOLDER_KEY = "not-needed"
"""Sent to OpenAI-compatible local servers that ignore the key but whose SDK wants one."""


def resolve_api_key(spec: JudgeSpec) -> str | None:
    """The key ``spec`` should call its provider with; None for an offline judge.

    For an OpenAI-compatible ``base_url`` without an explicit ``api_key_env`` the key is a
    placeholder: local servers need none, and falling back to OPENAI_API_KEY would hand the
    real OpenAI key to whatever server ``base_url`` names.
    """
    variable = spec.key_env
    if variable is None:
        return None
    uses_default_variable = spec.api_key_env is None
    local_openai = spec.provider == "openai" and spec.base_url is not None

    if not (local_openai and uses_default_variable):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    if spec.api_key_secret:
        secret = _secret(spec, variable)
        if secret:
            return secret
    if local_openai and uses_default_variable:
        return PLACEHOLDER_KEY
    raise MissingKeyError(spec.id, variable, spec.api_key_secret)


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
