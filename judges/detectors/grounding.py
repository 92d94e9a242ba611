"""Grounding detector: sentences of the response that the free-text source does not support.

Each sentence of the response is aligned with the source word by word: a sentence whose
content words are mostly (``min_fraction`` or more, and at least ``min_unsupported``) absent
from the source states something the source does not, so it is flagged. For an answer to a
question over passages, the sentence is the unit people label (an invented step, an added
warning). A summary's errors are shorter (a wrong detail inside a sentence that is otherwise
right), so with ``clauses=True`` only the clauses of an unsupported sentence that are
themselves mostly unsupported are flagged.

Lexical, not semantic: a paraphrase in new words can be flagged, and a contradiction that
reuses the source's words is missed (the ``polarity`` and ``facts`` detectors look for those).
A structured record is left to the data-to-text detectors: nothing is flagged against one.
"""

from __future__ import annotations

from juryflow.judges.detectors.support import Source, clauses, content_words, is_meta
from juryflow.judges.detectors.text import merge_spans, parse_record, sentences, trim_span

MIN_FRACTION = 0.5
"""Share of a sentence's content words absent from the source from which it is flagged."""
MIN_UNSUPPORTED = 2
"""Fewest absent content words that flag a sentence: one new word is a paraphrase."""
CLAUSE_FRACTION = 0.5
"""Share of a clause's content words absent from the source from which it is flagged."""


class GroundingDetector:
    """Flags sentences (or, with ``clauses``, the clauses of such sentences) whose content
    words are mostly absent from a free-text source."""

    def __init__(
        self,
        name: str = "grounding",
        *,
        clauses: bool = False,
        min_fraction: float = MIN_FRACTION,
        min_unsupported: int = MIN_UNSUPPORTED,
        clause_fraction: float = CLAUSE_FRACTION,
    ) -> None:
        self.name = name
        self.clauses = clauses
        self.min_fraction = min_fraction
        self.min_unsupported = min_unsupported
        self.clause_fraction = clause_fraction

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        if parse_record(reference) is not None:
            return []
        source = Source.of(reference)
        spans: list[tuple[int, int]] = []
        for start, end in sentences(response):
            if is_meta(response[start:end]):
                continue
            found = content_words(response, start, end)
            missing = [w for w in found if not source.supports(w[0])]
            if len(missing) < self.min_unsupported or len(missing) < self.min_fraction * len(found):
                continue
            if not self.clauses:
                spans.append((start, end))
                continue
            for c_start, c_end in clauses(response, start, end):
                inside = [w for w in found if c_start <= w[1] < c_end]
                absent = sum(w in missing for w in inside)
                if absent and absent >= self.clause_fraction * len(inside):
                    spans.append(trim_span(response, c_start, c_end))
        return merge_spans(spans)
