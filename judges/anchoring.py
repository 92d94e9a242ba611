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
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

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
    return _normalize(requested).text.strip(_EDGE_STRIP)


def _occurrences(haystack: str, needle: str) -> list[tuple[int, int]]:
    """Successive non-overlapping occurrences of ``needle``."""
    found, start = [], haystack.find(needle)
    while start >= 0:
        found.append((start, start + len(needle)))
        start = haystack.find(needle, start + len(needle))
    return found


def _is_free(span: tuple[int, int], taken: set[tuple[int, int]]) -> bool:
    return all(span[1] <= s or e <= span[0] for s, e in taken)


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
    normalized: _Normalized | None = None  # built lazily: most judges quote exactly
    claimed: dict[str, set[tuple[int, int]]] = {}
    seen: dict[str, int] = {}
    needles = [_needle(w) for w in requested]
    wanted_left = Counter(w for w in requested if w.strip())
    needles_left = Counter(n for w, n in zip(requested, needles, strict=True) if w.strip())
    spans: list[Span] = []
    for wanted, needle in zip(requested, needles, strict=True):
        if not wanted.strip():
            spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
            continue
        # Repeats are counted per normalised string, so "Foo" and "foo." share occurrences.
        taken = claimed.setdefault(needle or wanted, set())
        repeat = seen.get(wanted, 0)
        seen[wanted] = repeat + 1
        # Listings still to anchor, this one included: with more free occurrences than
        # that, nothing says which of them the judge meant.
        listed, listed_alike = wanted_left[wanted], needles_left[needle]
        wanted_left[wanted] -= 1
        needles_left[needle] -= 1

        free = [o for o in _occurrences(text, wanted) if _is_free(o, taken)]
        if free:
            start, end = free[0]
            taken.add((start, end))
            kind: MatchKind = "ambiguous" if len(free) > listed else "repeat" if repeat else "exact"
            spans.append(Span(start, end, text[start:end], kind, requested=wanted))
            continue

        if not needle:  # only punctuation, and not found exactly
            spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
            continue
        if normalized is None:
            normalized = _normalize(text)
        found = [normalized.to_original(*o) for o in _occurrences(normalized.text, needle)]
        free = [o for o in found if _is_free(o, taken)]
        if free:
            start, end = free[0]
            taken.add((start, end))
            kind = "ambiguous" if len(free) > listed_alike else "normalized"
            spans.append(Span(start, end, text[start:end], kind, requested=wanted))
            continue

        if MIN_FUZZY_LENGTH <= len(needle) <= len(normalized.text):
            match = fuzz.partial_ratio_alignment(
                needle, normalized.text, score_cutoff=fuzzy_threshold
            )
            if match is not None and match.dest_end > match.dest_start:
                start, end = normalized.to_original(match.dest_start, match.dest_end)
                start, end = _widen_to_words(text, start, end)
                if end > start and _is_free((start, end), taken):
                    taken.add((start, end))
                    spans.append(
                        Span(
                            start,
                            end,
                            text[start:end],
                            "fuzzy",
                            requested=wanted,
                            similarity=round(match.score, 2),
                        )
                    )
                    continue
        spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
    return tuple(spans)
