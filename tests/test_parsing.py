"""Judge output parsing: every accepted shape, and a precise reason for every rejection."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from juryflow.judges.parsing import (
    OutputParseError,
    ParsedOutput,
    parse_output,
    parse_score_output,
    parse_spans_output,
)
from juryflow.judges.untrusted.loading import MAX_NESTING_DEPTH

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


# --- long adversarial answers (issue 29, point 7): linear, and read as before ----------------


def finishes(parse: Callable[[], object], seconds: float = 60.0) -> list[object]:
    """``parse()``'s result or exception, from a thread joined with a timeout that tells a
    linear parse (well under a second here) from a quadratic one (hours); not a benchmark."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(parse())
        except OutputParseError as error:
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert outcome, "the parse did not finish"
    return outcome


def test_an_unclosed_fence_before_many_spaces() -> None:
    # Was cubic: every split of the spaces between the fence's two [ \t]* was tried.
    raw = "```" + " " * 100_000 + '\n{"score": 0.5}'
    (out,) = finishes(lambda: parse_score_output(raw))
    assert isinstance(out, ParsedOutput) and out.score == 0.5


def test_many_broken_objects_before_the_answer() -> None:
    # Each failed '{' counted the lines before it for its error message: quadratic.
    raw = '{"a' * 30_000 + '{"score": 0.25}'
    (out,) = finishes(lambda: parse_score_output(raw))
    assert isinstance(out, ParsedOutput) and out.score == 0.25


def test_the_first_error_is_placed_in_the_whole_text() -> None:
    raw = "x\n" * 5_000 + '{oops {"a": ' + '{"b": [1, ' * 20
    with pytest.raises(OutputParseError) as excinfo:
        parse_score_output(raw)
    start = raw.index("{oops")
    assert reason(excinfo) == (
        "no complete JSON object found in the output: "
        f"the '{{' at character {start} does not start valid JSON "
        "(Expecting property name enclosed in double quotes: "
        f"line 5001 column 2 (char {start + 1}))"
    )


def test_an_object_longer_than_a_decoding_window() -> None:
    reasoning = "the cited file does not exist; " * 2_000
    raw = "My verdict: " + json.dumps({"reasoning": reasoning, "score": 0.7}) + " (end)"
    assert parse_score_output(raw) == ParsedOutput(0.7, (), reasoning)
    # An unterminated string runs on into the next object, which is then read on its own.
    raw = 'Draft: {"score": 0.9, "reasoning": "' + "y" * 10_000 + ' Final: {"score": 0.2}'
    assert parse_score_output(raw).score == 0.2


def test_deeply_nested_braces() -> None:
    # Refused before any decoding (issue 44): no object in it is read past the limit.
    raw = '{"a": ' * 100_000
    (error,) = finishes(lambda: parse_score_output(raw))
    assert isinstance(error, OutputParseError)
    assert error.reason == f"answer nested deeper than {MAX_NESTING_DEPTH} levels"


def test_braces_nested_to_the_limit_are_still_read() -> None:
    inner = "[" * (MAX_NESTING_DEPTH - 1) + "]" * (MAX_NESTING_DEPTH - 1)
    raw = 'Verdict: {"score": 0.4, "reasoning": "deep", "trace": ' + inner + "} done"
    assert parse_score_output(raw) == ParsedOutput(0.4, (), "deep")
