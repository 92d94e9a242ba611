"""What a free-text source (passages, an article) supports, word by word, and which sentences
of a response claim nothing: shared by the detectors for question answering and summaries.

A word is supported when the source has a word of the same crude stem or of the same first
five letters ("survivors"/"survived", "injured"/"injuries"): summaries and answers inflect
and derive the source's words far more than data-to-text responses do, and a prefix is the
cheapest morphology that needs no word list. Framing words ("passage", "article",
"mentioned", "reported") carry no claim and never count either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from juryflow.judges.detectors.text import (
    STOPWORDS,
    normalize_word,
    stem,
    words,
    wordset,
)

PREFIX = 5
"""Letters of the prefix that also stands for a word of six letters or more."""

_FRAMING = frozenset(
    stem(w)
    for w in wordset(
        """
        passage passages provided based information mention mentioned mentions according
        answer question note noted state states stated given text article summary news
        report reported reports said says told also however example specific specifically
        following follows step steps additionally overall important
        """
    )
)
"""Words of the prose that reports a source, not claims about it."""

_LIGHT = frozenset(
    stem(w)
    for w in wordset(
        """
        since despite although though later currently actually eventually initially finally
        quickly recently soon still even already ever now then total able make made take
        taken took become became get getting got gotten help found find left far near nearby
        due either seem seems appear appears look looking start started part way number many
        several various ongoing face used use including include across around away continue
        remain known new old first last next back like well really likely different
        certain particular possible able thing things something lot
        """
    )
)
"""Light words: adverbs, light verbs and quantifiers a paraphrase adds freely ("has since
been", "was able to", "made their way"); they carry no claim the source could lack."""

_META = re.compile(
    r"^\W*(?:sure\b|here(?:'s|’s|\s+is|\s+are)\b|okay\b|ok\b|certainly\b|i\s+hope\b"
    r"|(?:in\s+)?summary\b|based\s+on\s+(?:the|these|this)\s+(?:given\s+|provided\s+)?"
    r"(?:passages?|article|information|text|news)\b[^.!?]*[:,]\s*$"
    r"|(?:please\s+)?(?:let\s+me\s+know|feel\s+free)\b)",
    re.IGNORECASE,
)
"""A sentence about the response itself ("Sure! Here's a summary in 64 words:", "Let me
know if you have other questions"), not a claim."""
_SOURCE_WORD = re.compile(
    r"\b(?:passages?|article|text|context|information\s+(?:provided|given))\b", re.IGNORECASE
)
_SILENCE = re.compile(
    r"\b(?:no|not|unable|neither|nor|none)\b|n[’']t\b|\b(?:lacks?|silent|unclear)\b",
    re.IGNORECASE,
)

_CLAUSE_BREAK = re.compile(
    r"[,;:()]\s+|\s+(?:and|but|while|whereas|although|which|who|where|after|before|because"
    r"|as|with|including)\s+"
)
"""Clause boundaries: punctuation before a space, or a word that starts a new clause."""


def word_key(word: str) -> str:
    """The form compared with the source's: the first letters of a long word, else its stem."""
    w = normalize_word(word)
    if w.endswith("'s"):
        w = w[:-2]
    return w[:PREFIX] if len(w) > PREFIX else stem(w)


def content_words(text: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """(word, start, end) of the words of ``text[start:end]`` that can carry a claim."""
    return [
        (w, start + s, start + e)
        for w, s, e in words(text[start:end])
        if len(w) > 2
        and normalize_word(w) not in STOPWORDS
        and stem(w) not in _FRAMING
        and stem(w) not in _LIGHT
    ]


def is_meta(sentence: str) -> bool:
    """The sentence speaks of the response itself (a preamble, an offer of more help), or
    says what the source does not say ("the passages do not mention the dose"), so it
    claims nothing about the world."""
    if _META.search(sentence):
        return True
    return bool(_SOURCE_WORD.search(sentence)) and bool(_SILENCE.search(sentence))


def clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The clauses of the sentence ``text[start:end]``, as offsets into ``text``."""
    out, at = [], start
    for m in _CLAUSE_BREAK.finditer(text, start, end):
        out.append((at, m.start()))
        at = m.end()
    out.append((at, end))
    return [(s, e) for s, e in out if e > s]


@dataclass(frozen=True, slots=True)
class Source:
    """The words of a free-text source, in comparable form."""

    keys: frozenset[str]
    """Stems and prefixes of every word of the source."""

    @classmethod
    def of(cls, text: str) -> Source:
        keys: set[str] = set()
        for w, _, _ in words(text):
            keys.add(word_key(w))
            keys.add(stem(w))
        return cls(frozenset(keys))

    def supports(self, word: str) -> bool:
        return word_key(word) in self.keys or stem(word) in self.keys
