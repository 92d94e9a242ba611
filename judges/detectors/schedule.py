"""Opening-hours claims checked against a record's ``hours`` (Yelp style: ``{"Monday":
"11:30-20:0", ...}``): "open from 11 AM to 9 PM Tuesday through Sunday", "closed on Mondays",
"open seven days a week".

A value check ("is 9 PM anywhere in the record?") misses the commonest data-to-text
hallucination about hours: right times on the wrong days. So each time is tied to the days it
is said of, and the claim is compared with those days' hours. Tying is positional, within one
sentence: a time takes the day group right after it ("11 to 9 on Fridays"), else an unclaimed
one right before it ("Fridays, 11 to 9"), else it is said of no day in particular and only has
to match one of the record's days. A claim about fewer days overrides a broader one in the
same sentence ("11 to 7:30 daily, until 8 on Fridays").

``0:0-0:0`` is read as closed: annotators of RAGTruth treat "open every day" as wrong for such
a record, and nothing says the business is open around the clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from juryflow.judges.detectors.text import STOPWORDS, sentences, wordset

_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ALL_DAYS = frozenset(range(7))
_WEEKDAYS = frozenset(range(5))
_WEEKEND = frozenset({5, 6})

_DAY = r"(?:mon|tues?|wednes|thurs?|fri|satur|sun)days?\b"
_ABBR = r"(?:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\b\.?"
_DAY_RE = re.compile(
    rf"""
    \b(?:
      (?P<range>(?P<a>{_DAY}|{_ABBR})\s*(?:-|–|—|to|through|thru|until|till)\s*(?P<b>{_DAY}|{_ABBR}))
    | (?P<every>(?:every|each)\s+day(?:\s+of\s+the\s+week)?|daily|all\s+week(?:\s+long)?
        |(?:seven|7)\s+days\s+(?:a|per|of\s+the)\s+week|throughout\s+the\s+week)
    | (?P<weekdays>weekdays|weeknights)
    | (?P<weekends>weekends?)
    | (?P<one>{_DAY})
    )(?!\w)
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""A day expression; abbreviations only inside a range, where "Sun"/"Sat"/"Wed" are safe."""

_DAY_JOIN = re.compile(r"^\s*(?:,\s*(?:and\s+|&\s*|or\s+)?|and\s+|&\s*|or\s+|/\s*)$", re.IGNORECASE)
"""What sits between the days of one list: "Tuesdays, Wednesdays, and Thursdays"."""

_STRICT = (
    r"(?:(?<![\w:.])\d{1,2}(?::\d{1,2})?\s*[ap]\.?\s?m\b\.?|(?<![\w:.])\d{1,2}:\d{1,2}(?!\d)"
    r"|\bnoon\b|\bmidnight\b)"
)
"""A time that cannot be anything else; "noon" only as a word ("afternoon" is no time)."""
_LOOSE = rf"(?:{_STRICT}|(?<![\w:.])\d{{1,2}}(?![\d:]))"
_TIME_RE = re.compile(
    rf"""
    (?P<range>(?P<a>{_LOOSE})\s*(?:-|–|—|to|until|till|and)\s*(?P<b>{_STRICT}))
  | (?P<one>{_STRICT})
    """,
    re.IGNORECASE | re.VERBOSE,
)
_CLOSE_CUE = re.compile(r"\b(?:until|till|to|closes?|closing|close)(?:\s+at)?\s*$", re.IGNORECASE)
_OPEN_CUE = re.compile(r"\b(?:opens?|opening|starts?|starting|from)(?:\s+at)?\s*$", re.IGNORECASE)

_HOURS_TALK = re.compile(
    r"\b(?:open|opens|opened|operat\w*|hours|closes|closing|closed|close)\b", re.IGNORECASE
)
"""A sentence must speak of opening hours for its days and times to be claims about them."""
_OTHER_SCHEDULE = re.compile(r"\bhappy\s+hours?\b|\bdeliver", re.IGNORECASE)
"""Schedules that are not the opening hours: a happy hour, a delivery window."""
_DAY_CUE = re.compile(
    r"(?P<closed>\b(?:closed|shut|off|except|(?:not|never|n't)\s+(?:be\s+)?(?:open|operat\w*)))\b"
    r"|\b(?:open|opens|opened|operat\w*|hours|serv(?:es|ing))\b",
    re.IGNORECASE,
)
"""What a sentence says of the days it names without a time: open, or closed."""
_FORWARD_CUE = re.compile(r"except", re.IGNORECASE)
"""'except' only reaches the days after it: "every day except Mondays"."""
_CONTRAST = re.compile(r"\b(?:but|however|while|whereas|yet)\b|;", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(
    r"[,;:(—–]|\b(?:but|while|whereas|although|though)\b"
    r"|\band\s+(?=(?:the|its|their|it|they|there)\b)",
    re.IGNORECASE,
)
"""Where what a sentence says of one thing may give way to another thing."""
_OTHER_THING = re.compile(
    r"\b(?:patio|terrace|deck|rooftop|seating|kitchen|delivery|deliveries|happy\s+hours?"
    r"|specials|deals|music|karaoke|trivia|bingo|buffet|drive[\s-]?thru|market|shows?|events?)\b"
    r"|\b(?:breakfast|brunch|lunch|dinner)(?=\s+(?:is|are|was|service|menu|hours?|served"
    r"|runs?|starts?|begins?|ends?|available)\b)",
    re.IGNORECASE,
)
"""Parts and services of a business that keep hours of their own ("the patio opens at 8",
"breakfast is served until 11"): their hours are not the opening hours."""
_FOR_A_MEAL = re.compile(r"\bfor\s+(?:\w+\s+(?:and|&|or)\s+)?$", re.IGNORECASE)
"""'open for breakfast': the business opening for a meal keeps business hours."""
_OWN_HOURS_CUE = re.compile(r"\b(?:open|opens|operat\w*|hours|close|closes|closing)\b", re.I)
_SUBJECT_VERB = re.compile(
    r"(?:\s+(?!(?:and|or|but)\b)\w+){0,2}?"
    r"\s+(?:is|are|opens?|closes?|runs?|starts?|begins?|ends?|available|hours|served|service)\b",
    re.IGNORECASE,
)
"""After a part of the business, the verb that makes it the subject: "the patio is open"."""
_LATER_BEFORE = re.compile(
    r"\b(?:extended|longer|later|late)\s+(?:hours|closing(?:\s+times?)?)\s+(?:on\s+)?$", re.I
)
"""'extended hours on weekends': those days close later than some other day."""

_LEAD_RE = re.compile(
    r"(?:\b(?:open|opens|operates?|operating|runs?|closed)\s+)?"
    r"(?:\b(?:from|between|on|every)\s+)?$",
    re.IGNORECASE,
)
"""Words before a claim that belong to it: "is open from" 11 to 9."""

_GAP_AFTER = re.compile(r"^[\s,(]*(?:(?:on|from|every|each|and|the|of|for|during)\s+)*$", re.I)
_GAP_BEFORE = re.compile(r"^[\s,:(]*(?:[a-z']+[\s,]+){0,5}$", re.IGNORECASE)
_GAP_TIGHT = re.compile(r"^\s*(?:from|between|:)?\s*$", re.IGNORECASE)
"""Days this close before a time are that time's ("on Friday from 11 to 10")."""

