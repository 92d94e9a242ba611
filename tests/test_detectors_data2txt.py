"""Offline detectors on data-to-text cases of the kinds issue 25 (point 3) found wrong.

Each case is a short item made for the test, of a kind that occurs in the RAGTruth
data-to-text dev sample (the row named in its docstring), not a copy of a dev row.
"""

from __future__ import annotations

import pytest

from juryflow.judges.detectors.names import NamesDetector
from juryflow.judges.detectors.numbers import NumbersDetector
from juryflow.judges.detectors.schedule import check, closings, record_hours

WEEK = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def record(**fields: object) -> str:
    return str({"name": "Casa Verde", "city": "Goleta", "state": "CA", **fields})


def closed_mondays(hours: str = "11:0-21:0") -> dict[str, str]:
    return {day: ("0:0-0:0" if day == "Monday" else hours) for day in WEEK}


def flagged(detector: object, reference: str, response: str) -> list[str]:
    return [response[s:e] for s, e in detector.detect(reference, response)]  # type: ignore[attr-defined]


def verdicts(hours: dict[str, str], response: str) -> list[tuple[str, bool]]:
    table = record_hours(hours)
    assert table is not None
    return [(response[v.start : v.end], v.supported) for v in check(response, table)]


class TestHoursWords:
    def test_noon_is_a_word_not_part_of_afternoon(self) -> None:
        # No dev response says "afternoon"; the kind is a time word read inside another
        # word. "noon" here would make "noon until 9 PM" a wrong range.
        response = "The restaurant is open in the afternoon until 9 PM."
        assert verdicts(closed_mondays(), response) == [("9 PM", True)]
        assert verdicts(closed_mondays(), "It is open from noon until 9 PM.") == [
            ("open from noon until 9 PM", False)
        ]

    def test_a_day_word_before_a_noun_is_no_opening_day(self) -> None:
        # Dev 14991-gpt-4-0613: "... and daily vegetable risotto" in a sentence that says a
        # branch "has closed" was read as "closed daily".
        response = "While the old location has closed, diners praise the daily soup."
        assert verdicts(closed_mondays(), response) == []


class TestClosedDays:
    """Dev 14546-gpt-3.5-turbo-0613 ("it remains closed on Mondays") and 14531-llama-2-13b-chat
    ("every day, except for Tuesdays when it is closed"): whether days said without a time
    are said to be open or closed is read from their clause, not from 25 characters."""

    def test_closed_said_after_the_days(self) -> None:
        response = "On Mondays, the restaurant remains closed."
        assert verdicts(closed_mondays(), response) == [("On Mondays", True)]
        assert verdicts(closed_mondays(), "On Tuesdays, the restaurant remains closed.") == [
            ("On Tuesdays", False)
        ]

    def test_open_and_closed_days_in_one_sentence(self) -> None:
        response = "It is open Tuesday through Sunday and closed on Mondays."
        assert verdicts(closed_mondays(), response) == [
            ("open Tuesday through Sunday", True),
            ("closed on Mondays", True),
        ]

    def test_except_reaches_the_days_after_it_only(self) -> None:
        assert verdicts(closed_mondays(), "It is open every day except Mondays.") == [
            ("open every day", True),
            ("Mondays", True),
        ]
        assert verdicts(closed_mondays(), "It is open every day except Tuesdays.") == [
            ("open every day", False),
            ("Tuesdays", False),
        ]

    def test_days_continue_the_claim_before_them(self) -> None:
        hours = {day: "11:0-21:0" for day in WEEK}
        assert verdicts(hours, "It is open Monday to Friday, and on weekends.") == [
            ("open Monday to Friday", True),
            ("on weekends", True),
        ]

    def test_not_open_is_closed(self) -> None:
        assert verdicts(closed_mondays(), "It is not open on Mondays.") == [
            ("open on Mondays", True)
        ]


