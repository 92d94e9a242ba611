"""Parsing judge output into a score or a list of span strings, or a precise reason why not.

Accepted shapes, in order: an already-structured ``dict`` (tool-call / structured-output
arguments); the whole text as JSON; JSON inside a ```json fence; the first JSON object in
prose (scanned with ``json.JSONDecoder.raw_decode`` from each ``{``, preferring an object
that has the expected field). A score may be a JSON number or a numeric string ("0.6"),
never a word ("high"). Nothing here ever invents a grade: a failure raises
:class:`OutputParseError` and the caller records the judgment as unscored with its reason.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from juryflow.maths.records import OutputKind

_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
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
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            if field in value:
                return value
            first = first if first is not None else value
    first_error: str | None = None
    for m in re.finditer(r"\{", text):
        try:
            value, _ = _DECODER.raw_decode(text, m.start())
        except (json.JSONDecodeError, RecursionError) as exc:
            if first_error is None:
                first_error = f"the '{{' at character {m.start()} does not start valid JSON ({exc})"
            continue
        if isinstance(value, dict):
            if field in value:
                return value
            first = first if first is not None else value
    if first is not None:
        return first
    if first_error is not None:
        raise OutputParseError(f"no complete JSON object found in the output: {first_error}")
    raise OutputParseError("no JSON object found in the output")


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


def parse_output(raw: str | dict[str, Any], kind: OutputKind) -> ParsedOutput:
    if kind == "score":
        return parse_score_output(raw)
    if kind == "spans":
        return parse_spans_output(raw)
    raise ValueError(f"unknown output kind {kind!r}")
