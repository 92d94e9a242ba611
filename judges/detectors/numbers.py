"""Numbers detector: numeric claims of the response (times, dates, prices, ratings, counts)
whose value appears nowhere in the reference.

Values are compared, not strings, so "4" supports "4.0 stars", "20:0" supports "8 PM" and
"2022-01-02" supports "January 2, 2022". Two claims are checked against the record's own
field rather than against any value anywhere, since that is where a generator goes wrong
with values that do occur in the record:

- opening hours, against ``hours`` day by day (:mod:`juryflow.judges.detectors.schedule`), flagged
  whole ("open from 11 AM to 9 PM Tuesday to Sunday"): the times may each be right;
- the business's rating ("an average rating of 4.0 stars"), against ``business_stars``
  rather than against every review's stars.

Words about the reviews that the stars contradict ("highly rated" at 2.5 stars, "mixed
reviews" when every review has 4 or 5) are flagged too
(:mod:`juryflow.judges.detectors.reviews`), and counts of reviews by their stars ("two of
the three reviews are positive") are values the record states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from juryflow.judges.detectors import reviews, schedule
from juryflow.judges.detectors.text import merge_spans, parse_record, walk_record

_MONTH_NAMES = (
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
    ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
    ("oct", "october"), ("nov", "november"), ("dec", "december"),
)  # fmt: skip
_MONTHS = {name: i + 1 for i, names in enumerate(_MONTH_NAMES) for name in names}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))

# "one" is left out on purpose: "one reviewer", "one of the best" are not counts.
_NUMBER_WORDS = {
    w: i + 2
    for i, w in enumerate(
        ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
         "nineteen", "twenty")
    )
}  # fmt: skip
_WORD_RE = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
# One alternation, most specific first, so each token is read once with its unit attached.
_TOKEN_RE = re.compile(
    rf"""
    (?P<iso>\b(?P<iy>\d{{4}})-(?P<im>\d{{1,2}})-(?P<id>\d{{1,2}})\b)
  | (?P<mdy>\b(?P<m1>{_MONTH_RE})\.?\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\b
        (?:,?\s+(?P<y1>\d{{4}})\b)?)
  | (?P<dmy>\b(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{_MONTH_RE})\b
        (?:,?\s+(?P<y2>\d{{4}})\b)?)
  | (?P<my>\b(?P<m3>{_MONTH_RE})\.?,?\s+(?P<y3>\d{{4}})\b)
  | (?P<ampm>\b(?P<ah>\d{{1,2}})(?::(?P<am>\d{{2}}))?\s*(?P<ap>[ap])\.?m\b\.?)
  | (?P<clock>\b(?P<ch>\d{{1,2}}):(?P<cm>\d{{1,2}})\b)
  | (?P<money>\$\s?(?P<mv>{_NUM}))
  | (?P<plain>(?<![\w.])(?<![A-Za-z]-)(?P<pv>{_NUM})(?:st|nd|rd|th)?
        (?P<unit>\s?(?:%|percent\b)|[\s-]stars?\b)?)
  | (?P<word>\b(?P<wv>{_WORD_RE})\b(?P<half>\s+and\s+a\s+half\b)?(?P<wunit>[\s-]stars?\b)?)
    """,
    re.IGNORECASE | re.VERBOSE,
)
_OUT_OF_RE = re.compile(r"out\s+of\s*$", re.IGNORECASE)
"""The "5" of "4.5 out of 5" is the scale, not a claim."""


def _num(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass
class _Facts:
    """Every value the reference states, in comparable form."""

    numbers: set[float] = field(default_factory=set)
    times: set[int] = field(default_factory=set)  # minutes after midnight
    dates: set[tuple[int | None, int, int | None]] = field(default_factory=set)

    def add_date(self, year: int | None, month: int, day: int | None) -> None:
        # Also store the partial forms, so "January 2" and "January 2022" are supported too.
        for y in (year, None):
            for d in (day, None):
                self.dates.add((y, month, d))


def _time(hour: int, minute: int, ampm: str | None) -> int:
    if ampm and hour <= 12:
        # "21:00 PM" happens: a 24-hour hour keeps its value whatever the suffix.
        hour = hour % 12 + (12 if ampm.lower() == "p" else 0)
    return (hour % 24) * 60 + minute


def _date(m: re.Match[str]) -> tuple[int | None, int, int | None] | None:
    """(year, month, day) of a date token, None when the token is not a date."""
    if m.group("iso"):
        return int(m["iy"]), int(m["im"]), int(m["id"])
    if not (m.group("mdy") or m.group("dmy") or m.group("my")):
        return None
    year, day = m["y1"] or m["y2"] or m["y3"], m["d1"] or m["d2"]
    month = _MONTHS[(m["m1"] or m["m2"] or m["m3"]).lower()]
    return (int(year) if year else None), month, (int(day) if day else None)


def _facts(reference: str) -> _Facts:
    facts = _Facts()
    for m in _TOKEN_RE.finditer(reference):
        date = _date(m)
        if date is not None:
            facts.add_date(*date)
            if date[0] is not None:
                facts.numbers.add(float(date[0]))
        elif m.group("ampm"):
            facts.times.add(_time(int(m["ah"]), int(m["am"] or 0), m["ap"]))
        elif m.group("clock"):
            facts.times.add(_time(int(m["ch"]), int(m["cm"]), None))
        elif m.group("word"):
            facts.numbers.add(float(_NUMBER_WORDS[m["wv"].lower()]))
        elif m["mv"] or m["pv"]:
            facts.numbers.add(_num(m["mv"] or m["pv"]))
    # A record's structure states counts too: three reviews, seven opening days.
    record = parse_record(reference)
    if record is not None:
        facts.numbers.update(float(n) for n in _container_sizes(record))
        for _, value in walk_record(record):
            if isinstance(value, int | float) and not isinstance(value, bool):
                facts.numbers.add(float(value))
        # Closing times are read as the hours check reads them ("7:0-10:30": 10:30 PM too).
        table = schedule.record_hours(record.get("hours")) if isinstance(record, dict) else None
        for hours in (table or {}).values():
            if hours is not None:
                facts.times |= schedule.closings(hours)
        # "Two of the three reviews are positive": counts the review stars state.
        stars = reviews.record_stars(record)
        if stars is not None:
            facts.numbers |= stars.counts()
    return facts


def _container_sizes(record: object) -> list[int]:
    if isinstance(record, dict):
        return [len(record)] + [n for v in record.values() for n in _container_sizes(v)]
    if isinstance(record, list | tuple):
        return [len(record)] + [n for v in record for n in _container_sizes(v)]
    return []


def _supported(m: re.Match[str], facts: _Facts) -> bool:
    date = _date(m)
    if date is not None:
        return date in facts.dates
    if m.group("ampm"):
        return _time(int(m["ah"]), int(m["am"] or 0), m["ap"]) in facts.times
    if m.group("clock"):
        hour, minute = int(m["ch"]), int(m["cm"])
        # No am/pm: "9:00" may be 9:00 or 21:00.
        return bool({_time(hour, minute, None), _time(hour + 12, minute, None)} & facts.times)
    if m.group("word"):
        return _NUMBER_WORDS[m["wv"].lower()] + (0.5 if m["half"] else 0.0) in facts.numbers
    value = _num(m["mv"] or m["pv"])
    # An hour of the day ("open until 9") may be stated only as a time in the reference.
    hour_like = bool(m.group("plain")) and not m.group("unit") and value in range(25)
    return value in facts.numbers or (
        hour_like and bool({int(value) * 60, (int(value) + 12) * 60} & facts.times)
    )


_RATING_RE = re.compile(
    r"""
    \brating\s+of\s+(?:about\s+|around\s+|approximately\s+)?(?P<v1>\d(?:\.\d+)?)
  | \brated\s+(?:at\s+)?(?P<v2>\d(?:\.\d+)?)
  | (?P<v3>\d(?:\.\d+)?)[\s-]stars?\s+(?:average\s+|overall\s+|business\s+)?rating\b
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""The business's own rating; a review's stars are said with "gave" or "one reviewer"."""
_ONE_REVIEW = re.compile(
    r"\b(?:gave|give|gives|giving)\b"
    r"|\b(?:one|another|a|first|second|third|last|each|this|that)\s+(?:\w+\s+)?"
    r"(?:review|reviewer|customer|guest|diner|patron|visitor)\b",
    re.IGNORECASE,
)
_SENTENCE_START = re.compile(r"(?:[.!?]\s|\n)(?!.*(?:[.!?]\s|\n))", re.DOTALL)


@dataclass(frozen=True)
class _Checked:
    """Spans already judged by a field check, and the unsupported ones among them."""

    covered: list[tuple[int, int]]
    unsupported: list[tuple[int, int]]


def _business_stars(record: object) -> float | None:
    if not isinstance(record, dict):
        return None
    stars = record.get("business_stars")
    return float(stars) if isinstance(stars, int | float) and not isinstance(stars, bool) else None


def _rating_claims(response: str, stars: float) -> _Checked:
    covered, unsupported = [], []
    for m in _RATING_RE.finditer(response):
        before = response[: m.start()]
        cut = _SENTENCE_START.search(before)
        if _ONE_REVIEW.search(before[cut.end() if cut else 0 :]):
            continue
        name = next(g for g in ("v1", "v2", "v3") if m.group(g))
        span = m.span(name)
        covered.append(span)
        if float(m.group(name)) != stars:
            unsupported.append(span)
    return _Checked(covered, unsupported)


def _hours_claims(response: str, record: object) -> _Checked:
    table = schedule.record_hours(record.get("hours")) if isinstance(record, dict) else None
    if table is None:
        return _Checked([], [])
    verdicts = schedule.check(response, table)
    return _Checked(
        [v.claimed for v in verdicts],
        [(v.start, v.end) for v in verdicts if not v.supported],
    )


def _inside(span: tuple[int, int], covered: list[tuple[int, int]]) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in covered)


class NumbersDetector:
    """Flags numbers, dates, times, prices, ratings and counts the reference does not state,
    opening hours the record's ``hours`` contradict, a rating other than its stars, and words
    about the reviews that their stars contradict."""

    name = "numbers"

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        facts = _facts(reference)
        record = parse_record(reference)
        checked = [_hours_claims(response, record)]
        stars = _business_stars(record)
        if stars is not None:
            checked.append(_rating_claims(response, stars))
        covered = [span for c in checked for span in c.covered]
        spans = [span for c in checked for span in c.unsupported]
        review_stars = reviews.record_stars(record)
        if review_stars is not None:
            spans.extend(reviews.contradictions(response, review_stars))
        for m in _TOKEN_RE.finditer(response):
            if _inside(m.span(), covered):
                continue
            if m.group("plain") and _OUT_OF_RE.search(response[max(0, m.start() - 12) : m.start()]):
                continue
            if not _supported(m, facts):
                start, end = m.span()
                while end > start and response[end - 1] in " .-":
                    end -= 1
                spans.append((start, end))
        return merge_spans(spans)
