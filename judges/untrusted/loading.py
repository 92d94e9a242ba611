"""JSON and YAML from outside juryflow, parsed within a nesting depth and a size.

Python's ``json`` and PyYAML parse nested lists and objects by recursion: JSON nested 1,200
deep stops ``json.loads`` with a RecursionError, which is not a ValueError, so every
``except ValueError`` around a parse let it through as a traceback (a judge's answer, a
server's response body, ``juryflow sql``'s parse tree); a YAML list 100,000 deep did the
same inside PyYAML. Just under the interpreter's limit is no better: whatever reads the
value next (``json.dumps``, a tree walk) recurses too, from a deeper stack.

So what comes from outside is parsed here: nesting past a limit is refused before the JSON
parser sees it (a linear scan of its brackets) or as the YAML composer reaches it, with
:class:`NestingError`; a document over its caller's size limit is refused unread with
:class:`DocumentTooLarge`. Both are ValueErrors whose message reads as the end of one line
("nested deeper than 100 levels"); the caller names the source.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

MAX_NESTING_DEPTH = 100
"""Deepest nesting of lists and objects accepted in JSON or YAML from outside (a judge's
answer, a provider's response body, a dataset row, a panel file). Real ones nest a few
levels (a spans answer 3, a Messages response with a tool call 5, a panel 4); Python's
parsers stop near 1,000 levels with a RecursionError, and the code that reads a parsed
value afterwards recurses as deep again, so the limit keeps well clear of that."""

_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
"""A JSON string, or an unclosed one to the end of the text: every match runs to its end
and is never rescanned, so removing them all is linear."""
_JSON_STRING_BYTES = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""An opening bracket as +1, a closing one as -1 (0xff read as a signed byte)."""
_SCAN_BLOCK = 1 << 20
"""Brackets summed per numpy pass: 8 MB of running depths at a time, whatever the text."""


class NestingError(ValueError):
    """JSON or YAML nested deeper than ``limit`` levels; not parsed."""

    def __init__(self, limit: int, line: int | None = None) -> None:
        where = f" (line {line})" if line is not None else ""
        super().__init__(f"nested deeper than {limit} levels{where}")
        self.limit = limit
        self.line = line


class DocumentTooLarge(ValueError):
    """A document over its caller's size limit; not parsed."""

    def __init__(self, size: int, limit: int, unit: str = "bytes") -> None:
        super().__init__(f"{size:,} {unit}, over the limit of {limit:,}")
        self.size = size
        self.limit = limit


def json_nesting_over(text: str | bytes, limit: int = MAX_NESTING_DEPTH) -> bool:
    """Whether the lists and objects of ``text`` nest deeper than ``limit``: its brackets
    outside strings, counted in linear time (for text that is not JSON, such as prose with
    JSON in it, the count of what would be JSON's nesting).

    Text with at most ``limit`` opening brackets in all (every real answer and row) is
    cleared by two counts; only longer runs of brackets are scanned.
    """
    if isinstance(text, str):
        if text.count("[") + text.count("{") <= limit:
            return False
        # Only the brackets matter: other characters, whatever they encode to, are dropped.
        outside = _JSON_STRING.sub("", text).encode("utf-8", "replace")
    else:
        if text.count(b"[") + text.count(b"{") <= limit:
            return False
        outside = _JSON_STRING_BYTES.sub(b"", text)
    brackets = outside.translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    import numpy as np  # only text with this many brackets pays for the import

    steps = np.frombuffer(brackets.translate(_STEPS), dtype=np.int8)
    depth = 0
    for start in range(0, len(steps), _SCAN_BLOCK):
        running = np.cumsum(steps[start : start + _SCAN_BLOCK], dtype=np.int64) + depth
        if int(running.max()) > limit:
            return True
        depth = int(running[-1])
    return False


def load_json(
    text: str | bytes, *, max_depth: int = MAX_NESTING_DEPTH, max_size: int | None = None
) -> Any:
    """``json.loads(text)``, refusing text over ``max_size`` characters (or bytes) with
    DocumentTooLarge and nesting past ``max_depth`` with NestingError; malformed JSON raises
    ``json.JSONDecodeError`` as ever (all three are ValueErrors)."""
    if max_size is not None and len(text) > max_size:
        unit = "characters" if isinstance(text, str) else "bytes"
        raise DocumentTooLarge(len(text), max_size, unit)
    if json_nesting_over(text, max_depth):
        raise NestingError(max_depth)
    return json.loads(text)


class _DepthLimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a list or mapping nested past ``max_depth`` as the
    composer (which recurses once per level) reaches it."""

    max_depth = MAX_NESTING_DEPTH

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)
        if self._depth >= self.max_depth:
            raise NestingError(self.max_depth, self.peek_event().start_mark.line + 1)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml(text: str, *, max_depth: int = MAX_NESTING_DEPTH, max_size: int | None = None) -> Any:
    """``yaml.safe_load(text)``, refusing text over ``max_size`` characters with
    DocumentTooLarge and nesting past ``max_depth`` with NestingError (with its line);
    malformed YAML raises ``yaml.YAMLError`` as ever."""
    if max_size is not None and len(text) > max_size:
        raise DocumentTooLarge(len(text), max_size, "characters")
    loader = type("_Loader", (_DepthLimitedLoader,), {"max_depth": max_depth})(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
