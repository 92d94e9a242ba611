"""Content-words detector: claims of the response that the reference gives no ground for.

Three triggers, from most to least specific:

- **record keys.** In a structured record a key set to false/"no" ("OutdoorSeating": False)
  is evidence *against* its words, a key set to null is no evidence either way, and a key set
  to true/"free" is evidence for them. A phrase asserting a false or null key's word is
  flagged, and so is one denying a null or true key's word ("no outdoor seating" is fine for
  a false key only). Words the record also uses positively elsewhere (a review mentioning
  street parking) keep their support.
- **amenities.** Services a listing may state (delivery, catering, credit cards, happy hour,
  ...) asserted by the response while the reference never mentions them.
- **unsupported clauses.** A clause made mostly of content words the reference never uses
  ("offers catering services for private events"). Lexical, not semantic: a paraphrase in
  new words can be flagged and a contradiction reusing the reference's words is missed. Off
  against a structured record by default (see :class:`ContentWordsDetector`).

The first two flag the short phrase around the word, as people label them ("takes
reservations", "free Wi-Fi"); the third flags the clause.

Negation is read per word: "does not offer Wi-Fi, outdoor seating, or reservations" denies
all three, up to a contrast ("but", "however") or a new subject (", they do feature ...").
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from juryflow.judges.detectors.text import (
    STOPWORDS,
    merge_spans,
    parse_record,
    sentences,
    split_camel,
    stem,
    trim_span,
    vocabulary,
    words,
    wordset,
)

_CLAUSE_BREAK = re.compile(r"[.;:!?,()\n]+(?=\s|$)|\s+(?:and|but|while|whereas|although)\s+")
"""Clause boundaries: punctuation followed by space, or a coordinating word."""


def _is_negative(value: object) -> bool:
    """False, None or a "no"-like string (Yelp records sometimes hold "u'no'")."""
    if value is None or value is False:
        return True
    return isinstance(value, str) and value.strip().lstrip("u").strip("'\"").lower() in (
        "no", "none", "false", "null",
    )  # fmt: skip


_FRAMING = frozenset(
    stem(w)
    for w in wordset(
        """
    customer patron diner guest visitor reviewer review people someone rating rated average
    based according overall mention mentioned note noted describe described express expressed
    say said state stated report reported find found feel felt seem seems appear appears
    praise praised appreciate highlight highlighted positive negative mixed receive received
    experience experiences provide provided offer offers include including feature features
    variety various range several many option options choice selection particular particularly
    especially also another other others one two three first second third some most overall
    known popular great good excellent delicious amazing nice quality well highly high bit
    data structured information json format objective overview summary article based given
    located location establishment business place spot restaurant eatery area located situated
    serve serving serves make makes made look looking visit visiting enjoy enjoyed enjoying
    open opens day days week weekly daily hour hours time operate operates operating operation
    throughout every
    despite however although though while whereas additionally furthermore moreover
    """
    )
)
"""Words of the prose that reports a record, not claims about it ("customers have praised")."""

_NEGATION = re.compile(
    r"\b(?:no|not|never|without|neither|nor|lacks?|lacking|cannot|none|unavailable)\b|n[’']t\b"
    r"|\brather\s+than\b|\binstead\s+of\b",
    re.IGNORECASE,
)
_SCOPE_END = re.compile(
    r"\b(?:but|however|although|though|while|whereas|yet|except|instead|also)\b|;"
    r"|,\s*(?:it|they|there|its|their|customers|guests|diners|patrons|visitors)\b"
    r"|(?:,\s*|\s)and\s+(?:it|they|there|the|its|their|customers|guests|diners|patrons|visitors)\b"
    r"|\band\s+(?:it\s+|they\s+)?(?:offers?|has|have|provides?|features?|is|are|accepts?|takes?)\b",
    re.IGNORECASE,
)
"""Where a negation stops reaching: a contrast, a new subject (", they do feature ..."), or a
new verb after "and" ("does not take reservations and offers outdoor seating")."""
_FORWARD_ONLY = re.compile(r"rather\s+than|instead\s+of|without|neither|nor", re.IGNORECASE)
"""Negations that only reach forward: "a divey bar rather than a trendy one"."""
_SILENT_RECORD = re.compile(
    r"\b(?:mention(?:ed|s)?|specif(?:y|ied|ic)|information|details?|data|listed|stated|unclear)\b",
    re.IGNORECASE,
)
"""A negated sentence saying the record is silent ("no details on whether it offers Wi-Fi")
agrees with a null key rather than asserting anything about it."""

# Words a response uses for the keys of Yelp records (RAGTruth's data-to-text references),
# matched as whole words (plural too), never as stems: "diverse" and "divey" share a stem.
# Keys not listed fall back to their own camel-case words.
_KEY_TERMS: dict[str, tuple[str, ...]] = {
    "restaurantsreservations": ("reservation", "reserve", "booking"),
    "outdoorseating": ("outdoor", "outdoors", "patio", "alfresco"),
    "wifi": ("wifi", "internet", "wireless"),
    "restaurantstakeout": ("takeout", "takeaway", "carryout"),
    "restaurantsgoodforgroups": ("group",),
    "music": ("music", "dj", "jukebox"),
    "ambience": ("ambience", "ambiance", "atmosphere", "vibe"),
    "businessparking": ("parking",),
    "validated": ("validated", "validation"),
    "divey": ("divey", "dive"),
}
_PARKING_KEYS = frozenset({"garage", "street", "lot", "valet", "validated"})
"""Sub-keys of BusinessParking: common words, claims only in a sentence about parking."""
_PARKING_TALK = re.compile(r"\bpark", re.IGNORECASE)
_GROUP_KEYS = frozenset({"businessparking"})
"""Mappings of flags that also speak for their own key (not "Ambience": all its flags false
means no listed kind of ambience, not none at all)."""
_GROUP_TERMS = frozenset(t for k in _GROUP_KEYS for t in _KEY_TERMS[k])

_AMENITIES = wordset(
    """
    delivery deliveries catering caterer caters creditcard creditcards wheelchair
    wheelchairaccessible dogfriendly petfriendly pets kidfriendly tvs television televisions
    happyhour happyhours vegan vegans vegetarian vegetarians glutenfree byob corkage coatcheck
    smoking dancing drivethru drivethrough karaoke billiards
    """
)
"""Services a listing may state, as whole (glued) words; the response must not assert one
the reference never names."""
_IDIOM_AFTER = re.compile(r"\s+to\b", re.IGNORECASE)
"""'caters to families' is about the clientele, not a catering service."""

# Tuned lightly on the RAGTruth dev samples (data-to-text for the phrase width, QA and
# summaries for the clause thresholds).
MIN_UNSUPPORTED = 3
MIN_FRACTION = 0.8
PHRASE_WORDS = 3
"""Words either side of a key or amenity word that its flagged phrase takes in."""


def _matches(word: str, bases: AbstractSet[str]) -> bool:
    """``word`` is one of ``bases`` or its plural ("reservations", "patios", "groups")."""
    return (
        word in bases
        or (word.endswith("s") and word[:-1] in bases)
        or (word.endswith("es") and word[:-2] in bases)
    )


def _key_terms(key: str) -> set[str]:
    """Lower-case words a response would use to assert ``key``."""
    known = _KEY_TERMS.get(key.lower())
    if known is not None:
        return set(known)
    parts = [p.lower() for p in split_camel(key) if p.lower() not in STOPWORDS]
    return {*parts, key.lower()}


_FLAG_WORDS = frozenset({"free", "paid", "yes", "true"})


def _is_flag(value: object) -> bool:
    """True, or a short "yes"-like value ("WiFi": "free"): the record asserts the key."""
    if value is True:
        return True
    return isinstance(value, str) and value.strip().lstrip("u").strip("'\"").lower() in _FLAG_WORDS


def _leaves(record: object, key: str = "", parent: str = "") -> Iterator[tuple[str, str, object]]:
    """(parent key, key, leaf value) of a nested record; list items inherit their key."""
    if isinstance(record, dict):
        for k, v in record.items():
            yield from _leaves(v, str(k), key)
    elif isinstance(record, list | tuple):
        for v in record:
            yield from _leaves(v, key, parent)
    else:
        yield parent, key, record


def _groups(record: object, key: str = "") -> Iterator[tuple[str, list[object]]]:
    """(key, flag values) of each nested mapping of flags (``BusinessParking``)."""
    if isinstance(record, dict):
        values = list(record.values())
        if key and values and all(v is None or isinstance(v, bool) for v in values):
            yield key, values
        for k, v in record.items():
            yield from _groups(v, str(k))
    elif isinstance(record, list | tuple):
        for v in record:
            yield from _groups(v, key)


@dataclass(frozen=True)
class _Evidence:
    vocab: frozenset[str]
    """Stems the reference supports."""
    mentioned: frozenset[str]
    """Stems of every word of the reference, keys set to false or null included."""
    structured: bool = False
    """The reference is a record (a dict/list literal), not prose."""
    denied: frozenset[str] = frozenset()
    """Words of keys set to false / "no": supported only in a negated clause."""
    unknown: frozenset[str] = frozenset()
    """Words of keys set to null: the record says nothing either way."""
    affirmed: frozenset[str] = frozenset()
    """Words of keys set to true / "free": contradicted only in a negated clause."""
    parking: frozenset[str] = frozenset()
    """Words of parking keys: they only count in a sentence about parking."""


@dataclass
class _KeyWords:
    """Words of the record's keys, by what the record says of them (a builder)."""

    denied: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    affirmed: set[str] = field(default_factory=set)
    parking: set[str] = field(default_factory=set)
    positive: list[str] = field(default_factory=list)
    """Text the record states positively: true keys, values, reviews."""

    def add(self, key: str, value: object, parking: bool) -> None:
        terms = _key_terms(key)
        if parking:
            self.parking |= terms
        if value is None:
            self.unknown |= terms
        elif _is_negative(value):
            self.denied |= terms
        else:
            self.positive.append(f"{key} {value}")
            if _is_flag(value):
                self.affirmed |= terms


