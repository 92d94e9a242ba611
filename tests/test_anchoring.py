"""Span anchoring: exact, repeat, normalised and fuzzy stages, and their invariants."""

from __future__ import annotations

import threading
import time
from collections import Counter

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from juryflow.judges.anchoring import anchor_spans
from juryflow.maths.records import Span

ARTICLE = (
    "The restaurant’s patio offers outdoor seating. Guests love the “Italian sub”.\n"
    "It is open  from 11:30 AM to 10:00 PM — every day. Outdoor seating is popular."
)


def test_exact_and_repeat() -> None:
    text = "free WiFi here, free WiFi there, free WiFi everywhere"
    spans = anchor_spans(text, ["free WiFi", "free WiFi", "there", "free WiFi"])
    assert [s.match for s in spans] == ["exact", "repeat", "exact", "repeat"]
    assert [s.char_start for s in spans] == [0, 16, 26, 33]
    assert all(text[s.char_start : s.char_end] == s.text for s in spans)
    assert spans[0].requested == "free WiFi"


def test_a_string_listed_once_but_found_twice_is_ambiguous() -> None:
    text = "Free WiFi and parking. Parking is free WiFi too."
    (span,) = anchor_spans(text, ["free WiFi"])
    # 'free WiFi' at 34 is the only exact occurrence ('Free WiFi' differs in case)
    assert (span.match, span.char_start) == ("exact", 34)
    (span,) = anchor_spans(text, ["parking"])
    assert (span.match, span.char_start) == ("exact", 14)
    (span,) = anchor_spans(text, ["PARKING"])  # no exact match; two normalised ones
    assert (span.match, span.char_start, span.text) == ("ambiguous", 14, "parking")
    (span,) = anchor_spans("open daily, open daily", ["open daily"])
    assert (span.match, span.char_start, span.char_end) == ("ambiguous", 0, 10)


def test_a_string_listed_fewer_times_than_it_occurs_is_ambiguous_each_time() -> None:
    text = "free WiFi here, free WiFi there, free WiFi everywhere"
    spans = anchor_spans(text, ["free WiFi", "there", "free WiFi"])
    assert [(s.match, s.char_start) for s in spans] == [
        ("ambiguous", 0),
        ("exact", 26),
        ("ambiguous", 16),
    ]
    # normalised too: 'Free wifi' listed twice, 'free WiFi' found three times
    spans = anchor_spans(text, ["Free wifi", "FREE WIFI"])
    assert [(s.match, s.char_start) for s in spans] == [("ambiguous", 0), ("ambiguous", 16)]


def test_listings_that_normalise_alike_share_the_count() -> None:
    spans = anchor_spans(
        "Outdoor seating. outdoor seating", ["OUTDOOR SEATING", "Outdoor Seating."]
    )
    assert [(s.match, s.char_start) for s in spans] == [("normalized", 0), ("normalized", 17)]
    (span,) = anchor_spans("Outdoor seating. outdoor seating", ["OUTDOOR SEATING"])
    assert (span.match, span.char_start) == ("ambiguous", 0)


def test_more_repeats_than_occurrences_leaves_the_extra_unmatched() -> None:
    spans = anchor_spans("a big garage and a lot", ["garage", "garage"])
    assert [s.match for s in spans] == ["exact", "unmatched"]
    assert spans[1].char_start is None and spans[1].text == "garage"


def test_extra_repeat_falls_through_to_a_normalized_occurrence() -> None:
    spans = anchor_spans("Outdoor seating. outdoor seating", ["outdoor seating"] * 2)
    assert [(s.match, s.char_start) for s in spans] == [("exact", 17), ("normalized", 0)]


def test_normalized_curly_quotes_case_whitespace_punctuation() -> None:
    cases = {
        "The restaurant's patio": "The restaurant’s patio",
        'guests love the "italian sub".': "Guests love the “Italian sub",  # edge punct. dropped
        "open from 11:30 AM to 10:00 PM - every day": "open  from 11:30 AM to 10:00 PM — every day",
        "  outdoor   seating is popular!! ": "Outdoor seating is popular",
    }
    spans = anchor_spans(ARTICLE, list(cases))
    for span, (requested, anchored) in zip(spans, cases.items(), strict=True):
        assert span.match == "normalized", requested
        assert span.text == anchored
        assert span.requested == requested


