"""The known name closest to a mistyped one: the "did you mean" of every refusal of a
name a user typed (panel keys, judge ids, rule names, column names, prompts, providers)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: object, known: Iterable[str]) -> str | None:
    """The known name most like ``name`` (difflib's ratio at least 0.6), or None.

    >>> closest("meidan", ["mean", "median", "trimmed_mean"])
    'median'
    >>> closest("Response", ["id", "response", "source"])
    'response'
    >>> closest("zzz", ["median"]) is None
    True
    """
    found = difflib.get_close_matches(str(name), list(known), n=1)
    return found[0] if found else None


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string.

    >>> did_you_mean("at_leest", ["at_least", "majority"])
    " (did you mean 'at_least'?)"
    >>> did_you_mean("zzz", ["majority"])
    ''
    """
    found = closest(name, known)
    return f" (did you mean {found!r}?)" if found else ""
