"""Offline detectors on hand-made examples, and the OfflineJudge wrapped around them."""

from __future__ import annotations

import itertools

import pytest

from judges.base import Judge
from judges.detectors.content import ContentWordsDetector
from judges.detectors.names import NamesDetector
from judges.detectors.numbers import NumbersDetector
from judges.detectors.registry import detector_names, get_detector
from judges.detectors.text import merge_spans, stem, vocabulary
from judges.offline import OfflineJudge
from judges.records import Item

RECORD = str(
    {
        "name": "Benchmark Eatery",
        "address": "1201 State St",
        "city": "Santa Barbara",
        "state": "CA",
        "categories": "American (New), Breakfast & Brunch, Seafood",
        "hours": {"Monday": "0:0-0:0", "Tuesday": "11:30-20:0", "Friday": "11:30-16:0"},
        "attributes": {
            "BusinessParking": {"garage": False, "street": True, "lot": True},
            "RestaurantsReservations": False,
            "OutdoorSeating": True,
            "WiFi": "free",
            "Music": None,
            "Ambience": {"intimate": False, "casual": True},
        },
        "business_stars": 4.0,
        "review_info": [
            {
                "review_stars": 5.0,
                "review_date": "2022-01-02 21:02:49",
                "review_text": "We loved our flatbreads and the clam chowder. Friendly staff.",
            },
            {
                "review_stars": 1.0,
                "review_date": "2021-12-20 22:29:32",
                "review_text": "The grilled chicken was bland.",
            },
        ],
    }
)


def flagged(detector: object, response: str, reference: str = RECORD) -> list[str]:
    return [response[s:e] for s, e in detector.detect(reference, response)]  # type: ignore[attr-defined]


