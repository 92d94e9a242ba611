"""Anchoring: turn the strings a judge says it flagged into character offsets of the text.

Judges are asked for exact substrings but return near-misses (curly quotes, changed case,
folded whitespace, a trailing period) and repeats. Each requested string goes through
stages, strictest first, and the :class:`~juryflow.maths.records.Span` records which one matched:

1. ``exact`` / ``repeat``: the k-th repeat of a string in the judge's list goes to its k-th
   occurrence in the text (``repeat`` for k >= 2);
2. ``normalized``: equal after folding case, whitespace runs, curly quotes and dashes, and
   stripping leading/trailing punctuation; offsets are mapped back to the original text;
3. ``fuzzy``: ``rapidfuzz`` partial-ratio alignment on the normalised text, score at least
   ``fuzzy_threshold``, offsets widened to whole words;
4. ``unmatched``: offsets None, kept for the record but out of the consensus.

An occurrence claimed by one request is not handed to a later request for the same
(normalised) string, so a string listed three times but present twice leaves one unmatched
instead of double-counting the same characters.

``ambiguous``: a string the judge listed fewer times than it occurs (listed once, found at
two places; listed twice, found at three) does not say which occurrences it meant. Each such
listing is anchored to the first free occurrence, for display, but marked ``ambiguous`` and
casts no vote in the consensus. The count is per stage: at the exact stage, listings of the
same string against its exact occurrences still free; at the normalised stage, listings that
normalise alike against their normalised occurrences still free. A string listed as many
times as it occurs is not ambiguous: each listing has an occurrence of its own.

The strings come from a model's answer, so their number and length are not ours to choose.
Each distinct string is searched for once; which occurrences are still free is kept up to
date as spans are claimed (instead of rechecking every occurrence against every claim, which
was cubic in the listings). Fuzzy alignment costs about len(text) x L x L/64 for a string
of L characters, so strings longer than ``MAX_FUZZY_LENGTH`` are not aligned and a call
aligns distinct strings only until ``FUZZY_BUDGET`` is spent; the rest stay unmatched.
"""

from __future__ import annotations

import functools
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from juryflow.maths.records import MatchKind, Span

