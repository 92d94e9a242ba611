"""Judge output parsing: every accepted shape, and a precise reason for every rejection."""

from __future__ import annotations

import json

import pytest

from juryflow.judges.parsing import (
    OutputParseError,
    ParsedOutput,
    parse_output,
    parse_score_output,
    parse_spans_output,
)

SPANS_JSON = json.dumps(
    {
        "reasoning": {
            "content_analysis": "a",
            "reference_comparison": "b",
            "hallucination_identification": "c",
            "span_extraction": "d",
            "final_verdict": "e",
        },
        "hallucination_list": ["15%", "5 new countries"],
    }
)


def reason(excinfo: pytest.ExceptionInfo[OutputParseError]) -> str:
    return excinfo.value.reason


class TestScore:
    def test_plain_json(self) -> None:
        out = parse_score_output('{"score": 0.3, "reasoning": "wrong line number"}')
        assert out == ParsedOutput(score=0.3, spans=(), reasoning="wrong line number")

    def test_structured_dict(self) -> None:
        assert parse_score_output({"score": 1, "reasoning": "x"}).score == 1.0

    def test_fenced(self) -> None:
        raw = 'Here you go:\n```json\n{"score": 0.6, "reasoning": "invented path"}\n```\n'
        assert parse_score_output(raw).score == 0.6

    def test_prose_around_and_braces_in_prose(self) -> None:
        raw = 'I think {this} is bad.\n{"score": 0.0, "reasoning": "grounded"} Done.'
        assert parse_score_output(raw) == ParsedOutput(0.0, (), "grounded")

    def test_prefers_object_with_field(self) -> None:
        raw = '{"note": 1}\n{"score": 0.3}'
        assert parse_score_output(raw).score == 0.3

    def test_numeric_string_accepted(self) -> None:
        assert parse_score_output('{"score": " 0.6 "}').score == 0.6

    def test_missing_reasoning_is_fine(self) -> None:
        assert parse_score_output('{"score": 0.3}').reasoning is None

    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ("", "output is empty"),
            ("   \n", "output is empty"),
            ("The answer is 0.6", "no JSON object found in the output"),
            ('{"reasoning": "x"}', "field 'score' is missing"),
            ('{"score": "high"}', "field 'score' must be a number, got str 'high'"),
            ('{"score": null}', "field 'score' must be a number, got null"),
            ('{"score": true}', "field 'score' must be a number, got bool True"),
            ('{"score": [0.5]}', "field 'score' must be a number, got list [0.5]"),
            ('{"score": 1.4}', "score 1.4 is outside [0, 1]"),
            ('{"score": -0.1}', "score -0.1 is outside [0, 1]"),
            ('{"score": "NaN"}', "score nan is not a finite number"),
        ],
    )
    def test_rejections(self, raw: str, expected: str) -> None:
        with pytest.raises(OutputParseError) as excinfo:
            parse_score_output(raw)
        assert reason(excinfo) == expected

    def test_truncated_json_says_so(self) -> None:
        with pytest.raises(OutputParseError) as excinfo:
            parse_score_output('{"score": 0.6, "reasoning": "cut off')
        assert reason(excinfo).startswith("no complete JSON object found in the output")
        assert "character 0" in reason(excinfo)

    def test_not_text(self) -> None:
        with pytest.raises(OutputParseError, match="must be text or a JSON object, got int"):
            parse_score_output(3)  # type: ignore[arg-type]


class TestSpans:
    def test_prompt_shape(self) -> None:
        out = parse_spans_output(SPANS_JSON)
        assert out.score is None
        assert out.spans == ("15%", "5 new countries")
        assert out.reasoning is not None
        assert json.loads(out.reasoning)["final_verdict"] == "e"

    def test_string_reasoning_and_empty_list(self) -> None:
        out = parse_spans_output('{"reasoning": "none found", "hallucination_list": []}')
        assert out == ParsedOutput(None, (), "none found")

    def test_missing_reasoning(self) -> None:
        assert parse_spans_output({"hallucination_list": ["a"]}).reasoning is None

    def test_fenced_with_prose(self) -> None:
        raw = f"Analysis first.\n```json\n{SPANS_JSON}\n```\nThat is all."
        assert parse_spans_output(raw).spans == ("15%", "5 new countries")

    def test_nested_reasoning_object_not_mistaken_for_answer(self) -> None:
        raw = f"prefix {SPANS_JSON} suffix"
        assert parse_spans_output(raw).spans == ("15%", "5 new countries")

    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ('{"reasoning": "x"}', "field 'hallucination_list' is missing"),
            (
                '{"hallucination_list": "15%"}',
                "field 'hallucination_list' must be a list of strings, got str",
            ),
            (
                '{"hallucination_list": null}',
                "field 'hallucination_list' must be a list of strings, got null",
            ),
            (
                '{"hallucination_list": ["ok", 5]}',
                "field 'hallucination_list' must be a list of strings; item 1 is int 5",
            ),
            ("no json here", "no JSON object found in the output"),
        ],
    )
    def test_rejections(self, raw: str, expected: str) -> None:
        with pytest.raises(OutputParseError) as excinfo:
            parse_spans_output(raw)
        assert reason(excinfo) == expected


def test_parse_output_dispatches() -> None:
    assert parse_output('{"score": 0.3}', "score").score == 0.3
    assert parse_output(SPANS_JSON, "spans").spans == ("15%", "5 new countries")
    with pytest.raises(ValueError, match="unknown output kind"):
        parse_output("{}", "grade")  # type: ignore[arg-type]