Hours = dict[int, tuple[int, int] | None]
"""Day (0 = Monday) → (opens, closes) in minutes after midnight; None = closed."""


@dataclass(frozen=True)
class _Days:
    start: int
    end: int
    days: frozenset[int]
    vague: bool = False
    """ "Weekdays", "weekends": said loosely of the days the business opens among them."""


@dataclass(frozen=True)
class _Time:
    start: int
    end: int
    opens: frozenset[int] | None
    """Candidate opening minutes (an unmarked "9:00" may be 9:00 or 21:00); None: not said."""
    closes: frozenset[int] | None
    either: bool = False
    """A lone time with no cue ("at 9 PM"): it may be the opening or the closing time."""


@dataclass(frozen=True)
class _Claim:
    start: int
    end: int
    days: frozenset[int] | None
    """None: said of no day in particular."""
    time: _Time | None
    """None: a claim about days only ("open Monday through Sunday", "closed on Mondays")."""
    closed: bool = False
    vague: bool = False
    later: bool = False


@dataclass(frozen=True)
class Verdict:
    """One checked claim: where it is (with its lead, "open from"), whether the record bears
    it out, and where its own time and day expressions are."""

    start: int
    end: int
    supported: bool
    claimed: tuple[int, int]
    """Not to be checked again as plain values."""


def record_hours(hours: object) -> Hours | None:
    """The record's ``hours`` mapping in minutes, or None when there is none to check against."""
    if not isinstance(hours, Mapping) or not hours:
        return None
    table: Hours = dict.fromkeys(range(7))
    for name, value in hours.items():
        day = _day_index(str(name))
        span = _record_span(value)
        if day is not None and span is not None and span != (0, 0):
            table[day] = span
    return table


