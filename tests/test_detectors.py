"""Offline detectors on hand-made examples, and the OfflineJudge wrapped around them."""

from __future__ import annotations

import itertools

import pytest

from juryflow.judges.base import Judge
from juryflow.judges.detectors.content import ContentWordsDetector
from juryflow.judges.detectors.names import NamesDetector
from juryflow.judges.detectors.numbers import NumbersDetector
from juryflow.judges.detectors.registry import detector_names, get_detector
from juryflow.judges.detectors.schedule import check, record_hours
from juryflow.judges.detectors.text import merge_spans, sentences, stem, vocabulary
from juryflow.judges.offline import OfflineJudge
from juryflow.maths.records import Item

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

    def test_sentences_do_not_end_inside_numbers_or_abbreviations(self) -> None:
        text = "Rated 4.5 stars. Opens at 9 a.m every day!\nNo parking"
        assert [text[s:e] for s, e in sentences(text)] == [
            "Rated 4.5 stars",
            "Opens at 9 a.m every day",
            "No parking",
        ]


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

    def test_hours_are_checked_day_by_day(self) -> None:
        # 11:30 and 8 PM are both in the record, but not every day: Monday is closed
        # (0:0-0:0) and Friday closes at 4 PM. The whole claim is flagged.
        response = "It is open from 11:30 AM to 8 PM every day."
        assert flagged(self.detector, response) == ["open from 11:30 AM to 8 PM every day"]

    def test_hours_that_match_their_days(self) -> None:
        response = (
            "It opens from 11:30 AM to 8 PM on Tuesdays and until 4 PM on Fridays. "
            "On Fridays it is open from 11:30 to 16:00. It is closed on Mondays."
        )
        assert flagged(self.detector, response) == []

    def test_a_narrower_claim_overrides_a_broader_one(self) -> None:
        response = "It is open from 11:30 to 20:00 on Tuesday and Friday, until 16:00 on Fridays."
        assert flagged(self.detector, response) == []

    def test_days_said_without_times(self) -> None:
        assert flagged(self.detector, "It is open Monday through Sunday.") == [
            "open Monday through Sunday"
        ]
        assert flagged(self.detector, "It is closed on Tuesdays.") == ["closed on Tuesdays"]

    def test_other_schedules_are_not_opening_hours(self) -> None:
        # Monday is closed, but a happy hour is not the opening hours; 8 PM is in the record.
        assert flagged(self.detector, "Happy hour runs until 8 PM on Mondays.") == []

    def test_24_hour_suffixed_times(self) -> None:
        assert flagged(self.detector, "It is open until 20:00 PM on Tuesdays.") == []

    def test_the_rating_is_the_business_stars(self) -> None:
        # 5.0 is a review's stars, not the business's 4.0.
        assert flagged(self.detector, "It has an average rating of 5.0 stars.") == ["5.0"]
        assert flagged(self.detector, "It has an average rating of 4 stars.") == []
        assert flagged(self.detector, "One reviewer gave it a rating of 5.") == []


class TestSchedule:
    table = record_hours({"Monday": "0:0-0:0", "Tuesday": "17:0-1:30", "Saturday": "12:0-1:30"})

    def verdicts(self, response: str) -> list[tuple[str, bool]]:
        assert self.table is not None
        return [(response[v.start : v.end], v.supported) for v in check(response, self.table)]

    def test_record_hours(self) -> None:
        assert self.table == {
            0: None,
            1: (1020, 90),
            2: None,
            3: None,
            4: None,
            5: (720, 90),
            6: None,
        }
        assert record_hours(None) is None
        assert record_hours({}) is None

    def test_ranges_lists_and_after_midnight(self) -> None:
        response = (
            "It is open on Tuesday from 5 PM to 1:30 AM, and on Saturday from noon to 1:30 am."
        )
        assert self.verdicts(response) == [
            ("open on Tuesday from 5 PM to 1:30 AM", True),
            ("on Saturday from noon to 1:30 am", True),
        ]

    def test_24_hour_range_is_read_literally(self) -> None:
        # "5:0-1:30" cannot be 5 PM: the other end is written in 24-hour style.
        assert self.verdicts("It is open 5:0-1:30 on Tuesdays.") == [
            ("open 5:0-1:30 on Tuesdays", False)
        ]

    def test_vague_days_and_later_closing(self) -> None:
        assert self.verdicts("It is open on weekends from 12 PM.") == [
            ("open on weekends from 12 PM", True)
        ]
        assert self.verdicts("The bar is open late, with extended hours on weekends.") == [
            ("extended hours on weekends", False)
        ]

    def test_sentences_without_hours_talk_are_skipped(self) -> None:
        assert self.verdicts("We went on Monday at 9 PM.") == []


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

    def test_respellings_are_not_invented_names(self) -> None:
        # "Benchmarc" and "Santa Barbra" misspell the record; "Bentley" is new.
        response = "We visited Benchmarc Eatery in Santa Barbra, near the Bentley Bar."
        assert flagged(self.detector, response) == ["Bentley Bar"]

    def test_the_review_site_of_a_record(self) -> None:
        response = "It is rated 4 stars on Yelp."
        assert flagged(self.detector, response) == []
        assert flagged(self.detector, response, "Rated 4 stars.") == ["Yelp"]


