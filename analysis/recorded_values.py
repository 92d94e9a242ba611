"""The cells of a file of recorded judgments as juryflow reads them: a verdict or a label
mapped by the polarity (``--positive``), a 0-1 score, flagged spans, a judge map.

Each reader returns the value, or raises :class:`CellError` with a message naming what the
cell holds and what it should; the caller turns that into the row's error. An empty cell
(None, or blank text) is no answer: None, never an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from juryflow.storage.datasets import cell_text

ValueKind = Literal["boolean", "number", "text"]

_TRUE = frozenset({"true", "t", "yes", "y"})
_FALSE = frozenset({"false", "f", "no", "n"})
_SHOWN = 60
"""How much of an offending value an error message quotes."""

RecordedSpan = tuple[int, int] | str
"""A flagged span as a file gives it: character offsets ``[start, end)``, or a quote to
anchor in the text."""


class CellError(ValueError):
    """A cell that cannot be read as what its column is for; the message says why."""


def raw_text(value: object) -> str:
    """A cell as the JSON text it was (what an imported judgment keeps as its raw output)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


def shown(value: object) -> str:
    """``'maybe'``, ``0.7``, ``[1, 2]``: a value as an error message quotes it, shortened."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def is_empty(value: object) -> bool:
    """No answer: a missing cell, JSON null, or blank text."""
    return value is None or (isinstance(value, str) and not value.strip())


def _boolean(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float | Decimal) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE or word == "1":
            return True
        if word in _FALSE or word == "0":
            return False
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def kind_of(positive: str) -> ValueKind:
    """What kind of value ``--positive`` names: a boolean, a number, or text."""
    if positive.strip().lower() in _TRUE | _FALSE:
        return "boolean"
    return "number" if _number(positive) is not None else "text"


@dataclass(frozen=True, slots=True)
class Polarity:
    """Which value is the positive class (what a 'hallucinated' verdict stands for), and the
    values a verdict or label may take besides it: of ``kind``, and for text classes, one of
    ``known`` (the label column's values) when the labels show at least two classes.
    """

    positive: str
    kind: ValueKind
    known: frozenset[str] = frozenset()

    @classmethod
    def of(cls, positive: str) -> Polarity:
        return cls(positive, kind_of(positive))

    def with_labels(self, labels: Collection[str]) -> Polarity:
        """The polarity knowing the label column's values (text classes only)."""
        if self.kind != "text":
            return self
        return Polarity(self.positive, self.kind, frozenset(v.strip() for v in labels))

    def is_positive(self, value: object, what: str = "verdict") -> bool | None:
        """``value`` as the positive class (True) or the other (False); None when empty."""
        if is_empty(value):
            return None
        kind = self.kind
        if kind == "boolean":
            found = _boolean(value)
            if found is None:
                raise CellError(
                    f"{what} {shown(value)} is not true or false, as --positive "
                    f"{self.positive} is (pass --positive the class it stands for)"
                )
            return found == _boolean(self.positive)
        if kind == "number":
            number = _number(value)
            if number is None:
                raise CellError(
                    f"{what} {shown(value)} is not a number, as --positive {self.positive} is"
                )
            return number == _number(self.positive)
        return self._text_class(value, what)

    def _text_class(self, value: object, what: str) -> bool:
        try:
            text = cell_text(value)
        except ValueError as error:
            raise CellError(f"{what} {error}") from None
        text = (text or "").strip()
        positive = self.positive.strip()
        others = sorted(self.known - {positive})
        if text != positive and others and text not in self.known:
            raise CellError(
                f"{what} {shown(value)} is neither --positive {shown(positive)} nor another "
                f"of the label's values ({', '.join(shown(v) for v in others[:5])})"
            )
        return text == positive


def score_of(value: object, what: str = "score") -> float | None:
    """A score from 0 to 1; None when empty."""
    if is_empty(value):
        return None
    number = _number(value)
    if number is None or not 0.0 <= number <= 1.0:
        raise CellError(f"{what} {shown(value)} is not a number from 0 to 1")
    return number


def _loaded(value: object, what: str) -> object:
    """A cell of JSON text (a CSV cell) as its value; other values as they are."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        raise CellError(f"{what} {shown(value)} is not valid JSON") from None


def _offset(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal) and value == int(value):
        return int(value)
    return None


def _pair(entry: object) -> tuple[object, object] | None:
    if isinstance(entry, list | tuple) and len(entry) == 2:
        return entry[0], entry[1]
    if isinstance(entry, Mapping) and "start" in entry and "end" in entry:
        return entry["start"], entry["end"]
    return None


def spans_of(
    value: object, text_length: int, what: str = "spans", quotes: bool = True
) -> tuple[RecordedSpan, ...] | None:
    """Flagged spans: a list of ``[start, end]`` (or ``{start, end}``) character offsets
    into the text, or (``quotes``) of strings to anchor in it; None when empty."""
    if is_empty(value):
        return None
    loaded = _loaded(value, what)
    if not isinstance(loaded, list | tuple):
        raise CellError(f"{what} {shown(value)} is not a list of [start, end] offsets")
    found: list[RecordedSpan] = []
    for number, entry in enumerate(loaded, start=1):
        if quotes and isinstance(entry, str):
            if entry.strip():
                found.append(entry)
            continue
        pair = _pair(entry)
        start, end = (None, None) if pair is None else (_offset(pair[0]), _offset(pair[1]))
        if start is None or end is None:
            wanted = "[start, end] offsets or quoted text" if quotes else "[start, end] offsets"
            raise CellError(f"{what}: entry {number}, {shown(entry)}, is not {wanted}")
        if not 0 <= start < end <= text_length:
            raise CellError(
                f"{what}: entry {number}, [{start}, {end}], does not fit the text "
                f"({text_length:,} characters): offsets need 0 <= start < end <= its length"
            )
        found.append((start, end))
    return tuple(found)


def judge_map(value: object, what: str) -> dict[str, Any] | None:
    """A ``{judge: verdict}`` cell (a JSON object, or its text); None when empty."""
    if is_empty(value):
        return None
    loaded = _loaded(value, what)
    if isinstance(loaded, list) and all(
        isinstance(pair, tuple) and len(pair) == 2 for pair in loaded
    ):
        loaded = dict(loaded)  # a Parquet MAP column reads as (key, value) pairs
    if not isinstance(loaded, Mapping):
        raise CellError(f"{what} {shown(value)} is not an object of judge: verdict")
    return {str(judge): verdict for judge, verdict in loaded.items()}