class TestHoursOfSomethingElse:
    """Dev 14531 (all six responses): a happy hour "runs from 11am to 7pm from Monday to
    Friday". A part or service of the business with hours of its own is not the business."""

    @pytest.mark.parametrize(
        "response",
        [
            "It opens at 11 AM, and the outdoor seating is available from 8:00 AM.",
            "The patio is open from 8 AM on weekends.",
            "The patio is open on weekends from 8 AM.",
            "On weekends, brunch is served from 8 AM.",
            "The restaurant is open daily, and the kitchen closes at 8 PM.",
        ],
    )
    def test_not_opening_hours(self, response: str) -> None:
        hours = dict.fromkeys(WEEK, "11:0-21:0")
        assert all(supported for _, supported in verdicts(hours, response))

    def test_the_business_hours_around_them_are_still_checked(self) -> None:
        response = "It is open daily and offers outdoor seating from 8:00 AM."
        assert verdicts(closed_mondays(), response) == [("open daily", False)]
        response = "The restaurant offers outdoor seating and is open from 8 AM on weekends."
        assert verdicts(closed_mondays(), response) == [("open from 8 AM on weekends", False)]
        # Opening for a meal is opening.
        assert verdicts(closed_mondays(), "It is open for breakfast from 8 AM.") == [
            ("from 8 AM", False)
        ]


class TestRecordHourFormats:
    """Dev 14991-gpt-3.5-turbo-0613 ("11:0 am to 9:0 pm" for "11:0-21:0") and 14090: the
    record's own way of writing hours, read as people read it."""

    def test_a_morning_close_may_be_written_12_hour(self) -> None:
        hours = dict.fromkeys(WEEK, "7:0-10:30")
        assert closings((420, 630)) == {630, 1350}
        assert closings((420, 1350)) == {1350}
        assert closings((1080, 120)) == {120}  # past midnight: one reading
        assert verdicts(hours, "It is open daily from 7:00am to 10:30pm.") == [
            ("open daily from 7:00am to 10:30pm", True)
        ]
        assert verdicts(hours, "It is open daily from 7:00am to 11pm.") == [
            ("open daily from 7:00am to 11pm", False)
        ]
        reference = record(hours=hours)
        assert flagged(NumbersDetector(), reference, "Coffee until 10:30 pm, they say.") == []

    @pytest.mark.parametrize(
        ("value", "span"),
        [
            ("11:0-21:0", (660, 1260)),
            ("7:00-22:30", (420, 1350)),
            ("7am - 10:30 pm", (420, 1350)),
            ("11:30 AM to 9 PM", (690, 1260)),
        ],
    )
    def test_record_hours_in_several_styles(self, value: str, span: tuple[int, int]) -> None:
        table = record_hours({"Friday": value})
        assert table is not None and table[4] == span

    def test_a_response_in_the_record_style(self) -> None:
        hours = dict.fromkeys(WEEK, "11:0-21:0")
        assert verdicts(hours, "It operates from 11:0 am to 9:0 pm every day.") == [
            ("operates from 11:0 am to 9:0 pm every day", True)
        ]


class TestDishNames:
    """Dev 14022-llama-2-70b-chat ("... and escargots"), 14769-llama-2-13b-chat ("tacos,
    burritos, quesadillas") and 14605-llama-2-70b-chat ("ribeye"): dishes in lower case that
    the record never names."""

    reference = record(
        categories="Mexican, Restaurants",
        review_info=[{"review_stars": 5.0, "review_text": "Great tacos and friendly staff."}],
    )
    detector = NamesDetector()

    def test_unnamed_dishes_in_a_menu_list(self) -> None:
        response = "The menu includes tacos, burritos, and quesadillas."
        assert flagged(self.detector, self.reference, response) == ["burritos", "quesadillas"]
        response = "It offers a variety of dishes, such as tacos and artisanal cheeses."
        assert flagged(self.detector, self.reference, response) == ["artisanal cheeses"]

    def test_praise_menu_words_and_meals_are_not_dishes(self) -> None:
        response = "The menu features delicious tacos and other traditional dishes."
        assert flagged(self.detector, self.reference, response) == []
        response = "Options include breakfast, lunch and dinner."
        assert flagged(self.detector, self.reference, response) == []

    def test_lists_of_amenities_are_not_menus(self) -> None:
        # Attributes are the content detector's: no menu word introduces this list.
        response = "It offers free Wi-Fi, valet parking and a rooftop bar."
        assert flagged(self.detector, self.reference, response) == []