def test_fuzzy() -> None:
    spans = anchor_spans(ARTICLE, ["offers outdor seatings"])
    (span,) = spans
    assert span.match == "fuzzy"
    assert span.text == "offers outdoor seating"
    assert span.similarity is not None and span.similarity >= 85


def test_unmatched_and_empty() -> None:
    spans = anchor_spans(ARTICLE, ["valet parking for all guests", "", "   ", "zz"])
    assert [s.match for s in spans] == ["unmatched"] * 4
    assert all(s.char_start is None and s.char_end is None for s in spans)
    assert [s.requested for s in spans] == ["valet parking for all guests", "", "   ", "zz"]


def test_threshold_controls_fuzzy() -> None:
    assert anchor_spans(ARTICLE, ["offers outdor seatings"], fuzzy_threshold=99)[0].match == (
        "unmatched"
    )


def test_fast_on_2kb() -> None:
    text = (ARTICLE + " ") * 13
    requested = ["outdoor seating", "italian sub.", "offers outdor seatings", "nothing like it"] * 5
    started = time.perf_counter()
    for _ in range(20):
        anchor_spans(text, requested)
    assert (time.perf_counter() - started) / 20 < 0.05


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300)


@given(texts, st.data())
def test_exact_substring_anchors_exactly(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    s = text[start:end]
    assume(s.strip())
    (span,) = anchor_spans(text, [s])
    # str.count counts non-overlapping occurrences, as anchoring does
    assert span.match == ("exact" if text.count(s) == 1 else "ambiguous")
    assert span.char_start is not None and span.char_end is not None
    assert text[span.char_start : span.char_end] == s == span.text
    assert span.char_start == text.find(s)


@given(texts, st.lists(st.text(max_size=20), max_size=6))
def test_anchored_spans_are_in_bounds(text: str, requested: list[str]) -> None:
    spans = anchor_spans(text, requested)
    assert len(spans) == len(requested)
    for span, wanted in zip(spans, requested, strict=True):
        assert span.requested == wanted
        if span.anchored:
            assert span.char_start is not None and span.char_end is not None
            assert 0 <= span.char_start < span.char_end <= len(text)
            assert span.text == text[span.char_start : span.char_end]
        else:
            assert span.match == "unmatched"


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz'", min_size=1, max_size=8).filter(
    lambda w: w.strip("'")
)


@given(
    st.lists(words, min_size=1, max_size=6),
    st.lists(words, max_size=5),
    st.lists(words, max_size=5),
    st.sampled_from(["case", "quotes", "spaces", "period"]),
)
def test_near_miss_anchors_normalized(
    phrase: list[str], before: list[str], after: list[str], change: str
) -> None:
    target = " ".join(phrase)
    assume(target.strip("'") == target)
    prefix = " ".join(before) + ", " if before else ""
    text = prefix + target + (", " + " ".join(after) if after else "") + "."
    start = len(prefix)
    assume(text.find(target) == start)  # the first occurrence is the one we placed
    if change == "case":
        requested = target.upper()
        assume(requested != target)
    elif change == "quotes":
        assume("'" in target)
        requested = target.replace("'", "’")
    elif change == "spaces":
        assume(len(phrase) > 1)
        requested = "  " + target.replace(" ", " \n ") + " "
    else:
        requested = target + "."
        assume(requested not in text)
    (span,) = anchor_spans(text, [requested])
    # the text is already normalised: its occurrences of the target are the normalised ones
    assert span.match == ("normalized" if text.count(target) == 1 else "ambiguous")
    assert (span.char_start, span.char_end) == (start, start + len(target))


@given(st.lists(words, min_size=1, max_size=4), st.integers(1, 4), st.text(" xyz", max_size=5))
def test_repeats_go_to_successive_occurrences(phrase: list[str], n: int, filler: str) -> None:
    target = " ".join(phrase)
    sep = f" [{filler}] "
    text = sep.join([target] * n)
    spans = anchor_spans(text, [target] * n)
    expected = []
    position = 0
    for _ in range(n):
        position = text.find(target, position)
        expected.append((position, position + len(target)))
        position += len(target)
    assert [(s.char_start, s.char_end) for s in spans] == expected
    if text.count(target) == n:
        assert [s.match for s in spans] == ["exact"] + ["repeat"] * (n - 1)
    else:  # the filler holds the target too: listed fewer times than it occurs
        assert [s.match for s in spans] == ["ambiguous"] * n