_RECORD_END = r"\s*(\d{1,2})(?:[:.](\d{1,2}))?\s*(?:([ap])\.?\s?m\b\.?)?\s*"
_RECORD_SPAN = re.compile(rf"{_RECORD_END}(?:-|–|—|to){_RECORD_END}", re.IGNORECASE)


def _record_span(value: object) -> tuple[int, int] | None:
    """(opens, closes) in minutes of "11:30-20:0" (Yelp), "7:00-22:30" or "7am - 10:30 pm"."""
    m = _RECORD_SPAN.fullmatch(str(value))
    if m is None or not (m[2] or m[5] or m[3] or m[6]):
        return None  # "7-10" is no time
    return _record_minutes(m[1], m[2], m[3]), _record_minutes(m[4], m[5], m[6])


def _record_minutes(hour: str, minute: str | None, ampm: str | None) -> int:
    h = int(hour)
    if ampm is not None and h <= 12:
        h = h % 12 + (12 if ampm.lower() == "p" else 0)
    return (h % 24) * 60 + int(minute or 0)


def closings(hours: tuple[int, int]) -> frozenset[int]:
    """The closing times a record's ``(opens, closes)`` may mean.

    A close after the opening but before 1 PM ("7:0-10:30") is read both ways: records
    are 24-hour, yet one open only 7:00 to 10:30 in the morning is rarer than one written in
    12-hour style, and people labelling RAGTruth do not flag "7:00am to 10:30pm" for it."""
    opens, closes = hours
    if opens < closes < 13 * 60 and closes >= 60:
        return frozenset({closes, closes + 12 * 60})
    return frozenset({closes})


def _day_index(word: str) -> int | None:
    w = word.lower().rstrip(".")
    for i, name in enumerate(_DAY_NAMES):
        if name.startswith(w[:3]) and (len(w) <= 5 or name.startswith(w.rstrip("s"))):
            return i
    return None


def _day_set(m: re.Match[str]) -> frozenset[int]:
    if m["range"]:
        a, b = _day_index(m["a"]), _day_index(m["b"])
        if a is None or b is None:
            return frozenset()
        return frozenset((a + i) % 7 for i in range((b - a) % 7 + 1))
    if m["every"]:
        return _ALL_DAYS
    if m["weekdays"]:
        return _WEEKDAYS
    if m["weekends"]:
        return _WEEKEND
    day = _day_index(m["one"])
    return frozenset() if day is None else frozenset({day})


def _day_groups(sentence: str) -> list[_Days]:
    """Day expressions, a list of days ("Tuesdays, Wednesdays and Fridays") as one group."""
    groups: list[_Days] = []
    for m in _DAY_RE.finditer(sentence):
        days = _day_set(m)
        if not days or _describes_a_noun(sentence, m):
            continue
        vague = bool(m["weekdays"] or m["weekends"])
        last = groups[-1] if groups else None
        if last is not None and _DAY_JOIN.match(sentence[last.end : m.start()]):
            groups[-1] = _Days(last.start, m.end(), last.days | days, last.vague and vague)
        else:
            groups.append(_Days(m.start(), m.end(), days, vague))
    return groups


_NEXT_WORD = re.compile(r"\s+([a-z]+)")


def _describes_a_noun(sentence: str, m: re.Match[str]) -> bool:
    """ "daily vegetable risotto", "weekend brunch": a day word before a noun says nothing
    about the opening days."""
    if not (m["every"] or m["weekends"] or m["weekdays"] or m["one"]) or " " in m.group():
        return False
    following = _NEXT_WORD.match(sentence, m.end())
    return following is not None and following[1] not in STOPWORDS | _NOT_NOUNS


_NOT_NOUNS = wordset(
    "except only through thru including excluding open opens closed closes hours morning "
    "mornings afternoon afternoons evening evenings night nights"
)
"""Words after a day that keep it a day: "open Friday nights", "Mondays closed"."""


def _parse_time(text: str) -> tuple[int, int, str | None, bool]:
    """(hour, minute, "a"/"p"/None, written 24-hour style) of one time expression."""
    t = text.lower().strip()
    if t == "noon":
        return 12, 0, "p", False
    if t == "midnight":
        return 0, 0, None, True
    m = re.match(r"(\d{1,2})(?::(\d{1,2}))?\s*(?:([ap])\.?\s?m)?", t)
    if m is None:  # pragma: no cover - the patterns above only hand over times
        raise ValueError(f"not a time: {text!r}")
    hour, minute, ampm = int(m[1]), int(m[2] or 0), m[3]
    # "20:0", "0:30" or "17:00" can only be read one way, and "5:0" copies the 24-hour
    # style of Yelp's records.
    literal = ampm is None and (hour > 12 or hour == 0 or len(m[2] or "00") == 1)
    return hour, minute, ampm, literal