_CHAR_MAP = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′`´", "'"),
        **dict.fromkeys("“”„‟″«»", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        **dict.fromkeys("\u00a0\u2007\u202f\u2009\u200a\u3000", " "),
    }
)
_EDGE_STRIP = " \t\r\n.,;:!?\"'()[]{}<>*-_/\\|"
_WHITESPACE_RUN = re.compile(r"\s+")
"""Runs of what ``str.isspace`` calls whitespace (``re``'s ``\\s`` on str patterns)."""
MIN_FUZZY_LENGTH = 4
"""Below this many characters a fuzzy match is noise ("4.0" would 'match' "4.5")."""
MAX_FUZZY_LENGTH = 1_000
"""Longer strings are not aligned fuzzily: one of 5,000 characters took 2 s against a
6,000-character text. Judges flag phrases (the sample's gold spans are under 130)."""
FUZZY_BUDGET = 50_000
"""Fuzzy alignment a call may spend, a string of L characters costing L x ceil(L / 64)
(rapidfuzz aligns 64 characters a machine word): about 0.1 ms per character of text at
worst, whatever the answer lists; 1,000 distinct strings of 50 characters fit."""


@dataclass(frozen=True, slots=True)
class _Normalized:
    text: str
    origin: tuple[int, ...]
    """origin[i] = index in the original text of normalised character i."""

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        return self.origin[start], self.origin[end - 1] + 1


@functools.lru_cache(maxsize=64)
def _normalize(text: str) -> _Normalized:
    """Fold case, quotes, dashes and whitespace runs, keeping a map back to ``text``.

    Cached: every span judge of an item anchors into the same text. Whole-string
    operations stand in for a loop over characters (~0.2 ms instead of ~1 ms for a 5,000
    character text) wherever they give the same result.
    """
    folded = text.translate(_CHAR_MAP)
    lowered = folded.lower()
    # Lowering a whole string differs from lowering each character for a final sigma
    # (context-dependent) and for characters whose lower case is two characters long.
    if len(lowered) != len(folded) or "\u03a3" in folded:
        return _normalize_by_character(text)
    pieces: list[str] = []
    origin: list[int] = []
    position = 0
    for run in _WHITESPACE_RUN.finditer(lowered):
        start, end = run.span()
        pieces.append(lowered[position:start])
        pieces.append(" ")
        origin.extend(range(position, start + 1))
        position = end
    pieces.append(lowered[position:])
    origin.extend(range(position, len(lowered)))
    return _Normalized("".join(pieces), tuple(origin))


def _normalize_by_character(text: str) -> _Normalized:
    """What :func:`_normalize` computes, one character at a time (the reference)."""
    chars: list[str] = []
    origin: list[int] = []
    previous_space = False
    for i, raw in enumerate(text.translate(_CHAR_MAP)):
        if raw.isspace():
            if previous_space:
                continue
            previous_space = True
            chars.append(" ")
        else:
            previous_space = False
            lower = raw.lower()
            # Keep one character per original character, so the offset map stays 1:1
            # ("İ".lower() is two characters).
            chars.append(lower if len(lower) == 1 else raw)
        origin.append(i)
    return _Normalized("".join(chars), tuple(origin))


def _needle(requested: str) -> str:
    # Not through the cache: an answer's many strings would evict the texts it is for.
    return _normalize.__wrapped__(requested).text.strip(_EDGE_STRIP)


def _occurrences(haystack: str, needle: str) -> list[tuple[int, int]]:
    """Successive non-overlapping occurrences of ``needle``."""
    found, start = [], haystack.find(needle)
    while start >= 0:
        found.append((start, start + len(needle)))
        start = haystack.find(needle, start + len(needle))
    return found


class _Occurrences:
    """Sorted, disjoint occurrences of one string, each free until a claimed span overlaps it."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = spans
        self.ends = [end for _, end in spans]
        self.blocked = bytearray(len(spans))
        self.free = len(spans)
        self._first = 0

    def block(self, start: int, end: int) -> None:
        i = bisect_right(self.ends, start)  # the first occurrence ending after ``start``
        while i < len(self.spans) and self.spans[i][0] < end:
            if not self.blocked[i]:
                self.blocked[i] = 1
                self.free -= 1
            i += 1

    def first_free(self) -> tuple[int, int]:
        while self.blocked[self._first]:  # only called while some occurrence is free
            self._first += 1
        return self.spans[self._first]


@dataclass
class _Claims:
    """The spans claimed for one (normalised) string, and the occurrence lists they block."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    lists: list[_Occurrences] = field(default_factory=list)

    def watch(self, occurrences: _Occurrences) -> _Occurrences:
        """Keep ``occurrences`` blocked by these claims, from now on too."""
        # Whichever is shorter is walked: many strings may normalise alike.
        if len(occurrences.spans) < len(self.starts):
            for i, (start, end) in enumerate(occurrences.spans):
                if not self.is_free(start, end):
                    occurrences.blocked[i] = 1
                    occurrences.free -= 1
        else:
            for start, end in zip(self.starts, self.ends, strict=True):
                occurrences.block(start, end)
        self.lists.append(occurrences)
        return occurrences

    def claim(self, start: int, end: int) -> None:
        i = bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        for occurrences in self.lists:
            occurrences.block(start, end)

    def is_free(self, start: int, end: int) -> bool:
        # Claims are disjoint and sorted: only the neighbours around ``start`` can overlap.
        i = bisect_right(self.starts, start)
        if i > 0 and self.ends[i - 1] > start:
            return False
        return i == len(self.starts) or self.starts[i] >= end


@dataclass
class _Anchoring:
    """One call's state: the text, its occurrence lists and claims, the fuzzy budget."""

    text: str
    fuzzy_threshold: float
    claims: dict[str, _Claims] = field(default_factory=dict)
    exact: dict[str, _Occurrences] = field(default_factory=dict)
    near: dict[str, _Occurrences] = field(default_factory=dict)
    fuzzy: dict[str, tuple[int, int, float] | None] = field(default_factory=dict)
    fuzzy_budget: int = FUZZY_BUDGET
    _normalized: _Normalized | None = None  # built lazily: most judges quote exactly

    @property
    def normalized(self) -> _Normalized:
        if self._normalized is None:
            self._normalized = _normalize(self.text)
        return self._normalized

    def exact_occurrences(self, wanted: str, claims: _Claims) -> _Occurrences:
        if wanted not in self.exact:
            self.exact[wanted] = claims.watch(_Occurrences(_occurrences(self.text, wanted)))
        return self.exact[wanted]

    def normalized_occurrences(self, needle: str, claims: _Claims) -> _Occurrences:
        if needle not in self.near:
            normalized = self.normalized
            spans = [normalized.to_original(*o) for o in _occurrences(normalized.text, needle)]
            self.near[needle] = claims.watch(_Occurrences(spans))
        return self.near[needle]

    def alignment(self, needle: str) -> tuple[int, int, float] | None:
        """Where ``needle`` aligns fuzzily (original offsets widened to words, similarity),
        once per string and within the budget."""
        if needle in self.fuzzy:
            return self.fuzzy[needle]
        text = self.normalized.text
        cost = len(needle) * math.ceil(len(needle) / 64)
        found: tuple[int, int, float] | None = None
        fits = MIN_FUZZY_LENGTH <= len(needle) <= min(len(text), MAX_FUZZY_LENGTH)
        if fits and cost <= self.fuzzy_budget:
            self.fuzzy_budget -= cost
            found = self._align(needle, text)
        self.fuzzy[needle] = found
        return found

    def _align(self, needle: str, text: str) -> tuple[int, int, float] | None:
        match = fuzz.partial_ratio_alignment(needle, text, score_cutoff=self.fuzzy_threshold)
        if match is None or match.dest_end <= match.dest_start:
            return None
        start, end = self.normalized.to_original(match.dest_start, match.dest_end)
        start, end = _widen_to_words(self.text, start, end)
        return (start, end, round(match.score, 2)) if end > start else None


def _widen_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """Move the ends of a fuzzy alignment out of the middle of words, then trim the edges."""
    while start > 0 and text[start - 1].isalnum() and text[start].isalnum():
        start -= 1
    while end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
        end += 1
    while start < end and text[start] in _EDGE_STRIP:
        start += 1
    while end > start and text[end - 1] in _EDGE_STRIP:
        end -= 1
    return start, end


def anchor_spans(
    text: str, requested: Sequence[str], fuzzy_threshold: float = 85.0
) -> tuple[Span, ...]:
    """One :class:`Span` per requested string, in the same order."""
    state = _Anchoring(text, fuzzy_threshold)
    seen: dict[str, int] = {}
    needles = [_needle(w) if w.strip() else "" for w in requested]
    wanted_left = Counter(w for w in requested if w.strip())
    needles_left = Counter(n for w, n in zip(requested, needles, strict=True) if w.strip())
    spans: list[Span] = []
    for wanted, needle in zip(requested, needles, strict=True):
        if not wanted.strip():
            spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
            continue
        # Repeats are counted per normalised string, so "Foo" and "foo." share occurrences.
        claims = state.claims.setdefault(needle or wanted, _Claims())
        repeat = seen.get(wanted, 0)
        seen[wanted] = repeat + 1
        # Listings still to anchor, this one included: with more free occurrences than
        # that, nothing says which of them the judge meant.
        listed, listed_alike = wanted_left[wanted], needles_left[needle]
        wanted_left[wanted] -= 1
        needles_left[needle] -= 1

        exact = state.exact_occurrences(wanted, claims)
        if exact.free:
            start, end = exact.first_free()
            kind: MatchKind = (
                "ambiguous" if exact.free > listed else "repeat" if repeat else "exact"
            )
            claims.claim(start, end)
            spans.append(Span(start, end, text[start:end], kind, requested=wanted))
            continue

        if not needle:  # only punctuation, and not found exactly
            spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
            continue
        near = state.normalized_occurrences(needle, claims)
        if near.free:
            start, end = near.first_free()
            kind = "ambiguous" if near.free > listed_alike else "normalized"
            claims.claim(start, end)
            spans.append(Span(start, end, text[start:end], kind, requested=wanted))
            continue

        aligned = state.alignment(needle)
        if aligned is not None and claims.is_free(aligned[0], aligned[1]):
            start, end, similarity = aligned
            claims.claim(start, end)
            spans.append(
                Span(
                    start,
                    end,
                    text[start:end],
                    "fuzzy",
                    requested=wanted,
                    similarity=similarity,
                )
            )
            continue
        spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
    return tuple(spans)