@given(st.lists(words, min_size=1, max_size=3), st.integers(1, 4), st.integers(1, 4))
def test_ambiguous_iff_listed_fewer_times_than_it_occurs(
    phrase: list[str], occurs: int, listed: int
) -> None:
    target = " ".join(phrase)
    text = " | ".join([target] * occurs)
    assume(text.count(target) == occurs)
    spans = anchor_spans(text, [target] * listed)
    anchored = spans[:occurs]
    assert all(s.anchored for s in anchored)
    assert [s.char_start for s in anchored] == [
        i * (len(target) + 3) for i in range(min(occurs, listed))
    ]
    if listed < occurs:
        assert [s.match for s in spans] == ["ambiguous"] * listed
    else:
        assert [s.match for s in anchored] == ["exact"] + ["repeat"] * (occurs - 1)
        assert [s.match for s in spans[occurs:]] == ["unmatched"] * (listed - occurs)


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            [
                *"ab AB\t\n\r.,'\"-",
                "\u00a0",
                "\u2009",
                "\u3000",
                "\u2019",
                "\u201c",
                "\u2014",
                "\u0130",
                "\u03a3",
                "\u03c3",
                "\u1e9e",
                "\u00df",
                "\u0085",
                "\u2028",
            ]
        )
    )
    | st.text()
)
def test_whole_string_normalising_equals_the_character_loop(text: str) -> None:
    from juryflow.judges.anchoring import _normalize, _normalize_by_character

    assert _normalize(text) == _normalize_by_character(text)


# --- long answers (issue 29, point 7): what a plain implementation did, in linear time ------


def reference_anchor_spans(
    text: str, requested: list[str], fuzzy_threshold: float = 85.0
) -> tuple[Span, ...]:
    """Anchoring as it was written before issue 29: every occurrence rechecked against
    every claimed span for every listing (cubic in the listings), no fuzzy budget."""
    from rapidfuzz import fuzz

    from juryflow.judges.anchoring import _needle, _normalize, _occurrences, _widen_to_words

    def is_free(span: tuple[int, int], taken: set[tuple[int, int]]) -> bool:
        return all(span[1] <= s or e <= span[0] for s, e in taken)

    claimed: dict[str, set[tuple[int, int]]] = {}
    seen: dict[str, int] = {}
    needles = [_needle(w) for w in requested]
    wanted_left = Counter(w for w in requested if w.strip())
    needles_left = Counter(n for w, n in zip(requested, needles, strict=True) if w.strip())
    spans: list[Span] = []
    for wanted, needle in zip(requested, needles, strict=True):
        if not wanted.strip():
            spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
            continue
        taken = claimed.setdefault(needle or wanted, set())
        repeat = seen.get(wanted, 0)
        seen[wanted] = repeat + 1
        listed, listed_alike = wanted_left[wanted], needles_left[needle]
        wanted_left[wanted] -= 1
        needles_left[needle] -= 1
        free = [o for o in _occurrences(text, wanted) if is_free(o, taken)]
        if free:
            taken.add(free[0])
            kind = "ambiguous" if len(free) > listed else "repeat" if repeat else "exact"
            spans.append(Span(*free[0], text[slice(*free[0])], kind, requested=wanted))
            continue
        if not needle:
            spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
            continue
        normalized = _normalize(text)
        found = [normalized.to_original(*o) for o in _occurrences(normalized.text, needle)]
        free = [o for o in found if is_free(o, taken)]
        if free:
            taken.add(free[0])
            kind = "ambiguous" if len(free) > listed_alike else "normalized"
            spans.append(Span(*free[0], text[slice(*free[0])], kind, requested=wanted))
            continue
        if 4 <= len(needle) <= len(normalized.text):
            match = fuzz.partial_ratio_alignment(
                needle, normalized.text, score_cutoff=fuzzy_threshold
            )
            if match is not None and match.dest_end > match.dest_start:
                start, end = normalized.to_original(match.dest_start, match.dest_end)
                start, end = _widen_to_words(text, start, end)
                if end > start and is_free((start, end), taken):
                    taken.add((start, end))
                    similarity = round(match.score, 2)
                    span = Span(start, end, text[start:end], "fuzzy", wanted, similarity)
                    spans.append(span)
                    continue
        spans.append(Span(None, None, wanted, "unmatched", requested=wanted))
    return tuple(spans)