def _key_words(record: object) -> _KeyWords:
    found = _KeyWords()
    for parent, key, value in _leaves(record):
        parking = key.lower() in _PARKING_KEYS or parent.lower() == "businessparking"
        found.add(key, value, parking)
    # A mapping of flags speaks for its own key too: any true "BusinessParking" sub-key means
    # there is parking, all false means there is none, otherwise the record cannot say.
    for key, values in _groups(record):
        if key.lower() in _GROUP_KEYS:
            status = True in values or (None if None in values else False)
            found.add(key, status, parking=False)
    return found


def _word_forms(text: str) -> set[str]:
    """Lower-case words of ``text`` and adjacent pairs glued ("Wi Fi" → "wifi")."""
    return {w for w, _, _ in _terms(text, 0, len(text))}


def _evidence(reference: str) -> _Evidence:
    vocab = frozenset(vocabulary(reference))
    record = parse_record(reference)
    if record is None:
        return _Evidence(vocab, vocab)
    keys = _key_words(record)
    # A key's word keeps its support if anything positive in the record uses it too
    # ("street": False, but a review mentions street parking; a parking word only counts
    # from a sentence about parking), and framing words never count.
    positive = " ".join(keys.positive)
    said = _word_forms(positive)
    about_parking = [positive[s:e] for s, e in sentences(positive)]
    said_of_parking = _word_forms(" ".join(t for t in about_parking if _PARKING_TALK.search(t)))

    def supported(term: str) -> bool:
        forms = said_of_parking if term in keys.parking else said
        return (
            _matches(term, forms)
            or any(f"{term}{x}" in forms for x in ("s", "es"))
            or stem(term) in _FRAMING
        )

    denied = {t for t in keys.denied if not supported(t)}
    unknown = {t for t in keys.unknown if not supported(t)} - denied
    affirmed = keys.affirmed - denied - unknown
    return _Evidence(
        vocab - {stem(t) for t in denied | unknown},
        vocab,
        True,
        frozenset(denied),
        frozenset(unknown),
        frozenset(affirmed),
        frozenset(keys.parking),
    )