def _minutes(hour: int, minute: int, ampm: str | None, literal: bool) -> frozenset[int]:
    if ampm is not None:
        # "21:00 PM" happens; a 24-hour hour keeps its value.
        hour = hour if hour > 12 else hour % 12 + (12 if ampm == "p" else 0)
        return frozenset({hour * 60 + minute})
    if literal:
        return frozenset({(hour % 24) * 60 + minute})
    return frozenset({hour * 60 + minute, (hour + 12) % 24 * 60 + minute})


def _times(sentence: str) -> list[_Time]:
    out = []
    for m in _TIME_RE.finditer(sentence):
        if m["range"]:
            a, b = _parse_time(m["a"]), _parse_time(m["b"])
            # In a 24-hour range ("5:0-20:30") the other end is literal too.
            literal = a[3] or b[3]
            opens = _minutes(a[0], a[1], a[2], literal or a[3])
            closes = _minutes(b[0], b[1], b[2], literal or b[3])
            out.append(_Time(m.start(), m.end(), opens, closes))
            continue
        value = _minutes(*_parse_time(m["one"]))
        before = sentence[max(0, m.start() - 20) : m.start()]
        if _CLOSE_CUE.search(before):
            out.append(_Time(m.start(), m.end(), None, value))
        elif _OPEN_CUE.search(before):
            out.append(_Time(m.start(), m.end(), value, None))
        else:
            out.append(_Time(m.start(), m.end(), value, value, either=True))
    return out


def _claims(sentence: str) -> list[_Claim]:
    """Times tied to the day groups they are said of, plus day groups said alone; neither
    when it is said of a part of the business with hours of its own (the patio, brunch)."""
    groups = _day_groups(sentence)
    times = _times(sentence)
    used: set[int] = set()
    claims = []
    for time in times:
        previous = max((t.end for t in times if t.end <= time.start), default=0)
        pick = _pick_days(sentence, time, groups, times, used)
        if _about_other_thing(_clause_before(sentence, previous, time.start)):
            # The days right after such a time are its own ("the patio opens at 8 on
            # weekends"); days before it may belong to the business ("open daily, and ...").
            if pick is not None and groups[pick].start >= time.end:
                used.add(pick)
            continue
        if pick is None:
            claims.append(_Claim(time.start, time.end, None, time))
            continue
        used.add(pick)
        group = groups[pick]
        start, end = min(time.start, group.start), max(time.end, group.end)
        claims.append(_Claim(start, end, group.days, time, vague=group.vague))
    edges = sorted([(g.start, g.end) for g in groups] + [(t.start, t.end) for t in times])
    closed: bool | None = None
    for i, group in enumerate(groups):
        if i in used:
            continue
        previous = max((e for s, e in edges if e <= group.start), default=0)
        following = min((s for s, e in edges if s >= group.end), default=len(sentence))
        said = _said_of_days(sentence, group, previous, following, closed)
        if said is None:
            continue
        closed = said
        before = sentence[max(0, group.start - 30) : group.start]
        later = bool(_LATER_BEFORE.search(before))
        start = group.start - len(m.group()) if (m := _LATER_BEFORE.search(before)) else group.start
        claims.append(_Claim(start, group.end, group.days, None, said, group.vague, later))
    return _specific_days_win(claims)


def _clause_before(sentence: str, start: int, end: int) -> str:
    """``sentence[start:end]`` from its last clause break on."""
    breaks = list(_CLAUSE_BREAK.finditer(sentence, start, end))
    return sentence[breaks[-1].end() if breaks else start : end]


def _about_other_thing(text: str) -> bool:
    """``text``, the words leading to a claim, make it one about some part or service of the
    business: named as a subject ("the patio is open"), or after the last word about
    opening ("it is open daily and offers outdoor seating from 8")."""
    cues = list(_OWN_HOURS_CUE.finditer(text))
    last_cue = cues[-1].end() if cues else 0
    return any(
        (m.start() >= last_cue or _SUBJECT_VERB.match(text, m.end()))
        and not _FOR_A_MEAL.search(text, 0, m.start())
        for m in _OTHER_THING.finditer(text)
    )


