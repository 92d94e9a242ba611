"""An item's reference data as a reader wants it: structured values pretty-printed.

Data sets often carry the reference as the Python ``repr`` of a dict (single quotes,
``True``, one long line); read as a literal and printed as indented JSON it can be read
beside the judged text. Only literals are read (``ast.literal_eval`` runs no code); text
that is no literal, or too large or too deep to read safely, is shown as it is.
"""

from __future__ import annotations

import ast
import json
from typing import Any

MAX_LITERAL_CHARS = 200_000
"""Longer text is shown raw: parsing a literal costs memory in proportion to its size."""


def _jsonable(value: Any) -> Any:
    # sets, tuples and bytes are literals JSON has no word for: shown as lists and text
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [_jsonable(v) for v in items]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, complex):
        return str(value)
    return value


def _pretty(value: Any) -> str:
    return json.dumps(_jsonable(value), ensure_ascii=False, indent=2)


def _literal(text: str) -> Any | None:
    """The dict or list ``text`` spells as a Python or JSON literal, else None."""
    stripped = text.strip()
    if len(stripped) > MAX_LITERAL_CHARS or not stripped or stripped[0] not in "[{(":
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict | list | tuple) else None


def reference_text(value: Any) -> str:
    """A reference variable as text to show: a structured value (or text spelling one)
    indented, anything else as it is.

    >>> print(reference_text("{'name': 'Eatery', 'open': True, 'hours': {'Mon': '9-5'}}"))
    {
      "name": "Eatery",
      "open": true,
      "hours": {
        "Mon": "9-5"
      }
    }
    >>> reference_text("{'a': __import__('os')}")  # not a literal: shown as it is
    "{'a': __import__('os')}"
    >>> reference_text("Plain words.")
    'Plain words.'
    """
    if isinstance(value, str):
        parsed = _literal(value)
        return value if parsed is None else _pretty(parsed)
    try:
        return _pretty(value)
    except (TypeError, ValueError, RecursionError):
        return str(value)
