"""Counts of the response bound to the wrong noun: "10 rebounds" where the source has 10
(of something else) and rebounds (counted by another number).

A value check alone passes such a claim: 10 and "rebounds" are both in the source. Here a
count (digits or "two" to "twenty") followed by a plural noun is a claim about that noun,
and it is flagged when the source states the value and counts the noun, yet never puts
the two together (the noun within three words after the value, or before it: "of the
2,117 passengers, 95"). A noun the source never counts is left to the other checks:
"8 ducklings" against "a mother and her ducklings" is no binding error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from juryflow.judges.detectors.support import word_key
from juryflow.judges.detectors.text import STOPWORDS

_NUMBER_WORDS = {
    w: float(n + 2)
    for n, w in enumerate(
        ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
         "nineteen", "twenty")
    )
}  # fmt: skip
_VALUE = rf"\d+(?:,\d{{3}})*(?:\.\d+)?|{'|'.join(_NUMBER_WORDS)}"
_SOURCE_VALUE = re.compile(rf"(?<![\w.])(?:{_VALUE})\b", re.IGNORECASE)
_COUNT = re.compile(
    rf"(?<![\w.,$-])(?P<value>{_VALUE})(?![\w.,]\d)[\s-]+(?P<noun>[A-Za-z][a-z]+s)\b",
    re.IGNORECASE,
)
"""A value and the plural noun right after it; not part of a score ("81-61") or a price."""
_WORD = re.compile(r"[A-Za-z]+")
WINDOW = 3
"""Words after (or before) a value of the source that it may count."""


def _value(text: str) -> float:
    text = text.lower()
    return _NUMBER_WORDS.get(text) or float(text.replace(",", ""))


@dataclass(frozen=True, slots=True)
class _Counted:
    values: frozenset[float]
    nouns: frozenset[str]
    """Keys of the words right after a value: what the source counts."""
    pairs: frozenset[tuple[float, str]]
    """(value, key of a word near it)."""

    @classmethod
    def of(cls, source: str) -> _Counted:
        values: set[float] = set()
        nouns: set[str] = set()
        pairs: set[tuple[float, str]] = set()
        for m in _SOURCE_VALUE.finditer(source):
            value = _value(m.group())
            values.add(value)
            after = [word_key(w) for w in _WORD.findall(source, m.end(), m.end() + 40)]
            before = [word_key(w) for w in _WORD.findall(source, max(0, m.start() - 40), m.start())]
            nouns.update(after[:WINDOW])
            pairs.update((value, k) for k in after[:WINDOW] + before[-WINDOW:])
        return cls(frozenset(values), frozenset(nouns), frozenset(pairs))


def misbound_counts(source: str, response: str) -> list[tuple[int, int]]:
    """Spans of "value noun" counts of ``response`` that ``source`` never binds together."""
    counted = _Counted.of(source)
    spans = []
    for m in _COUNT.finditer(response):
        noun = m["noun"]
        if noun.lower() in STOPWORDS or len(noun) < 4:
            continue
        value, key = _value(m["value"]), word_key(noun)
        if value in counted.values and key in counted.nouns and (value, key) not in counted.pairs:
            spans.append(m.span())
    return spans