def _said_of_days(
    sentence: str, group: _Days, previous: int, following: int, closed: bool | None
) -> bool | None:
    """Whether ``group``, named without a time, is said to be closed (True) or open (False),
    or None when the sentence says neither of it, or says it of some other thing.

    The last cue before the days in their clause wins ("open Tuesday through Sunday and
    closed on Mondays"); else the first after them, up to the next claim or contrast ("On
    Mondays, the restaurant remains closed"); else the days continue the claim before them
    ("open Monday to Friday, and on weekends")."""
    after = sentence[group.end : following]
    if (contrast := _CONTRAST.search(after)) is not None:
        after = after[: contrast.start()]
    lead = _clause_before(sentence, previous, group.start)
    cues = list(_DAY_CUE.finditer(lead))
    later = [m for m in _DAY_CUE.finditer(after) if not _FORWARD_CUE.fullmatch(m.group())]
    if cues:
        said, about = bool(cues[-1]["closed"]), lead
    elif later:
        said, about = bool(later[0]["closed"]), lead + after[: later[0].end()]
    else:
        said, about = bool(closed), lead + after
    return None if _about_other_thing(about) else said


def _pick_days(
    sentence: str, time: _Time, groups: list[_Days], times: list[_Time], used: set[int]
) -> int | None:
    """Index of the day group ``time`` is said of, if any."""
    after = next((i for i, g in enumerate(groups) if g.start >= time.end), None)
    if after is not None and _GAP_AFTER.match(sentence[time.end : groups[after].start]):
        group = groups[after]
        # "..., on Friday from 11 to 10": that group belongs to the time right after it.
        owned = any(
            t.start >= group.end and _GAP_TIGHT.match(sentence[group.end : t.start]) for t in times
        )
        if not owned:
            return after
    before = next((i for i, g in reversed(list(enumerate(groups))) if g.end <= time.start), None)
    if (
        before is not None
        and before not in used
        and _GAP_BEFORE.match(sentence[groups[before].end : time.start])
    ):
        return before
    return None


def _specific_days_win(claims: list[_Claim]) -> list[_Claim]:
    """Drop from each claim the days a narrower claim of the sentence speaks of
    ("11 to 9:30 on weekdays, until 10 on Fridays and Saturdays")."""
    out = []
    for claim in claims:
        days = claim.days
        if days is not None:
            for other in claims:
                if other.days is not None and len(other.days) < len(claim.days or ()):
                    days = days - other.days
        out.append(
            _Claim(claim.start, claim.end, days, claim.time, claim.closed, claim.vague, claim.later)
        )
    return out


def _time_fits(time: _Time, hours: tuple[int, int] | None) -> bool:
    if hours is None:
        return False
    opens, ends = hours[0], closings(hours)
    if time.either:
        return opens in (time.opens or ()) or bool(ends & (time.closes or frozenset()))
    return (time.opens is None or opens in time.opens) and (
        time.closes is None or bool(ends & time.closes)
    )


def _closes_later(days: frozenset[int], table: Hours) -> bool:
    """Some of ``days`` closes later than some other open day (past midnight counts as late)."""

    def close(d: int) -> int:
        hours = table[d]
        assert hours is not None
        return hours[1] + (1440 if hours[1] <= hours[0] else 0)

    inside = [close(d) for d in days if table[d] is not None]
    outside = [close(d) for d in _ALL_DAYS - days if table[d] is not None]
    return bool(inside and outside) and max(inside) > min(outside)


def _supported(claim: _Claim, table: Hours) -> bool:
    if claim.later and claim.days is not None:
        return _closes_later(claim.days, table)
    days = claim.days
    if days is not None and claim.vague and not claim.closed:
        days = frozenset(d for d in days if table[d] is not None)
        if not days:
            return False
    if claim.time is None:
        return days is None or all((table[d] is None) == claim.closed for d in days)
    if days is None:
        return any(_time_fits(claim.time, table[d]) for d in range(7))
    return all(_time_fits(claim.time, table[d]) for d in days)


def check(response: str, table: Hours) -> list[Verdict]:
    """Every opening-hours claim of ``response``, checked against ``table``."""
    verdicts = []
    for offset, stop in sentences(response):
        sentence = response[offset:stop]
        if not _HOURS_TALK.search(sentence) or _OTHER_SCHEDULE.search(sentence):
            continue
        for claim in _claims(sentence):
            if claim.time is None and not claim.days:
                continue  # every day it named is spoken for by a narrower claim
            lead = _LEAD_RE.search(sentence, 0, claim.start)
            start = lead.start() if lead else claim.start
            verdicts.append(
                Verdict(
                    offset + start,
                    offset + claim.end,
                    _supported(claim, table),
                    (offset + claim.start, offset + claim.end),
                )
            )
    return verdicts