PIECES = ["free", "WiFi", "wifi", "Free", "parking", "open", "daily", "a", "ab", "outdoor"]
PIECES += ["seating", "’", "'", "—", "-", ".", ",", " ", "  ", "\n", "İ", "Σ", "ß", "x"]
pieces_text = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(pieces_text, st.data(), st.sampled_from([60.0, 85.0, 95.0]))
def test_anchoring_equals_the_plain_algorithm(
    text: str, data: st.DataObject, threshold: float
) -> None:
    substrings = st.tuples(st.integers(0, len(text)), st.integers(0, 20)).map(
        lambda at: text[at[0] : at[0] + at[1]]
    )
    wanted = substrings | pieces_text | substrings.map(str.upper) | substrings.map("{}.".format)
    requested = data.draw(st.lists(wanted, max_size=12))
    requested += data.draw(st.lists(st.sampled_from(requested), max_size=4)) if requested else []
    assert anchor_spans(text, requested, threshold) == reference_anchor_spans(
        text, requested, threshold
    )


def anchored_in_time(text: str, requested: list[str]) -> tuple[Span, ...]:
    """anchor_spans from a thread joined with a timeout that tells linear (well under a
    second here) from the cubic rechecking (hours); not a benchmark."""
    result: list[tuple[Span, ...]] = []
    worker = threading.Thread(target=lambda: result.append(anchor_spans(text, requested)))
    worker.daemon = True
    worker.start()
    worker.join(timeout=60)
    assert result, f"anchoring {len(requested):,} strings did not finish"
    return result[0]


def test_a_string_listed_fifty_thousand_times() -> None:
    spans = anchored_in_time("a " * 2_500, ["a"] * 50_000)
    assert [s.match for s in spans[:2]] == ["exact", "repeat"]
    assert {s.match for s in spans[1:2_500]} == {"repeat"}
    assert {s.match for s in spans[2_500:]} == {"unmatched"}
    assert [s.char_start for s in spans[:3]] == [0, 2, 4]


def test_a_near_miss_listed_fifty_thousand_times() -> None:
    spans = anchored_in_time(ARTICLE * 10, ["OUTDOOR SEATING."] * 50_000)
    assert [s.match for s in spans[:20]] == ["normalized"] * 20
    assert {s.match for s in spans[20:]} == {"unmatched"}
    spans = anchored_in_time(ARTICLE, ["offers outdor seatings"] * 50_000)
    assert spans[0].match == "fuzzy" and spans[0].text == "offers outdoor seating"
    assert {s.match for s in spans[1:]} == {"unmatched"}


def test_fuzzy_alignment_has_a_length_limit_and_a_budget() -> None:
    from juryflow.judges.anchoring import FUZZY_BUDGET, MAX_FUZZY_LENGTH

    text = " ".join(f"word{i} seen" for i in range(400))
    near = text[:MAX_FUZZY_LENGTH].replace("seen", "sen")
    assert anchor_spans(text, [near])[0].match == "fuzzy"
    too_long = text[: MAX_FUZZY_LENGTH + 200].replace("seen", "sen")
    assert len(near) <= MAX_FUZZY_LENGTH < len(too_long)
    assert anchor_spans(text, [too_long])[0].match == "unmatched"
    # Distinct invented strings spend the budget first; a near miss after them is not aligned.
    invented = [f"zq{i:05d}xw" for i in range(FUZZY_BUDGET // 9 + 1)]
    spans = anchored_in_time(text, ["word3 sen word4", *invented, "word5 sen word6"])
    assert spans[0].match == "fuzzy"
    assert spans[-1].match == "unmatched"
