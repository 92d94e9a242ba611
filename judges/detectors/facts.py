"""Facts detector: numbers, dates and names of the response that a free-text source never
states, read in context.

The values and names are found as the data-to-text ``numbers`` and ``names`` detectors find
them (a date is compared as a date, "twenty" as 20, a name word by word, a respelling is no
invention). What free text adds is the numbers and capitals that are not claims about the
source: a list's item numbers ("4. Save the changes"), the response's own length ("a summary
in 64 words"), citations of the passages ("(Passage 2 & 3)"), a preamble ("Sure! Here's
...:"), a unit's letter ("145°F"), a heading ("Side Effects:") and a name the source
gives as an acronym ("FLSA") or spells out. Those are dropped. And a count is read with its
noun: "10 rebounds" is flagged where the source counts rebounds, and states 10, but never
10 rebounds (:mod:`juryflow.judges.detectors.counts`).
"""

from __future__ import annotations

import re

from juryflow.judges.detectors.counts import misbound_counts
from juryflow.judges.detectors.names import NamesDetector
from juryflow.judges.detectors.numbers import NumbersDetector
from juryflow.judges.detectors.support import is_meta
from juryflow.judges.detectors.text import merge_spans, parse_record, sentences

_NOT_CLAIMS = re.compile(
    r"(?m)^[ \t*+-]*\d{1,2}[.)](?=\s)"
    r"|\b\d+\s+(?:words|sentences|paragraphs|bullet\s+points)\b"
    r"|\(?\bpassages?\s+\d+(?:\s*(?:,|&|and|-)\s*\d+)*\)?"
    r"|°\s?[CF]\b",
    re.IGNORECASE,
)
"""List item numbers, the response's own length, citations of passages, units of degrees."""
_HEADING = re.compile(
    r"(?m)^[ \t]*(?:[*+#-]+|\d{1,2}[.)])?[ \t]*\**(?P<heading>[A-Z][\w'’-]*(?:[ \t]+[\w'’-]+){0,4})"
    r"\**[ \t]*:"
)
"""A heading of at most five words opening a line or a list item ("2. Scope of Coverage:",
"Side Effects:"): capitalised as a title, not as a name."""
_JOINERS = frozenset({"of", "and", "the", "for", "in", "on", "to", "a", "an", "&"})
_ACRONYM = re.compile(r"\b[A-Z]{2,6}\b")
_CAPITALISED_RUN = re.compile(r"(?:[A-Z][a-z]+(?:\s+(?:of|and|the|for|&)\s+|\s+)?)+")


def _initials(name: str) -> str:
    words = re.findall(r"[A-Za-z][\w'’-]*", name)
    return "".join(w[0] for w in words if w.lower() not in _JOINERS).upper()


def _abbreviates(name: str, reference: str) -> bool:
    """``name`` and a name of ``reference`` are one another's acronym: "Fair Labor
    Standards Act" for "FLSA", "FEHA" for "Fair Employment and Housing Act"."""
    if _ACRONYM.fullmatch(name):
        return any(_initials(m.group()) == name for m in _CAPITALISED_RUN.finditer(reference))
    initials = _initials(name)
    return len(initials) >= 2 and initials in set(_ACRONYM.findall(reference))


class FactsDetector:
    """Flags numbers, dates and names that the free-text source does not state."""

    name = "facts"

    def __init__(self) -> None:
        self._numbers = NumbersDetector()
        self._names = NamesDetector()

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        if parse_record(reference) is not None:
            return []
        ignored = [m.span() for m in _NOT_CLAIMS.finditer(response)]
        ignored += [(s, e) for s, e in sentences(response) if is_meta(response[s:e])]
        headings = [m.span("heading") for m in _HEADING.finditer(response)]
        names = [
            (s, e)
            for s, e in self._names.detect(reference, response)
            if not _abbreviates(response[s:e], reference)
            and not any(h_s <= s and e <= h_e for h_s, h_e in headings)
        ]
        found = self._numbers.detect(reference, response) + names
        found += misbound_counts(reference, response)
        return merge_spans(
            (s, e) for s, e in found if not any(s < i_e and i_s < e for i_s, i_e in ignored)
        )
