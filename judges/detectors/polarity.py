"""Polarity detector: a claim the source makes one way and the response the other way:
negated ("did not", "no", "never") on one side only, or hedged in the source ("may",
"reportedly", "is suspected of") and stated as certain in the response.

Each clause of the response is looked for in the source with its cue words blanked on both
sides (rapidfuzz's best partial alignment): a clause found almost word for word
(``min_similarity``) whose source passage carries a negation it lacks, or lacks one it
carries, says the opposite of the source; one whose source passage hedges while it does not
states as certain what the source does not. Only near-copies are compared, so that two
sentences about different things never count as a flip; the flipped clause is flagged.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from juryflow.judges.detectors.support import clauses, content_words, is_meta
from juryflow.judges.detectors.text import merge_spans, parse_record, sentences, trim_span

_NEGATION = re.compile(
    r"\b(?:no|not|never|without|neither|nor|none|cannot|nothing|nobody|unable)\b"
    r"|n[’']t\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:may|might|could|possibly|perhaps|likely|unlikely|probably|reportedly|allegedly"
    r"|suspected|believed|apparently|potentially|unconfirmed)\b",
    re.IGNORECASE,
)
_NOT_A_FLIP = re.compile(r"\bnot\s+only\b|\bno\s+(?:longer|doubt|matter)\b", re.IGNORECASE)
"""Negations that assert rather than deny ("not only", "no doubt")."""
_CUES = re.compile(f"{_NEGATION.pattern}|{_HEDGE.pattern}|\\b(?:do|does|did)\\b", re.IGNORECASE)
"""What is blanked before aligning: the cues, and the auxiliary a negation brings along."""

_ABOUT_SOURCE = re.compile(
    r"\b(?:passages?|article|text|information|details?|mention(?:s|ed)?)\b", re.IGNORECASE
)
"""A clause about what the source says ("the passages do not mention ..."), not a claim."""

MIN_SIMILARITY = 85.0
"""rapidfuzz partial ratio (0-100) from which a clause is the same claim as a source passage."""
MIN_WORDS = 4
"""Fewest content words of a clause worth aligning: short clauses align anywhere."""


def _blank(text: str) -> str:
    """``text`` lower-cased with its cue words blanked, offsets kept."""
    return _CUES.sub(lambda m: " " * len(m.group()), text.lower())


def _negated(text: str) -> bool:
    return any(not _NOT_A_FLIP.match(text, m.start()) for m in _NEGATION.finditer(text))


class PolarityDetector:
    """Flags response clauses that copy a source passage but flip its negation, or drop its
    hedge."""

    name = "polarity"

    def __init__(self, min_similarity: float = MIN_SIMILARITY) -> None:
        self.min_similarity = min_similarity

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        if parse_record(reference) is not None:
            return []
        source = [(reference[s:e], _blank(reference[s:e])) for s, e in sentences(reference)]
        spans: list[tuple[int, int]] = []
        for start, end in sentences(response):
            if is_meta(response[start:end]):
                continue
            for c_start, c_end in clauses(response, start, end):
                if len(content_words(response, c_start, c_end)) < MIN_WORDS:
                    continue
                if _ABOUT_SOURCE.search(response, c_start, c_end):
                    continue
                if self._flips(response[c_start:c_end], source):
                    spans.append(trim_span(response, c_start, c_end))
        return merge_spans(spans)

    def _flips(self, clause: str, source: list[tuple[str, str]]) -> bool:
        blanked = " ".join(_blank(clause).split())
        best, passage = self.min_similarity, None
        for original, blank in source:
            found = fuzz.partial_ratio_alignment(blanked, blank, score_cutoff=best)
            if found is not None and found.score >= best:
                # An alignment starting in blanked cues ("did not" before the copied verb)
                # takes them in: they are part of the passage's claim.
                lo = found.dest_start
                if lo < len(blank) and blank[lo].isspace():
                    while lo > 0 and blank[lo - 1].isspace():
                        lo -= 1
                best, passage = found.score, original[lo : found.dest_end]
        if passage is None:
            return False
        if _negated(clause) != _negated(passage):
            return True
        return bool(_HEDGE.search(passage)) and not _HEDGE.search(clause)
