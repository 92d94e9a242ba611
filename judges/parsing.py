"""Parsing judge output into a score or a list of span strings, or a precise reason why not.

Accepted shapes, in order: an already-structured ``dict`` (tool-call / structured-output
arguments); the whole text as JSON; JSON inside a ```json fence; the first JSON object in
prose (scanned with ``json.JSONDecoder.raw_decode`` from each ``{``, preferring an object
that has the expected field, within a decoding budget linear in the text's length). A
score may be a JSON number or a numeric string ("0.6"), never a word ("high"). An object
nested deeper than ``MAX_NESTING_DEPTH`` is never used (with none other found, the reason
is "answer nested deeper than N levels"). Nothing here ever invents a grade: a failure
raises :class:`OutputParseError` and the caller records the judgment as unscored with its
reason.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from juryflow.judges.untrusted.loading import (
    MAX_NESTING_DEPTH,
    NestingError,
    json_nesting_over,
    load_json,
)
from juryflow.maths.records import PREFERENCE_SCORES, OutputKind

_FENCE_RE = re.compile(
    # Possessive: with plain quantifiers an unclosed fence followed by n spaces was tried
    # with every split of the spaces between the two [ \t]* (cubic: 13 s for 2,000 spaces);
    # giving some back never helps, the content takes anything but ```.
    r"```[ \t]*+(?:json|JSON)?+[ \t]*+\n?+(.*?)```",
    re.DOTALL,
)
_OBJECT_START = re.compile(r"\{(?=[ \t\n\r]*+[\"}])")
"""A '{' where an object can start: JSON whitespace, then a key or '}'. Any other '{' fails."""
_NOT_OBJECT_START = re.compile(r"\{(?![ \t\n\r]*+[\"}])")
_DECODER = json.JSONDecoder()
_WINDOW = 256
"""How much text after a '{' is decoded first, grown fourfold while a failure may be the
window's cut: a JSONDecodeError counts the lines before its position, so decoding each '{'
of a long text in the whole text is quadratic."""
_CUT_MARGIN = 16
"""A failure this close to a window's end (an unfinished literal, number, escape or
delimiter) may be the cut's doing."""
_DECODE_BUDGET = (8, 1_000_000)
"""The brace scan decodes at most 8 x the text's length + 1,000,000 characters in all. Each
'{' is decoded on its own, so nested objects are decoded again at every level: JSON nested
1,000 deep (the interpreter's limit) took 2 s per 100,000 characters. Real answers need a
few decodes; a text that exhausts this is judged on the objects found by then."""
_SHOWN = 60
"""How much of an offending value an error message quotes."""


class OutputParseError(ValueError):
    """Judge output that cannot be read; ``reason`` says what is wrong, for humans."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    score: float | None
    spans: tuple[str, ...] = ()
    reasoning: str | None = None


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _describe(value: object) -> str:
    """ "str 'high'", "int 5", "null": the type and (shortened) value, for error messages."""
    if value is None:
        return "null"
    text = repr(value)
    text = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
    return f"{_type_name(value)} {text}"


def _find_object(raw: str, field: str) -> dict[str, Any]:
    """The JSON object in ``raw`` that carries ``field``, else the first one, else raise."""
    text = raw.strip()
    if not text:
        raise OutputParseError("output is empty")
    candidates = [text] + [m.group(1).strip() for m in _FENCE_RE.finditer(text)]
    first: dict[str, Any] | None = None
    nested = False
    for candidate in candidates:
        try:
            value = load_json(candidate)
        except NestingError:
            # Prose around JSON can look nested to the bracket count (quotes in it pair up
            # wrongly): only the reason if no object is found below.
            nested = True
            continue
        except ValueError:
            continue
        if isinstance(value, dict):
            if field in value:
                return value
            first = first if first is not None else value
    found, first_in_braces, first_error, nested_in_braces = _scan_braces(text, field)
    if found is not None:
        return found
    first = first if first is not None else first_in_braces
    if first is not None:
        return first
    if nested or nested_in_braces:
        raise OutputParseError(f"answer nested deeper than {MAX_NESTING_DEPTH} levels")
    if first_error is not None:
        raise OutputParseError(f"no complete JSON object found in the output: {first_error}")
    raise OutputParseError("no JSON object found in the output")


def _scan_braces(
    text: str, field: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None, bool]:
    """Decode from each '{' in turn: the first object with ``field``, else None; the first
    object; why the first '{' that starts no valid JSON does not; whether one was nested
    too deeply."""
    first: dict[str, Any] | None = None
    first_error: str | None = None
    nested = False
    factor, base = _DECODE_BUDGET
    budget = factor * len(text) + base
    # Only the first of the '{'s no object can start at is decoded: for its error message.
    blocked = _NOT_OBJECT_START.search(text)
    for brace in _OBJECT_START.finditer(text):
        start = brace.start()
        if first_error is None and blocked is not None and blocked.start() < start:
            first_error = _failure_at(text, blocked.start())
        if budget <= 0:
            break
        value, error, cost = _decode_at(text, start)
        budget -= cost
        if error is not None:
            first_error = first_error or _failure(start, error)
            nested = nested or isinstance(error, NestingError)
        elif isinstance(value, dict):
            if field in value:
                return value, first, first_error, nested
            first = first if first is not None else value
    if first_error is None and blocked is not None:
        first_error = _failure_at(text, blocked.start())
    return None, first, first_error, nested


def _failure_at(text: str, start: int) -> str:
    error = _decode_at(text, start)[1]
    return _failure(start, error) if error is not None else ""


def _failure(start: int, error: Exception) -> str:
    return f"the '{{' at character {start} does not start valid JSON ({error})"


def _decode_at(text: str, start: int) -> tuple[Any, Exception | None, int]:
    """The JSON value starting at ``start``, or the error decoding it there (positions
    counted in ``text``; NestingError for a value nested past MAX_NESTING_DEPTH), and about
    how many characters were decoded: ``raw_decode(text, start)`` without its cost on a
    long text."""
    size, cost = _WINDOW, 0
    while True:
        window = text[start : start + size]
        try:
            value, end = _DECODER.raw_decode(window)
        except RecursionError:
            return None, NestingError(MAX_NESTING_DEPTH), cost + len(window)
        except json.JSONDecodeError as error:
            whole = start + len(window) >= len(text)
            if whole or not _maybe_cut(error, len(window)):
                return None, _Positioned(error, text, start), cost + error.pos + 1
            cost += len(window)
            size *= 4
        else:
            # Its own text only: what follows the value in the window is not part of it.
            if json_nesting_over(window[:end], MAX_NESTING_DEPTH):
                return None, NestingError(MAX_NESTING_DEPTH), cost + 2 * end
            return value, None, cost + end


def _maybe_cut(error: json.JSONDecodeError, length: int) -> bool:
    """Whether ``error``, raised in a window of ``length`` characters, may be the cut's."""
    return error.pos >= length - _CUT_MARGIN or error.msg.startswith("Unterminated string")


