"""Content-words detector: clauses of the response made mostly of content words that the
reference never uses ("offers catering services for private events").

Lexical, not semantic: a paraphrase in new words can be flagged and a contradiction reusing
the reference's words is missed, with one exception. In a structured record a key set to
false/"no" ("OutdoorSeating": False) is evidence *against* its words, and a key set to null
is no evidence either way; a clause asserting such a word is flagged whatever its ratio
(a negated clause, "no outdoor seating", is fine for false keys, not for null ones).
Words the record also uses positively elsewhere (a review mentioning street parking) keep
their support.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from judges.detectors.text import (
    STOPWORDS,
    merge_spans,
    parse_record,
    split_camel,
    stem,
    trim_span,
    vocabulary,
    walk_record,
    words,
    wordset,
)

_CLAUSE_BREAK = re.compile(r"[.;:!?,()\n]+(?=\s|$)|\s+(?:and|but|while|whereas|although)\s+")
"""Clause boundaries: punctuation followed by space, or a coordinating word."""


def _is_negative(value: object) -> bool:
    """False, None or a "no"-like string (Yelp records sometimes hold "u'no'")."""
    if value is None or value is False:
        return True
    return isinstance(value, str) and value.strip().lstrip("u").strip("'\"").lower() in (
        "no", "none", "false", "null",
    )  # fmt: skip


_FRAMING = frozenset(
    stem(w)
    for w in wordset(
        """
    customer patron diner guest visitor reviewer review people someone rating rated average
    based according overall mention mentioned note noted describe described express expressed
    say said state stated report reported find found feel felt seem seems appear appears
    praise praised appreciate highlight highlighted positive negative mixed receive received
    experience experiences provide provided offer offers include including feature features
    variety various range several many option options choice selection particular particularly
    especially also another other others one two three first second third some most overall
    known popular great good excellent delicious amazing nice quality well highly high bit
    data structured information json format objective overview summary article based given
    located location establishment business place spot restaurant eatery area located situated
    serve serving serves make makes made look looking visit visiting enjoy enjoyed enjoying
    open opens day days week weekly daily hour hours time operate operates operating operation
    throughout every
    despite however although though while whereas additionally furthermore moreover
    """
    )
)
"""Words of the prose that reports a record, not claims about it ("customers have praised")."""

_NEGATION = re.compile(
    r"\b(?:no|not|never|without|neither|nor|lacks?|lacking|cannot|none)\b|n[’']t\b", re.IGNORECASE
)

# Tuned lightly on the RAGTruth data-to-text dev sample.
MIN_UNSUPPORTED = 3
MIN_FRACTION = 0.8


@dataclass(frozen=True)
class _Evidence:
    vocab: frozenset[str]
    """Stems the reference supports."""
    denied: frozenset[str] = frozenset()
    """Stems of keys set to false / "no": supported only in a negated clause."""
    unknown: frozenset[str] = frozenset()
    """Stems of keys set to null: the record says nothing either way."""


def _evidence(reference: str) -> _Evidence:
    vocab = vocabulary(reference)
    record = parse_record(reference)
    if record is None:
        return _Evidence(frozenset(vocab))
    denied: set[str] = set()
    unknown: set[str] = set()
    positive: list[str] = []
    for key, value in walk_record(record):
        if _is_negative(value):
            target = unknown if value is None else denied
            target.update(stem(p) for p in [*split_camel(key), key] if p.lower() not in STOPWORDS)
        else:
            positive.append(f"{key} {value}")
    # A key's word keeps its support if anything positive in the record uses it too
    # ("street": False, but a review mentions street parking), and framing words never count.
    supported = vocabulary(" ".join(positive)) | _FRAMING
    denied -= supported
    unknown -= supported | denied
    return _Evidence(frozenset(vocab - denied - unknown), frozenset(denied), frozenset(unknown))


def _clauses(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for m in _CLAUSE_BREAK.finditer(text):
        bounds.append((start, m.start()))
        start = m.end()
    bounds.append((start, len(text)))
    return [trim_span(text, s, e) for s, e in bounds]


def _content_stems(text: str) -> list[str]:
    stems = (stem(w) for w, _, _ in words(text) if len(w) > 2 and w.lower() not in STOPWORDS)
    return [s for s in stems if s not in _FRAMING]


class ContentWordsDetector:
    """Flags clauses asserting a false/null record key, or whose content words are mostly
    (> ``min_fraction``, and at least ``min_unsupported``) absent from the reference."""

    name = "content"

    def __init__(
        self, min_unsupported: int = MIN_UNSUPPORTED, min_fraction: float = MIN_FRACTION
    ) -> None:
        self.min_unsupported = min_unsupported
        self.min_fraction = min_fraction

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        evidence = _evidence(reference)
        spans = []
        for start, end in _clauses(response):
            clause = response[start:end]
            stems = _content_stems(clause)
            if not stems:
                continue
            negated = bool(_NEGATION.search(clause))
            vocab = evidence.vocab | evidence.denied if negated else evidence.vocab
            against = evidence.unknown if negated else evidence.unknown | evidence.denied
            unsupported = sum(s not in vocab for s in stems)
            if any(s in against for s in stems) or (
                unsupported >= self.min_unsupported and unsupported / len(stems) > self.min_fraction
            ):
                spans.append((start, end))
        return merge_spans(spans)