def check_spans(spans: list[tuple[int, int]], response: str) -> None:
    assert spans == sorted(spans)
    assert all(0 <= s < e <= len(response) for s, e in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


class TestText:
    def test_stem_conflates_inflections(self) -> None:
        assert stem("restaurants") == stem("restaurant")
        assert stem("Fridays") == stem("Friday")
        assert stem("served") == stem("serves") == stem("serving")
        assert stem("Kyle's") == stem("kyle")

    def test_vocabulary_splits_camel_case_glues_pairs_expands_abbreviations(self) -> None:
        vocab = vocabulary("{'OutdoorSeating': True, 'state': 'CA', 'Take Out'}")
        for word in ("outdoor", "seating", "california", "takeout"):
            assert stem(word) in vocab

    def test_merge_spans(self) -> None:
        assert merge_spans([(5, 9), (0, 3), (2, 4), (9, 9), (9, 12)]) == [(0, 4), (5, 12)]


class TestNumbers:
    detector = NumbersDetector()

    @pytest.mark.parametrize(
        "response",
        [
            "Benchmark Eatery has a 4-star rating.",
            "It is rated 4.0 stars, based on two reviews.",
            "It opens at 11:30 AM and closes at 8 PM on Tuesday.",
            "On Friday it closes at 4:00 pm; on Tuesday at 20:00.",
            "A review from January 2, 2022 and one from December 20th, 2021.",
            "One reviewer gave 5 stars and another gave 1 star.",
            "It is at 1201 State St.",
            "Rated 4 out of 5.",
        ],
    )
    def test_supported(self, response: str) -> None:
        assert flagged(self.detector, response) == []

    def test_unsupported(self) -> None:
        response = (
            "Rated 4.5 stars, it is open until 10 PM, opened in 1988, mains cost $20, "
            "70% of diners return, a review from January 3, 2022, and eleven locations."
        )
        assert flagged(self.detector, response) == [
            "4.5 stars",
            "10 PM",
            "1988",
            "$20",
            "70%",
            "January 3, 2022",
            "eleven",
        ]

    def test_number_inside_a_word_is_not_a_claim(self) -> None:
        assert flagged(self.detector, "Masks were required during COVID-19.") == []

    def test_plain_text_reference(self) -> None:
        reference = "The shop opens at 9am and sells 12 kinds of bread."
        assert flagged(self.detector, "Opens at 9:00 AM with 12 breads.", reference) == []
        assert flagged(self.detector, "Opens at 8 am with 14 breads.", reference) == [
            "8 am",
            "14",
        ]


class TestNames:
    detector = NamesDetector()

    def test_supported_names(self) -> None:
        response = (
            "Benchmark Eatery is a Seafood spot in Santa Barbara, California, on State Street. "
            "Overall, Customers enjoyed it on Tuesday."
        )
        assert flagged(self.detector, response) == []

    def test_unknown_names(self) -> None:
        response = "Chef Gordon Ramsay praised it on Google, near Kyle's Kitchen."
        assert flagged(self.detector, response) == [
            "Chef Gordon Ramsay",
            "Google",
            "Kyle's Kitchen",
        ]

    def test_sentence_initial_single_word_is_skipped(self) -> None:
        assert flagged(self.detector, "Delightful food. Wonderful staff!") == []

    def test_hyphenated_claims_only_the_capitalised_part(self) -> None:
        assert flagged(self.detector, "A tasty American-style brunch.") == []
        assert flagged(self.detector, "A tasty Cajun-style brunch.") == ["Cajun-style"]


class TestContent:
    detector = ContentWordsDetector()

    def test_paraphrase_of_the_record_is_fine(self) -> None:
        response = (
            "Benchmark Eatery serves seafood and brunch in Santa Barbara. "
            "Reviewers loved the flatbreads and clam chowder, and the staff is friendly."
        )
        assert flagged(self.detector, response) == []

    def test_new_content_clause_is_flagged(self) -> None:
        response = "The eatery serves seafood. It also hosts weekly jazz concerts downstairs."
        assert flagged(self.detector, response) == ["It also hosts weekly jazz concerts downstairs"]

    def test_false_and_null_keys(self) -> None:
        response = (
            "Guests enjoy the intimate atmosphere; it accepts reservations. "
            "There is no garage. It has no music."
        )
        # intimate/reservations are False: asserting them is flagged, denying garage is fine;
        # Music is null, so even "no music" is unsupported.
        assert flagged(self.detector, response) == [
            "Guests enjoy the intimate atmosphere",
            "it accepts reservations",
            "It has no music",
        ]

    def test_positive_keys_are_supported(self) -> None:
        response = "There is outdoor seating, free WiFi and street parking."
        assert flagged(self.detector, response) == []

    def test_plain_text_reference(self) -> None:
        reference = "The bakery sells sourdough bread and croissants every morning."
        response = "The bakery sells sourdough bread. Nearby tourists queue patiently outside."
        assert flagged(self.detector, response, reference) == [
            "Nearby tourists queue patiently outside"
        ]


@pytest.mark.parametrize("name", ["numbers", "names", "content"])
def test_registry_and_span_invariants(name: str) -> None:
    assert name in detector_names()
    detector = get_detector(name)
    assert detector.name == name
    response = (
        "Benchmark Eatery, rated 4.5 stars by Google users, hosts live jazz, serves sushi, "
        "and opens at 9 AM. Its intimate patio, loved by Chef Ramsay, seats 200 guests."
    )
    check_spans(detector.detect(RECORD, response), response)
    assert detector.detect(RECORD, "") == []


class TestOfflineJudge:
    def item(self, **variables: str) -> Item:
        return Item(item_id="i1", variables=variables)

    def test_is_a_judge(self) -> None:
        judge = OfflineJudge("numbers", NumbersDetector())
        assert isinstance(judge, Judge)
        assert judge.output_kind == "spans"

    async def test_flags_spans_and_scores_one(self) -> None:
        response = "Rated 4.5 stars and open until 10 PM."
        judgment = await OfflineJudge("nums", NumbersDetector()).judge(
            self.item(reference=RECORD, response=response)
        )
        assert judgment.scored and judgment.score == 1.0 and judgment.verdict is True
        assert [(s.text, s.match) for s in judgment.spans] == [
            ("4.5 stars", "detector"),
            ("10 PM", "detector"),
        ]
        assert all(response[s.char_start : s.char_end] == s.text for s in judgment.spans)
        assert judgment.provider == "offline"
        assert judgment.model == "detector:numbers"
        assert judgment.prompt_name is None
        assert judgment.judge_id == "nums" and judgment.item_id == "i1"
        assert judgment.latency_ms >= 0

    def test_nothing_flagged_scores_zero(self) -> None:
        judgment = OfflineJudge("nums", NumbersDetector()).judge_sync(
            self.item(reference=RECORD, response="Rated 4 stars.")
        )
        assert judgment.score == 0.0 and judgment.spans == () and judgment.verdict is False

    @pytest.mark.parametrize(
        ("variables", "reason"),
        [
            (
                {"reference": RECORD},
                "missing variable 'response' (map it with --map response=COLUMN)",
            ),
            (
                {"response": "Hi."},
                "missing variable 'reference' (map it with --map reference=COLUMN)",
            ),
            ({"reference": RECORD, "response": "  \n"}, "empty response"),
        ],
    )
    def test_unscored(self, variables: dict[str, str], reason: str) -> None:
        judgment = OfflineJudge("c", ContentWordsDetector()).judge_sync(self.item(**variables))
        assert not judgment.scored and judgment.verdict is None
        assert judgment.unscored_reason == reason
        assert judgment.model == "detector:content"

    def test_custom_variable_names(self) -> None:
        judge = OfflineJudge(
            "n", NumbersDetector(), reference_variable="input", response_variable="output"
        )
        judgment = judge.judge_sync(self.item(input="Costs $5.", output="Costs $7."))
        assert [s.text for s in judgment.spans] == ["$7"]