@dataclass(frozen=True)
class _Clause:
    start: int
    end: int
    sentence_start: int
    negated: bool
    """Negated anywhere (the clause trigger's view); words have their own, narrower test."""
    parking: bool
    """In a sentence about parking."""
    silent: bool
    """In a sentence about what the record does not say."""


def _clauses(text: str) -> list[_Clause]:
    out = []
    for s_start, s_end in sentences(text):
        sentence = text[s_start:s_end]
        parking = bool(_PARKING_TALK.search(sentence))
        silent = bool(_SILENT_RECORD.search(sentence))
        bounds, start = [], 0
        for m in _CLAUSE_BREAK.finditer(sentence):
            bounds.append((start, m.start()))
            start = m.end()
        bounds.append((start, len(sentence)))
        for b_start, b_end in bounds:
            c_start, c_end = trim_span(sentence, b_start, b_end)
            if c_start < c_end:
                negated = _negated(sentence, c_start, c_end)
                out.append(
                    _Clause(s_start + c_start, s_start + c_end, s_start, negated, parking, silent)
                )
    return out


def _negated(sentence: str, start: int, end: int) -> bool:
    """A negation in the clause, or earlier in the sentence and still in scope."""
    if _NEGATION.search(sentence, start, end):
        return True
    cues = list(_NEGATION.finditer(sentence, 0, start))
    return bool(cues) and not _SCOPE_END.search(sentence, cues[-1].end(), start)


def _word_negated(text: str, clause: _Clause, start: int, end: int) -> bool:
    """The word at ``[start, end)`` is denied: by a negation before it in its sentence and
    still in scope, or by one after it in its clause ("reservations are not accepted")."""
    cues = list(_NEGATION.finditer(text, clause.sentence_start, start))
    if cues and not _SCOPE_END.search(text, cues[-1].end(), start):
        return True
    return any(
        not _FORWARD_ONLY.fullmatch(m.group()) for m in _NEGATION.finditer(text, end, clause.end)
    )


