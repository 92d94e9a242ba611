"""Text helpers shared by the offline detectors: tokens with offsets, stopwords, stemming.

Deliberately crude (regex + suffix stripping, no NLP library): the detectors must run
anywhere, offline, in microseconds per item, and be easy to reason about.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections.abc import Iterable, Iterator

WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’]*[A-Za-z]|[A-Za-z]")
"""A word: letters with inner apostrophes ("Kyle's", "don't"); digits are the numbers detector's."""


def wordset(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``: keeps long word lists readable."""
    return frozenset(text.split())


_CAMEL_RE = re.compile(r"(?<=[a-z])(?=[A-Z])")

STOPWORDS = wordset(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves will just may might must shall well yet also however
    overall additionally furthermore moreover while whether etc within without upon via per
    """
)
"""English function words: they carry no checkable claim, so no detector flags them."""

_SUFFIXES = ("ingly", "edly", "ings", "ness", "ment", "ing", "ies", "ied", "ers", "est", "ed",
             "er", "ly", "es", "s", "y", "e")  # fmt: skip
"""Longest first. Over-stemming is harmless here: both sides are stemmed the same way."""


def normalize_word(word: str) -> str:
    return word.lower().replace("’", "'")


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude, deterministic stem: lower-case, drop possessive 's, strip one common suffix.

    Only ever compared with other ``stem`` outputs, so it need not be a real word: what
    matters is that "restaurants"/"restaurant" and "served"/"serves"/"serving" collide.
    Cached: a record's words come back for every sentence checked against it.
    """
    w = normalize_word(word)
    if w.endswith("'s"):
        w = w[:-2]
    w = w.replace("'", "")
    # Up to two rounds, so "fridays" -> "friday" -> "frida" meets "friday" -> "frida".
    for _ in range(2):
        for suffix in _SUFFIXES:
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        else:
            break
    return w


def words(text: str) -> Iterator[tuple[str, int, int]]:
    """(word, start, end) for each word of ``text``, in order."""
    for m in WORD_RE.finditer(text):
        yield m.group(), m.start(), m.end()


def split_camel(word: str) -> list[str]:
    """ "OutdoorSeating" → ["Outdoor", "Seating"]: record keys carry words too."""
    return _CAMEL_RE.split(word)


# Records abbreviate: "CA" supports "California", "Ave" supports "Avenue".
_EXPANSIONS: dict[str, tuple[str, ...]] = {}
for _pair in wordset(
    "AL:alabama AK:alaska AZ:arizona AR:arkansas CA:california CO:colorado CT:connecticut "
    "DE:delaware FL:florida GA:georgia HI:hawaii ID:idaho IL:illinois IN:indiana IA:iowa "
    "KS:kansas KY:kentucky LA:louisiana ME:maine MD:maryland MA:massachusetts MI:michigan "
    "MN:minnesota MS:mississippi MO:missouri MT:montana NE:nebraska NV:nevada NH:hampshire "
    "NJ:jersey NM:mexico NY:york NC:carolina ND:dakota OH:ohio OK:oklahoma OR:oregon "
    "PA:pennsylvania RI:rhode SC:carolina SD:dakota TN:tennessee TX:texas UT:utah VT:vermont "
    "VA:virginia WA:washington WV:virginia WI:wisconsin WY:wyoming AB:alberta ON:ontario "
    "QC:quebec BC:columbia Ave:avenue St:street St:saint Rd:road Blvd:boulevard Dr:drive "
    "Ste:suite Ln:lane Hwy:highway Pl:place Ct:court Pkwy:parkway Mt:mount N:north S:south "
    "E:east W:west"
):
    _abbr, _full = _pair.split(":")
    _EXPANSIONS[_abbr] = (*_EXPANSIONS.get(_abbr, ()), _full)


def vocabulary(text: str) -> set[str]:
    """Stems of every word of ``text``, camel-case parts included, plus each adjacent pair
    glued together so that "Take Out"/"Wi Fi" also support "takeout"/"wifi", plus the full
    form of state and street abbreviations (case-sensitive: "CA" expands, "ca" does not)."""
    stems: set[str] = set()
    previous = ""
    for word, _, _ in words(text):
        stems.update(stem(full) for full in _EXPANSIONS.get(word, ()))
        for part in [*split_camel(word), word]:
            stems.add(stem(part))
        parts = split_camel(word)
        for a, b in itertools.pairwise(parts):
            stems.add(stem(a + b))
        if previous:
            stems.add(stem(previous + parts[0]))
        previous = parts[-1]
    return stems


def parse_record(reference: str) -> object | None:
    """The reference as a Python/JSON literal (data-to-text records are ``str(dict)``), or None.

    ``ast.literal_eval`` evaluates literals only, never code, so untrusted data is safe here.
    """
    text = reference.strip()
    if not text.startswith(("{", "[")):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def walk_record(record: object, key: str = "") -> Iterator[tuple[str, object]]:
    """(key, leaf value) pairs of a nested dict/list record; list items inherit their key."""
    if isinstance(record, dict):
        for k, v in record.items():
            yield from walk_record(v, str(k))
    elif isinstance(record, list | tuple):
        for v in record:
            yield from walk_record(v, key)
    else:
        yield key, record


_SENTENCE_RE = re.compile(r"(?:[^.!?\n]|[.!?]+(?=[^\s.!?]))+[.!?]*")


def sentences(text: str) -> list[tuple[int, int]]:
    """Offsets of the sentences of ``text``: one ends at . ! ? before a space, or at a newline.

    "4.5", "a.m" and "St.Louis" do not end one, "St. Louis" does: good enough for claims.
    """
    return [trim_span(text, *m.span()) for m in _SENTENCE_RE.finditer(text) if m.group().strip()]


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping, non-empty spans (touching spans are merged)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def trim_span(
    text: str, start: int, end: int, strip: str = " \t\r\n.,;:!?\"'()[]"
) -> tuple[int, int]:
    """Shrink [start, end) past leading/trailing whitespace and punctuation."""
    while start < end and text[start] in strip:
        start += 1
    while end > start and text[end - 1] in strip:
        end -= 1
    return start, end