class _Positioned(Exception):
    """A JSONDecodeError from a window, worded as if raised in the whole text: its line and
    column are counted only when it is shown (once, for the first failing '{')."""

    def __init__(self, error: json.JSONDecodeError, text: str, offset: int) -> None:
        super().__init__(error.msg)
        self.error, self.text, self.offset = error, text, offset

    def __str__(self) -> str:
        return str(json.JSONDecodeError(self.error.msg, self.text, self.offset + self.error.pos))


def _load(raw: str | dict[str, Any], field: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        return _find_object(raw, field)
    raise OutputParseError(f"output must be text or a JSON object, got {_type_name(raw)}")


def _reasoning(obj: dict[str, Any]) -> str | None:
    value = obj.get("reasoning")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def parse_score_output(raw: str | dict[str, Any]) -> ParsedOutput:
    """``{"score": 0.0-1.0, "reasoning": "..."}`` → score in [0, 1] and reasoning."""
    obj = _load(raw, "score")
    if "score" not in obj:
        raise OutputParseError("field 'score' is missing")
    value = obj["score"]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise OutputParseError(f"field 'score' must be a number, got {_describe(value)}")
    if isinstance(value, str):
        try:
            # Numeric strings are accepted: some models quote every value in JSON.
            score = float(value.strip())
        except ValueError:
            raise OutputParseError(
                f"field 'score' must be a number, got {_describe(value)}"
            ) from None
    else:
        score = float(value)
    if not math.isfinite(score):
        raise OutputParseError(f"score {score} is not a finite number")
    if not 0.0 <= score <= 1.0:
        raise OutputParseError(f"score {score:g} is outside [0, 1]")
    return ParsedOutput(score=score, reasoning=_reasoning(obj))


def parse_spans_output(raw: str | dict[str, Any]) -> ParsedOutput:
    """``{"reasoning": {...} | "...", "hallucination_list": ["span", ...]}`` → span strings.

    Empty and whitespace-only strings are dropped: they flag nothing, so a list of only
    blanks is a clean answer. The score is left None: the caller derives it (1 if any span
    could be anchored in the text, else 0).
    """
    obj = _load(raw, "hallucination_list")
    if "hallucination_list" not in obj:
        raise OutputParseError("field 'hallucination_list' is missing")
    value = obj["hallucination_list"]
    if not isinstance(value, list):
        raise OutputParseError(
            f"field 'hallucination_list' must be a list of strings, got {_type_name(value)}"
        )
    for i, entry in enumerate(value):
        if not isinstance(entry, str):
            raise OutputParseError(
                "field 'hallucination_list' must be a list of strings; "
                f"item {i} is {_describe(entry)}"
            )
    spans = tuple(entry for entry in value if entry.strip())
    return ParsedOutput(score=None, spans=spans, reasoning=_reasoning(obj))


def parse_preference_output(raw: str | dict[str, Any]) -> ParsedOutput:
    """``{"reasoning": "...", "verdict": "A" | "B" | "tie"}`` → B's share of the win (1, 0.5
    or 0) as the score, in the order the answers were shown."""
    obj = _load(raw, "verdict")
    if "verdict" not in obj:
        raise OutputParseError("field 'verdict' is missing")
    value = obj["verdict"]
    label = value.strip().lower() if isinstance(value, str) else None
    # Models write "Tie", "a", "[[A]]" (MT-Bench's own form): the letter is what counts.
    label = label.strip("[]*\"' .") if label is not None else None
    by_label = {k.lower(): v for k, v in PREFERENCE_SCORES.items()}
    if label not in by_label:
        raise OutputParseError(f"field 'verdict' must be A, B or tie, got {_describe(value)}")
    return ParsedOutput(score=by_label[label], reasoning=_reasoning(obj))


def parse_output(raw: str | dict[str, Any], kind: OutputKind) -> ParsedOutput:
    if kind == "score":
        return parse_score_output(raw)
    if kind == "preference":
        return parse_preference_output(raw)
    if kind == "spans":
        return parse_spans_output(raw)
    raise ValueError(f"unknown output kind {kind!r}")