def _terms(text: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """(lower-case word, start, end) of the words of ``text[start:end]``, and of each adjacent
    pair glued ("take out", "wi-fi", "happy hour" → "takeout", "wifi", "happyhour")."""
    found = [(_plain(w), start + s, start + e) for w, s, e in words(text[start:end])]
    out = list(found)
    for (a, s, _), (b, _, e) in itertools.pairwise(found):
        if e - s <= len(a) + len(b) + 1:
            out.append((a + b, s, e))
    return out


def _plain(word: str) -> str:
    w = word.lower().replace("’", "'")
    return (w[:-2] if w.endswith("'s") else w).replace("'", "")


def _content_stems(text: str) -> list[str]:
    stems = (stem(w) for w, _, _ in words(text) if len(w) > 2 and w.lower() not in STOPWORDS)
    return [s for s in stems if s not in _FRAMING]


def _phrase(text: str, clause: _Clause, start: int, end: int, width: int) -> tuple[int, int]:
    """``[start, end)`` widened by ``width`` words either way, inside the clause."""
    offsets = [
        (clause.start + s, clause.start + e) for _, s, e in words(text[clause.start : clause.end])
    ]
    first = next(i for i, (_, e) in enumerate(offsets) if e > start)
    last = max(i for i, (s, _) in enumerate(offsets) if s < end)
    lo, hi = max(0, first - width), min(len(offsets) - 1, last + width)
    return offsets[lo][0], offsets[hi][1]


class ContentWordsDetector:
    """Flags phrases asserting a false/null record key (or denying a null/true one), phrases
    asserting an amenity the reference never names, and clauses whose content words are
    mostly (> ``min_fraction``, and at least ``min_unsupported``) absent from the reference.
    """

    name = "content"

    def __init__(
        self,
        min_unsupported: int = MIN_UNSUPPORTED,
        min_fraction: float = MIN_FRACTION,
        phrase_words: int = PHRASE_WORDS,
        clauses_in_records: bool = False,
    ) -> None:
        self.min_unsupported = min_unsupported
        self.min_fraction = min_fraction
        self.phrase_words = phrase_words
        # Against a structured record the clause trigger is off by default: the record's
        # checkable claims have their own triggers, and its reviews are paraphrased so freely
        # that word overlap says little (RAGTruth data-to-text dev: 9 of 69 clauses right).
        self.clauses_in_records = clauses_in_records

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        evidence = _evidence(reference)
        clause_trigger = self.clauses_in_records or not evidence.structured
        spans: list[tuple[int, int]] = []
        for clause in _clauses(response):
            hits = _against(response, clause, evidence)
            if hits:
                width = self.phrase_words
                spans.extend(_phrase(response, clause, s, e, width) for s, e in hits)
            elif clause_trigger and self._unsupported(response, clause, evidence):
                spans.append((clause.start, clause.end))
        return merge_spans(spans)

    def _unsupported(self, text: str, clause: _Clause, evidence: _Evidence) -> bool:
        stems = _content_stems(text[clause.start : clause.end])
        if not stems:
            return False
        vocab = evidence.vocab | evidence.denied if clause.negated else evidence.vocab
        unsupported = sum(s not in vocab for s in stems)
        return unsupported >= self.min_unsupported and unsupported / len(stems) > self.min_fraction


def _against(text: str, clause: _Clause, evidence: _Evidence) -> list[tuple[int, int]]:
    """Words of ``clause`` that a false/null/true key or an unnamed amenity speaks against."""
    found = [
        (term, start, end, _word_negated(text, clause, start, end))
        for term, start, end in _terms(text, clause.start, clause.end)
        if clause.parking or not _matches(term, evidence.parking)
    ]
    # "no valet parking": the negation is about the false key, not about parking (or any
    # other mapping of flags) in general.
    explained = any(negated and _matches(t, evidence.denied) for t, _, _, negated in found)
    hits = []
    for term, start, end, negated in found:
        against: AbstractSet[str]
        if not negated:
            against = evidence.unknown | evidence.denied
        elif clause.silent:
            against = frozenset()
        elif explained:
            against = evidence.unknown - _GROUP_TERMS
        else:
            against = evidence.unknown | evidence.affirmed
        amenity = (
            not negated
            and term in _AMENITIES
            and stem(term) not in evidence.mentioned
            and not _IDIOM_AFTER.match(text, end)
        )
        if amenity or _matches(term, against):
            hits.append((start, end))
    return hits