class TestNamesThatAreNotClaims:
    """Dev 14091 ("slower service during COVID times") and 14282-llama-2-13b-chat ("no music
    or TVs"): holidays, world events and common nouns in capitals name nothing the record
    should hold."""

    detector = NamesDetector()

    @pytest.mark.parametrize(
        "response",
        [
            "Service was slow during COVID, one reviewer said.",
            "It gets busy on New Year's Eve and on Valentine's Day.",
            "There is no music or TVs, and they serve BBQ.",
        ],
    )
    def test_not_flagged(self, response: str) -> None:
        assert flagged(self.detector, record(), response) == []

    def test_a_respelt_name_of_several_words(self) -> None:
        # Dev 14752-llama-2-7b-chat: "Chopping Poke" for the record's "Choppa Poke"; one
        # word is far from its original (71 %), the name is close (83 %).
        reference = str({"name": "Choppa Poke", "city": "Goleta"})
        response = "We ate at Chopping Poke, near Chopping Block Grill."
        assert flagged(self.detector, reference, response) == ["Chopping Block Grill"]

    def test_names_beside_them_still_are(self) -> None:
        response = "Chef Ramsay cooked there on New Year's Eve."
        assert flagged(self.detector, record(), response) == ["Chef Ramsay"]


class TestReviewStars:
    detector = NumbersDetector()

    def reference(self, average: float, *stars: float) -> str:
        reviews = [
            {"review_stars": s, "review_date": "2022-01-02 21:02:49", "review_text": "Fine."}
            for s in stars
        ]
        return record(business_stars=average, review_info=reviews)

    def test_counts_of_reviews_by_their_stars(self) -> None:
        # Dev 14040-llama-2-13b-chat: "Two of the three customer reviews are positive" for
        # stars 5, 5 and 1 was flagged: no 2 in the record, but two reviews have 5 stars.
        response = "Two of the three customer reviews are positive."
        assert flagged(self.detector, self.reference(3.5, 5.0, 5.0, 1.0), response) == []
        stars = (1.5, 5.0, 1.0, 1.0, 1.0, 1.0)
        assert flagged(self.detector, self.reference(*stars), response) == ["Two"]

    def test_words_the_stars_contradict(self) -> None:
        # No dev response contradicts its stars this plainly; the kind is the rating check
        # ("an average rating of 4.0" for 3.5 stars, dev 14022-llama-2-13b-chat).
        low = self.reference(2.5, 1.0, 2.0)
        response = "Casa Verde is a highly rated diner with glowing reviews."
        assert flagged(self.detector, low, response) == ["highly rated", "glowing reviews"]
        high = self.reference(4.5, 5.0, 4.0)
        assert flagged(self.detector, high, "It has received mixed reviews.") == ["mixed reviews"]
        assert flagged(self.detector, high, "It has mostly negative reviews.") == [
            "mostly negative reviews"
        ]

    @pytest.mark.parametrize(
        ("stars", "response"),
        [
            # A 3-star review may be told as mixed (dev 14605-gpt-3.5-turbo-0613).
            ((4.0, 3.0, 5.0, 4.0), "It has received mixed feedback."),
            ((4.5, 5.0, 4.0), "One negative review mentioned the wait."),
            ((2.5, 1.0, 2.0), "The flan has been highly rated."),
            ((4.5, 5.0, 4.0), "Casa Verde is a highly rated diner with glowing reviews."),
        ],
    )
    def test_words_the_stars_allow(self, stars: tuple[float, ...], response: str) -> None:
        assert flagged(self.detector, self.reference(*stars), response) == []
