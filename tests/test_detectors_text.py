"""Offline detectors for free-text sources: question answering over passages and summaries.

Each case is a short item made for the test, of a kind that occurs in the RAGTruth QA and
summary dev samples (an invented step, a number or name the source never states, a
negation flipped), not a copy of a dev row.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.judges.detectors.facts import FactsDetector
from juryflow.judges.detectors.grounding import GroundingDetector
from juryflow.judges.detectors.polarity import PolarityDetector
from juryflow.judges.detectors.registry import detector_names, get_detector
from juryflow.judges.detectors.support import Source, is_meta, word_key
from juryflow.judges.panel import load_panel

REPO = Path(__file__).resolve().parents[1]
QA_PANEL = REPO / "examples" / "panel.offline-qa.yaml"
SUMMARY_PANEL = REPO / "examples" / "panel.offline-summary.yaml"

PASSAGES = (
    "passage 1:To bake chicken thighs, preheat the oven to 425 degrees. Season the thighs "
    "with salt, pepper and garlic powder, then bake them for 35 to 40 minutes until the skin "
    "is crisp.\n\npassage 2:Let the chicken rest for five minutes before serving so the "
    "juices settle. Chicken thighs stay moist because they contain more fat than breasts.\n\n"
)
ARTICLE = (
    "Firefighters in Portland rescued a family of ducks from a storm drain on Tuesday. "
    "The mother duck had led her eight ducklings across Main Street when they slipped "
    "through the grate. Crews lifted the grate and used a net to bring the ducklings up. "
    "The ducks were not injured, officials said, and the family was released at a pond "
    "in Laurelhurst Park. The fire chief said the rescue may have been the crew's tenth "
    "this spring."
)


def flagged(detector: object, reference: str, response: str) -> list[str]:
    spans = detector.detect(reference, response)  # type: ignore[attr-defined]
    return [response[s:e] for s, e in spans]


class TestSupport:
    def test_a_long_word_is_compared_by_its_prefix(self) -> None:
        source = Source.of("Survivors described the injuries they suffered.")
        assert source.supports("survived") and source.supports("injured")
        assert not source.supports("hospitalised")

    def test_word_key_drops_the_possessive(self) -> None:
        assert word_key("Lindsey's") == word_key("Lindsey")

    def test_a_preamble_is_not_a_claim(self) -> None:
        assert is_meta("Sure! Here's a summary of the article in 64 words:")
        assert is_meta("Based on the given passages, here are the steps:")
        assert is_meta("Let me know if you have any other questions.")
        assert not is_meta("The ducks were released at a pond.")

    def test_what_the_source_does_not_say_is_not_a_claim(self) -> None:
        # Dev kind: an answer that abstains ("the passages do not mention ...") is not
        # labelled, though its words are not in the passages.
        assert is_meta("The passages do not mention how long to marinate the chicken.")
        assert is_meta("The article is unclear about who called the firefighters.")
        assert not is_meta("Passage 2 says the chicken should rest for five minutes.")
        response = "The passages do not mention how long to marinate the chicken overnight."
        assert flagged(GroundingDetector(), PASSAGES, response) == []


class TestGrounding:
    detector = GroundingDetector()

    def test_invented_sentence_is_flagged_whole(self) -> None:
        # Dev kind: an answer adds a step or a tip that no passage gives.
        response = (
            "Preheat the oven to 425 degrees and season the thighs with salt and pepper. "
            "Brush them with honey mustard glaze and sprinkle toasted sesame seeds on top."
        )
        assert flagged(self.detector, PASSAGES, response) == [
            "Brush them with honey mustard glaze and sprinkle toasted sesame seeds on top"
        ]

    def test_supported_paraphrase_is_not_flagged(self) -> None:
        response = (
            "Season the chicken thighs with salt, pepper and garlic powder, then bake them "
            "for about 35 to 40 minutes until crisp. Let them rest before serving."
        )
        assert flagged(self.detector, PASSAGES, response) == []

    def test_a_record_is_left_to_the_data_to_text_detectors(self) -> None:
        record = str({"name": "Casa Verde", "city": "Goleta"})
        response = "Casa Verde serves wood-fired pizza with imported buffalo mozzarella."
        assert flagged(self.detector, record, response) == []

    def test_clauses_flag_only_the_unsupported_clause(self) -> None:
        # Dev kind: a summary sentence right but for one added detail.
        detector = GroundingDetector(clauses=True, min_fraction=0.4)
        response = (
            "Firefighters rescued eight ducklings from a storm drain, "
            "which attracted dozens of cheering onlookers filming on smartphones."
        )
        assert flagged(detector, ARTICLE, response) == [
            "which attracted dozens of cheering onlookers filming on smartphones"
        ]


class TestFacts:
    detector = FactsDetector()

    def test_number_not_in_source(self) -> None:
        response = "Bake the thighs for 35 to 40 minutes, then let them rest for 15 minutes."
        assert flagged(self.detector, PASSAGES, response) == ["15"]

    def test_date_not_in_source(self) -> None:
        response = "On March 3, 2021, firefighters rescued a family of ducks in Portland."
        assert flagged(self.detector, ARTICLE, response) == ["March 3, 2021"]

    def test_name_not_in_source(self) -> None:
        response = "The family was released at a pond near Mount Tabor by Captain Reyes."
        assert flagged(self.detector, ARTICLE, response) == ["Mount Tabor", "Captain Reyes"]

    def test_count_bound_to_the_wrong_noun(self) -> None:
        # Dev kind: "18 points and 10 rebounds" where 10 and rebounds are both in the
        # article, never together.
        source = (
            "Kaminsky scored 20 points and grabbed 11 rebounds. Okafor had 18 points for "
            "Duke, who led by 10 at halftime."
        )
        response = "Okafor had 18 points and 10 rebounds, and Kaminsky scored 20 points."
        assert flagged(self.detector, source, response) == ["10 rebounds"]

    def test_count_of_a_noun_the_source_never_counts_is_not_a_binding_error(self) -> None:
        source = "Crews pulled the ducklings from the drain while 8 volunteers watched."
        assert flagged(self.detector, source, "Crews pulled 8 ducklings from the drain.") == []

    def test_list_numbers_citations_and_the_preamble_are_not_claims(self) -> None:
        response = (
            "Sure! Here's a summary in 64 words:\n"
            "1. Preheat the oven to 425 degrees (Passage 1).\n"
            "2. Bake for 35 to 40 minutes (Passage 1 & 2).\n"
            "3. Check that the meat reaches 165°F."
        )
        assert flagged(self.detector, PASSAGES, response) == ["165"]

    def test_headings_and_acronyms_are_not_invented_names(self) -> None:
        # Dev kind: "Side Effects:" heads a list; "Fair Labor Standards Act" where the
        # passage says "FLSA".
        source = "Under the FLSA, mechanics paid a flat rate may be owed overtime."
        response = (
            "Overtime Rules:\n* The Fair Labor Standards Act covers flat-rate mechanics.\n"
            "* Mechanics may also join the Teamsters Union."
        )
        assert flagged(self.detector, source, response) == ["Teamsters Union"]
        spelled = "The Fair Employment and Housing Act covers small employers."
        assert flagged(self.detector, spelled, "FEHA covers small employers.") == []

    def test_a_record_is_left_to_the_data_to_text_detectors(self) -> None:
        assert flagged(self.detector, str({"stars": 4.0}), "Rated 4.5 stars.") == []


class TestPolarity:
    detector = PolarityDetector()

    def test_negation_flip(self) -> None:
        # Dev kind: "Evident Conflict", the response denies what the source states.
        response = "The mother duck had not led her eight ducklings across Main Street."
        assert flagged(self.detector, ARTICLE, response) == [
            "The mother duck had not led her eight ducklings across Main Street"
        ]

    def test_negation_dropped(self) -> None:
        source = "The company did not raise its prices for customers in Europe last year."
        response = "The company raised its prices for customers in Europe last year."
        assert flagged(self.detector, source, response) == [
            "The company raised its prices for customers in Europe last year"
        ]

    def test_hedge_dropped(self) -> None:
        response = "The fire chief said the rescue has been the crew's tenth this spring."
        assert flagged(self.detector, ARTICLE, response) == [
            "The fire chief said the rescue has been the crew's tenth this spring"
        ]

    def test_same_polarity_is_not_flagged(self) -> None:
        response = "The ducks were not injured, and the family was released at a pond."
        assert flagged(self.detector, ARTICLE, response) == []

    def test_a_clause_about_the_source_is_not_a_claim(self) -> None:
        response = "The passages do not mention the temperature to bake chicken thighs at."
        assert flagged(self.detector, PASSAGES, response) == []


@pytest.mark.parametrize("name", ["grounding", "grounding-clauses", "facts", "polarity"])
def test_registry_and_span_invariants(name: str) -> None:
    assert name in detector_names()
    detector = get_detector(name)
    assert detector.name == name
    response = "Firefighters in Seattle saved 12 ducklings. They did not use a net at all."
    spans = detector.detect(ARTICLE, response)
    assert spans == sorted(spans)
    assert all(0 <= s < e <= len(response) for s, e in spans)
    assert detector.detect(ARTICLE, "") == []


@pytest.mark.parametrize("panel", [QA_PANEL, SUMMARY_PANEL])
def test_panel_files_load_and_name_free_text_detectors(panel: Path) -> None:
    spec = load_panel(panel)
    assert {j.detector for j in spec.judges} <= set(detector_names())
    assert spec.consensus_rule().spans.name == "union"


def _rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    ("panel", "reference", "faithful", "invented", "expected"),
    [
        (
            QA_PANEL,
            PASSAGES,
            "Preheat the oven to 425 degrees and bake the thighs for 35 to 40 minutes.",
            "Bake the thighs for 35 to 40 minutes. Marinate them overnight in buttermilk "
            "with smoked paprika and cayenne for tenderness.",
            "Marinate them overnight in buttermilk with smoked paprika and cayenne for tenderness",
        ),
        (
            SUMMARY_PANEL,
            ARTICLE,
            "Firefighters in Portland rescued eight ducklings from a storm drain.",
            "Firefighters in Portland rescued eight ducklings from a storm drain on June 4.",
            "June 4",
        ),
    ],
)
def test_panel_end_to_end_through_juryflow_run(
    tmp_path: Path, panel: Path, reference: str, faithful: str, invented: str, expected: str
) -> None:
    data = _rows(
        tmp_path / "rows.jsonl",
        [
            {"id": "faithful", "reference": reference, "question": "q", "response": faithful},
            {"id": "invented", "reference": reference, "question": "q", "response": invented},
        ],
    )
    db = tmp_path / "text.duckdb"
    result = CliRunner().invoke(app, ["run", str(data), "--panel", str(panel), "--db", str(db)])
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(db), read_only=True)
    try:
        verdicts = dict(con.execute("SELECT item_id, hallucinated FROM consensus").fetchall())
        spans = con.execute("SELECT item_id, text FROM consensus_spans").fetchall()
        judges = con.execute("SELECT count(DISTINCT judge_id) FROM judgments").fetchone()
    finally:
        con.close()
    assert verdicts == {"faithful": False, "invented": True}
    assert any(item == "invented" and expected in text for item, text in spans), spans
    assert judges == (3,)


def test_the_offline_judge_reads_a_qa_rows_question_before_its_passages() -> None:
    """Words an answer takes from the question are no invention (RAGTruth keeps the question
    in a column of its own, which the item keeps in its metadata)."""
    from juryflow.judges.detectors.registry import get_detector
    from juryflow.judges.offline import OfflineJudge
    from juryflow.maths.records import Item

    passages = "passage 1: The museum opens at nine and closes at five on weekdays."
    answer = "Regarding the Smithsonian aquarium schedule, the museum opens at nine."
    judge = OfflineJudge("grounding", get_detector("grounding"))
    alone = Item("q", {"reference": passages, "response": answer})
    asked = Item(
        "q",
        {"reference": passages, "response": answer},
        metadata={"question": "What is the Smithsonian aquarium schedule?"},
    )
    assert judge.judge_sync(alone).spans, "without the question its words look invented"
    assert not judge.judge_sync(asked).spans
