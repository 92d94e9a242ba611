"""What a record's star ratings say of its reviews, and the words that contradict them.

A Yelp-style record holds the business's average (``business_stars``) and a few reviews,
each with its ``review_stars``. A response summarises them in words ("mostly positive
reviews", "highly rated", "two of the three reviews are positive"), and those words can
contradict the stars as plainly as a wrong number does. Only plain contradictions are
flagged: reviews called positive where every one has 2 stars or less and the average is 3
or less; called negative where every one has 4 stars or more and so has the average; called
mixed where every review and the average lie on one side; "highly rated" at 3 stars or less.
A 3-star review may be told either way, and the listed reviews are a sample of the
business's, so the average must agree as well.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

POSITIVE_STARS = 4.0
NEGATIVE_STARS = 2.0

_REVIEWS = r"(?:reviews?|feedback|ratings?|opinions|experiences?|reputation|feelings)"
_POSITIVE = re.compile(
    rf"\b(?:(?:overwhelmingly|mostly|generally|largely|very|highly|overall)\s+)?"
    rf"(?:positive|glowing|rave|favou?rable|excellent|great)\s+{_REVIEWS}"
    r"|\brave[sd]?\s+about\b",
    re.IGNORECASE,
)
_NEGATIVE = re.compile(
    rf"\b(?:(?:overwhelmingly|mostly|generally|largely|very|overall)\s+)?"
    rf"(?:negative|poor|bad|unfavou?rable|scathing)\s+{_REVIEWS}",
    re.IGNORECASE,
)
_MIXED = re.compile(
    rf"\bmixed\s+{_REVIEWS}|\b{_REVIEWS}\s+(?:are|were|is|have\s+been|seem|appear)\s+"
    r"(?:\w+\s+)?mixed\b|\bhit[\s-]or[\s-]miss\b",
    re.IGNORECASE,
)
_HIGHLY_RATED = re.compile(
    r"\b(?:an?|is)\s+(?P<claim>(?:highly|well|top|best)[\s-]rated)\b", re.IGNORECASE
)
"""The business called highly rated ("is a highly-rated food truck"), not one of its dishes
("the crème brûlée has been highly rated")."""
_SOME = re.compile(r"\b(?:one|a|another|some|several|few|certain|other)\s+(?:\w+\s+)?$", re.I)
"""'one negative review' speaks of some reviews, not of them all."""


@dataclass(frozen=True)
class Stars:
    """The record's average and the stars of each of its reviews."""

    average: float | None
    reviews: tuple[float, ...]

    def counts(self) -> set[float]:
        """Counts a response may state: reviews, positive ones, negative ones, per star."""
        by_star = Counter(self.reviews)
        positive = sum(s >= POSITIVE_STARS for s in self.reviews)
        negative = sum(s <= NEGATIVE_STARS for s in self.reviews)
        return {float(n) for n in (len(self.reviews), positive, negative, *by_star.values())}


def record_stars(record: object) -> Stars | None:
    """The stars of a Yelp-style record, or None when it lists no rated review."""
    if not isinstance(record, dict):
        return None
    reviews = record.get("review_info")
    listed = (
        [_number(r.get("review_stars")) for r in reviews if isinstance(r, dict)]
        if isinstance(reviews, list)
        else []
    )
    stars = tuple(s for s in listed if s is not None)
    if not stars:
        return None
    return Stars(_number(record.get("business_stars")), stars)


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def contradictions(response: str, stars: Stars) -> Iterator[tuple[int, int]]:
    """Spans of words about the reviews or the rating that the stars contradict."""
    average = stars.average
    # A 3-star review may be read either way: only reviews all on one side count.
    all_positive = all(s >= POSITIVE_STARS for s in stars.reviews) and (
        average is None or average >= POSITIVE_STARS
    )
    all_negative = all(s <= NEGATIVE_STARS for s in stars.reviews) and (
        average is None or average <= 3.0
    )
    checks = [
        (_POSITIVE, all_negative),
        (_NEGATIVE, all_positive),
        (_MIXED, all_positive or (all_negative and (average is None or average <= 2.0))),
        (_HIGHLY_RATED, average is not None and average <= 3.0),
    ]
    for pattern, contradicted in checks:
        if not contradicted:
            continue
        for m in pattern.finditer(response):
            if pattern is _HIGHLY_RATED:
                yield m.span("claim")
            elif not _SOME.search(response, 0, m.start()):
                yield m.span()