class TestContent:
    detector = ContentWordsDetector()

    def test_paraphrase_of_the_record_is_fine(self) -> None:
        response = (
            "Benchmark Eatery serves seafood and brunch in Santa Barbara. "
            "Reviewers loved the flatbreads and clam chowder, and the staff is friendly."
        )
        assert flagged(self.detector, response) == []

    def test_new_content_clause_is_flagged(self) -> None:
        reference = "The eatery serves seafood and clam chowder in Santa Barbara."
        response = "The eatery serves seafood. It also hosts weekly jazz concerts downstairs."
        assert flagged(self.detector, response, reference) == [
            "It also hosts weekly jazz concerts downstairs"
        ]

    def test_clause_trigger_is_off_against_a_record_by_default(self) -> None:
        response = "The eatery serves seafood. It also hosts weekly jazz concerts downstairs."
        assert flagged(self.detector, response) == []
        detector = ContentWordsDetector(clauses_in_records=True)
        assert flagged(detector, response) == ["It also hosts weekly jazz concerts downstairs"]

    def test_key_claims_flag_a_phrase_not_the_clause(self) -> None:
        response = (
            "On warm evenings the friendly staff happily takes reservations for larger parties."
        )
        assert flagged(self.detector, response) == [
            "staff happily takes reservations for larger parties"
        ]

    def test_a_negation_reaches_along_a_list(self) -> None:
        response = (
            "It has no garage, no reservations, or intimate corners, but it has outdoor seating."
        )
        assert flagged(self.detector, response) == []

    def test_a_negation_stops_at_a_new_subject(self) -> None:
        response = "It has no garage parking, they take reservations."
        assert flagged(self.detector, response) == ["they take reservations"]

    def test_denying_a_true_key_is_flagged(self) -> None:
        # OutdoorSeating and WiFi are true/"free"; the street-parking denial is wrong too,
        # while "no garage" is right and explains the negation of "parking".
        response = (
            "There is no outdoor seating. Wi-Fi is not available. There is no garage parking."
        )
        assert flagged(self.detector, response) == [
            "There is no outdoor seating",
            "Wi-Fi is not available",
        ]

    def test_rather_than_only_reaches_forward(self) -> None:
        # Casual is true and intimate false: the first is right, the second denies casual.
        assert flagged(self.detector, "The vibe is casual rather than intimate.") == []
        assert flagged(self.detector, "The vibe is intimate rather than casual.") == [
            "The vibe is intimate rather than casual"
        ]

    def test_saying_the_record_is_silent_is_not_a_claim(self) -> None:
        response = "There are no details on whether it has music."
        assert flagged(self.detector, response) == []

    def test_whole_words_not_stems(self) -> None:
        # "diverse" and "divey" share a crude stem; only the key's own words count.
        reference = str({"name": "X", "attributes": {"Ambience": {"divey": False}}})
        assert flagged(self.detector, "A diverse menu.", reference) == []
        assert flagged(self.detector, "A divey bar.", reference) == ["A divey bar"]

    def test_parking_words_only_count_about_parking(self) -> None:
        reference = str({"attributes": {"BusinessParking": {"lot": False, "street": False}}})
        assert (
            flagged(self.detector, "It sits on a busy street with a lot of tables.", reference)
            == []
        )
        assert flagged(self.detector, "Street parking is easy.", reference) == [
            "Street parking is easy"
        ]
        # All parking flags false: there is no parking at all.
        assert flagged(self.detector, "Parking is easy.", reference) == ["Parking is easy"]

    def test_amenities_the_reference_never_names(self) -> None:
        response = "They offer delivery and catering, and the menu caters to families."
        assert flagged(self.detector, response) == ["They offer delivery", "catering"]
        assert flagged(self.detector, "They do not offer delivery.") == []
        reference = "We ordered delivery twice."
        assert flagged(self.detector, "They offer delivery.", reference) == []

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
