"""Names detector: proper names in the response (runs of capitalised words) with a word the
reference never uses, e.g. an invented staff member, dish, platform or neighbourhood.

A run is split at lower-case words, digits and punctuation other than "&", "'" and "-".
A single capitalised word that starts a sentence is skipped: at the start of a sentence a
capital says nothing about being a name. A word the reference spells slightly differently
("Brasilia" for "Brasil", "Caesar" for "cesar") is known: a misspelling is not an invented
name, and people labelling hallucinations do not flag one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from juryflow.judges.detectors.dishes import dish_spans
from juryflow.judges.detectors.text import (
    STOPWORDS,
    merge_spans,
    parse_record,
    stem,
    vocabulary,
    wordset,
)

_CAPITALISED = re.compile(r"[A-Z][A-Za-z'’&.-]*[A-Za-z]|[A-Z]")
_JOINERS = re.compile(r"^[ \t]*(?:&|'n'|n'|of|de|la|le|del|the|and)?[ \t]*$")
"""What may sit between two capitalised words of one name ("Take N Bake", "Bank of America")."""

_COMMON = wordset(
    """
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays
    fridays saturdays sundays weekday weekdays weekend weekends january february march april may
    june july august september october november december i sure here overall the a an this that
    these those it its in on at for with from to and but or so as if while when where what which
    who how based however additionally furthermore moreover also one another some many most
    customers customer reviewers reviewer review reviews restaurant business note notably yes no
    ok okay json data information overview summary article answer title conclusion introduction
    stars star rating ratings hours location address attributes categories ambience ambiance
    parking wifi wi-fi wi fi am pm a.m p.m usa us although though because since unfortunately
    finally lastly first second third then thus therefore besides despite both each every all
    other others there their they we you our my his her its
    tv tvs dj djs bbq byob atm atms ipa ipas msg vip rsvp hdtv
    """
)
"""Capitalised for grammar or headings, naming the record's own fields, or common nouns
written in capitals ("TVs", "BBQ"): never a claim."""

_NOT_CLAIMS = re.compile(
    r"""\b(?:COVID(?:-19)?|Covid(?:-19)?|Coronavirus|Christmas(?:\s+Eve|\s+Day)?
    |New\s+Year(?:['’]s)?(?:\s+(?:Eve|Day))?|Thanksgiving|Easter|Halloween|Hanukkah
    |(?:Valentine|Mother|Father)['’]?s\s+Day|(?:Memorial|Labor|Independence|Veterans)\s+Day
    |Fourth\s+of\s+July|St\.?\s+Patrick['’]?s\s+Day|Cinco\s+de\s+Mayo|Super\s+Bowl)\b""",
    re.VERBOSE,
)
"""Holidays and world events: when something happened or is open, not a name the response
gives the business ("busy on New Year's Eve", "slow service during COVID")."""

_SENTENCE_END = re.compile(r"(?:[.!?:]|\n|^)[\s\"'“(*#-]*$")


def _names(response: str) -> list[list[tuple[str, int, int]]]:
    """Runs of capitalised words, each word with its offsets; holidays and world events
    left out."""
    runs: list[list[tuple[str, int, int]]] = []
    events = [m.span() for m in _NOT_CLAIMS.finditer(response)]
    for m in _CAPITALISED.finditer(response):
        if any(s <= m.start() < e for s, e in events):
            continue
        word = (m.group(), m.start(), m.end())
        if runs and _JOINERS.match(response[runs[-1][-1][2] : m.start()]):
            runs[-1].append(word)
        else:
            runs.append([word])
    return runs


def _is_common(word: str) -> bool:
    w = word.lower().replace("’", "'")
    return w in _COMMON or w in STOPWORDS


MIN_SIMILARITY = 85.0
"""rapidfuzz ratio (0-100) from which a word counts as a respelling of a reference word."""
MIN_FUZZY_LENGTH = 5
"""Shorter words are compared exactly: "Lima" is not a respelling of "lime"."""
MIN_NAME_SIMILARITY = 80.0
"""rapidfuzz ratio from which a name of several words respells one of the reference's
("Chopping Poke" for "Choppa Poke": one word is far from its original, the name is not)."""

_REVIEW_SITE_KEYS = frozenset({"review_info", "business_stars"})
_REVIEW_SITE = frozenset({"yelp"})
"""A record with Yelp's review fields comes from Yelp: naming Yelp invents nothing."""


@dataclass(frozen=True)
class _Reference:
    vocab: frozenset[str]
    """Stems of the reference."""
    spellings: tuple[str, ...]
    """Its distinct lower-case words long enough to be compared fuzzily."""
    implied: frozenset[str] = frozenset()
    """Lower-case names the reference implies without writing them."""
    names: tuple[str, ...] = ()
    """Its names of several words, lower-case."""

    @classmethod
    def of(cls, reference: str) -> _Reference:
        spellings = {w.lower() for w in re.findall(r"[A-Za-z]+", reference)}
        record = parse_record(reference)
        site = isinstance(record, dict) and bool(_REVIEW_SITE_KEYS & set(record))
        names = {" ".join(w for w, _, _ in run).lower() for run in _names(reference)}
        return cls(
            frozenset(vocabulary(reference)),
            tuple(sorted(w for w in spellings if len(w) >= MIN_FUZZY_LENGTH - 1)),
            _REVIEW_SITE if site else frozenset(),
            tuple(sorted(n for n in names if " " in n)),
        )

    def knows(self, part: str) -> bool:
        """``part`` (one word) is in the reference, implied by it, or a respelling of one."""
        w = part.lower().replace("’", "'")
        if stem(w) in self.vocab or w in self.implied:
            return True
        w = (w[:-2] if w.endswith("'s") else w).replace("'", "")
        if len(w) < MIN_FUZZY_LENGTH or not self.spellings:
            return False
        best = process.extractOne(w, self.spellings, scorer=fuzz.ratio, score_cutoff=MIN_SIMILARITY)
        return best is not None

    def respells(self, name: str) -> bool:
        """``name`` (several words) is a respelling of a name of the reference."""
        score = MIN_NAME_SIMILARITY
        best = process.extractOne(name.lower(), self.names, scorer=fuzz.ratio, score_cutoff=score)
        return best is not None


def _is_known(word: str, reference: _Reference) -> bool:
    w = word.lower().replace("’", "'")
    if w in _COMMON or w in STOPWORDS:
        return True
    # "Wi-Fi", "Take-Out": known if the glued word or every capitalised part is
    # ("Asian-inspired" claims "Asian", not "inspired").
    parts = [p.lower() for p in re.split(r"[-.&]", word) if p and not p[0].islower()]
    return reference.knows(w.replace("-", "")) or all(reference.knows(p) for p in parts)


class NamesDetector:
    """Flags capitalised names with a word absent from the reference (case-insensitive)."""

    name = "names"

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        known = _Reference.of(reference)
        spans = []
        for run in _names(response):
            # Drop grammar/heading words at the ends: "The Italian sub" -> "Italian".
            while run and _is_common(run[0][0]):
                run = run[1:]
            while run and _is_common(run[-1][0]):
                run = run[:-1]
            if not run:
                continue
            if len(run) == 1 and _SENTENCE_END.search(response[: run[0][1]]):
                continue
            if len(run) > 1 and known.respells(response[run[0][1] : run[-1][2]]):
                continue
            if not all(_is_known(word, known) for word, _, _ in run):
                # Flag the whole name: "Kyle's Kitchen" is one claim, not two words.
                spans.append((run[0][1], run[-1][2]))
        spans.extend(dish_spans(response, known.knows))
        return merge_spans(spans)
