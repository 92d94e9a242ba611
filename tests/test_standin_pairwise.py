"""Simulated pairwise judges (``stub-sim-pair-...``) of the stand-in: the name grammar, the
truth from gold labels, the position bias's order flips, and a round trip over real HTTP."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator

import openai
import pytest

from juryflow.prompts.loader import load_template
from juryflow.standin.pairwise_sim import (
    SimPair,
    Verdict,
    better,
    find_pair,
    hallucinated_chars,
    pair_reply,
    pair_verdict,
)
from juryflow.standin.server import StubConfig, StubHandle, parse_model, running_stub_server
from juryflow.standin.simulator import Gold, GoldEntry, SimAnswer, parse_sim, sim_answer

CLEAN = GoldEntry((), False)
UNSPANNED = GoldEntry((), True)
"""Labelled hallucinated, with no span: known bad, not how bad."""
MIRROR: dict[Verdict, Verdict] = {"A": "B", "B": "A", "tie": "tie"}
"""A verdict on the swapped order, in the original order's labels."""


def _prompt(first: str, second: str, question: str = "When does the museum open?") -> str:
    template = load_template("pairwise_preference")
    return template.render({"input": question, "response_a": first, "response_b": second})


# --- the model-name grammar ----------------------------------------------------------------


def test_parse_sim_pair_grammar() -> None:
    assert parse_sim("sim-pair") == SimPair()
    assert SimPair() == SimPair(accuracy=1.0, position_bias=0.0, broken=0.0)
    assert parse_sim("sim-pair-a0.8") == SimPair(accuracy=0.8)
    assert parse_sim("sim-pair-P.3") == SimPair(position_bias=0.3)
    assert parse_sim("sim-pair-b1") == SimPair(broken=1.0)
    assert parse_sim("sim-pair-b0.1-P0.2-a0.9") == SimPair(0.9, 0.2, 0.1)
    rule = parse_model("stub-sim-pair-a0.9-P0.2+ms50+text")
    assert rule.answer == "sim-pair-a0.9-P0.2" and rule.text and rule.latency_ms == 50.0
    for bad, message in (
        ("sim-pair-r0.9", "bad parameter"),
        ("sim-pair-p0.3", "bad parameter"),  # p is the score family's specificity
        ("sim-pair-A0.3", "bad parameter"),
        ("sim-pair-a", "bad parameter"),
        ("sim-pair-a1.5", "outside"),
        ("sim-pair-P0.5-P0.6", "twice"),
        ("sim-pair-P0.1@meta", "no '@' family"),
        ("sim-pairs-a1", "expected sim-spans"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_sim(bad)


# --- the truth -----------------------------------------------------------------------------


def test_hallucinated_characters_merge_overlapping_spans() -> None:
    assert hallucinated_chars(CLEAN) == 0.0
    assert hallucinated_chars(GoldEntry(((0, 10), (5, 15), (20, 22)), True)) == 17.0
    assert hallucinated_chars(GoldEntry(((0, 10), (2, 4)), True)) == 10.0
    assert hallucinated_chars(UNSPANNED) == math.inf


def test_better_prefers_fewer_hallucinated_characters() -> None:
    short = GoldEntry(((3, 8),), True)
    long = GoldEntry(((0, 4), (10, 20)), True)
    overlapping = GoldEntry(((0, 10), (5, 15)), True)  # 15 characters, not 20
    assert better(CLEAN, short) == "A" and better(short, CLEAN) == "B"
    assert better(short, long) == "A" and better(long, short) == "B"
    assert better(overlapping, GoldEntry(((0, 14),), True)) == "B"
    # A span-less hallucination is worse than any clean or spanned response.
    assert better(UNSPANNED, CLEAN) == "B" and better(CLEAN, UNSPANNED) == "A"
    assert better(long, UNSPANNED) == "A"


def test_equal_counts_tie() -> None:
    assert better(CLEAN, GoldEntry((), False, "gpt-4")) == "tie"
    assert better(GoldEntry(((0, 5),), True), GoldEntry(((40, 45),), True)) == "tie"
    assert better(UNSPANNED, GoldEntry((), True)) == "tie"


def test_the_pair_is_found_in_the_order_shown() -> None:
    good, bad = "The museum opens at 9 am.", "The museum opens at 7 am daily."
    gold = Gold({good: CLEAN, bad: GoldEntry(((20, 24),), True)})
    assert find_pair(_prompt(good, bad), gold) == (good, bad)
    assert find_pair(_prompt(bad, good), gold) == (bad, good)
    assert find_pair(_prompt(good, "Something else entirely."), gold) is None
    # A response quoted inside a longer one is not a candidate of its own...
    longer = good + " Tickets cost 5 euros."
    nested = Gold({good: CLEAN, bad: CLEAN, longer: CLEAN})
    assert find_pair(_prompt(longer, bad), nested) == (longer, bad)
    # ...but it is when it also stands alone.
    assert find_pair(_prompt(longer, good), nested) == (longer, good)
    # A response holding the template's own tag is rendered with it escaped.
    tagged = "It closes at </answer_a> 5 pm."
    escaped = Gold({tagged: CLEAN, bad: CLEAN})
    assert "&lt;/answer_a&gt;" in _prompt(tagged, bad)
    assert find_pair(_prompt(tagged, bad), escaped) == (tagged, bad)


def test_sim_answer_dispatches_the_pair_family() -> None:
    good, bad = "The museum opens at 9 am.", "The museum opens at 7 am daily."
    gold = Gold({good: CLEAN, bad: GoldEntry(((20, 24),), True)})
    answer = sim_answer("sim-pair", _prompt(good, bad), gold, 0, "stub-sim-pair")
    assert answer == SimAnswer("pair", verdict="A")
    answer = sim_answer("sim-pair", _prompt(bad, good), gold, 0, "stub-sim-pair")
    assert answer == SimAnswer("pair", verdict="B")
    assert sim_answer("sim-pair-b1", _prompt(good, bad), gold, 0, "x") == SimAnswer("broken")
    assert sim_answer("sim-pair-P1", _prompt(bad, good), gold, 0, "x") == SimAnswer(
        "pair", verdict="A"
    )
    assert sim_answer("sim-pair-a0", _prompt(good, bad), gold, 0, "x") != SimAnswer(
        "pair", verdict="A"
    )
    assert pair_reply("tie")["verdict"] == "tie"


def test_unknown_pairs_get_a_seeded_random_verdict() -> None:
    gold = Gold({"The museum opens at 9 am.": CLEAN})
    params = SimPair(broken=1.0)  # never broken: the random answer is not the judge's
    verdicts = [
        pair_verdict(params, _prompt("The museum opens at 9 am.", f"Reply {i}."), gold, 0, "m")
        for i in range(60)
    ]
    again = [
        pair_verdict(params, _prompt("The museum opens at 9 am.", f"Reply {i}."), gold, 0, "m")
        for i in range(60)
    ]
    assert verdicts == again
    assert set(verdicts) == {"A", "B", "tie"}
    assert pair_verdict(params, _prompt("x", "y"), None, 0, "m") in ("A", "B", "tie")


# --- the position bias, statistically ------------------------------------------------------


def _synthetic_gold() -> tuple[Gold, list[str], list[str]]:
    """40 responses, none inside another: 10 clean, 5 hallucinated without spans and 25
    with spans of 5 to 20 characters."""
    entries: dict[str, GoldEntry] = {}
    clean: list[str] = []
    for i in range(40):
        text = f"Response {i:03d}: the museum opens at {i % 12 + 1} am, says the guide."
        if i < 10:
            entries[text] = CLEAN
            clean.append(text)
        elif i < 15:
            entries[text] = UNSPANNED
        else:
            length = 5 * (i % 4 + 1)
            entries[text] = GoldEntry(((14, 14 + length),), True)
    return Gold(entries), list(entries), clean


def _pairs(count: int) -> list[tuple[str, str]]:
    _, everyone, clean = _synthetic_gold()
    rng = random.Random(11)
    pairs: list[tuple[str, str]] = []
    for k in range(count):
        # One pair in three of two clean responses, so ties are common enough to weigh.
        x, y = rng.sample(clean if k % 3 == 0 else everyone, 2)
        pairs.append((x, y))
    return pairs


def _both_orders(model: str, params: SimPair) -> list[tuple[Verdict, Verdict, Verdict]]:
    """(truth, original verdict, swapped verdict mapped back) per synthetic pair."""
    gold, _, _ = _synthetic_gold()
    rows: list[tuple[Verdict, Verdict, Verdict]] = []
    for k, (x, y) in enumerate(_pairs(300)):
        question = f"Question {k}: when does the museum open?"
        original = pair_verdict(params, _prompt(x, y, question), gold, 0, model)
        swapped = pair_verdict(params, _prompt(y, x, question), gold, 0, model)
        assert original is not None and swapped is not None
        rows.append((better(gold[x], gold[y]), original, MIRROR[swapped]))
    return rows


def test_a_perfect_unbiased_judge_is_always_right_in_both_orders() -> None:
    rows = _both_orders("stub-sim-pair", SimPair())
    assert all(truth == original == swapped for truth, original, swapped in rows)
    assert {truth for truth, _, _ in rows} == {"A", "B", "tie"}


def test_position_bias_flips_the_exact_share_of_pairs() -> None:
    bias = 0.3
    rows = _both_orders("stub-sim-pair-P0.3", SimPair(position_bias=bias))
    # The chance a pair's two orders disagree: 1 - (1 - P)^m, m its orders whose truth is not
    # A (one for a pair with a better answer, both for a tie); see pairwise_sim's docs.
    chances = [1 - (1 - bias) ** (2 if truth == "tie" else 1) for truth, _, _ in rows]
    flips = [original != swapped for _, original, swapped in rows]
    n = len(rows)
    expected = sum(chances) / n
    standard_error = math.sqrt(sum(p * (1 - p) for p in chances)) / n
    observed = sum(flips) / n
    assert abs(observed - expected) < 4 * standard_error, (observed, expected)
    ties = sum(truth == "tie" for truth, _, _ in rows) / n
    assert expected == pytest.approx(bias * (1 + ties * (1 - bias)))
    # The order whose truth is A is answered A whichever draw fires (for the swapped order
    # that is the original B, once mapped back).
    assert all(original == "A" for truth, original, _ in rows if truth == "A")
    assert all(swapped == "B" for truth, _, swapped in rows if truth == "B")


def test_accuracy_is_the_share_of_true_verdicts() -> None:
    rows = _both_orders("stub-sim-pair-a0.7", SimPair(accuracy=0.7))
    n = 2 * len(rows)
    right = sum((original == truth) + (swapped == truth) for truth, original, swapped in rows)
    assert abs(right / n - 0.7) < 4 * math.sqrt(0.7 * 0.3 / n)


# --- over real HTTP ------------------------------------------------------------------------

GOOD = "The museum opens at 9 am every day except Monday, as the input says."
BAD = "The museum opens at 7 am every day and entry is always free of charge."


@pytest.fixture(scope="module")
def stub() -> Iterator[StubHandle]:
    gold = Gold({GOOD: CLEAN, BAD: GoldEntry(((20, 24), (44, 70)), True)})
    with running_stub_server(StubConfig(gold=gold, seed=0)) as handle:
        yield handle


def _ask(client: openai.OpenAI, model: str, prompt: str, tools: bool = False) -> dict[str, str]:
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"reasoning": {"type": "string"}, "verdict": {"type": "string"}},
        "required": ["reasoning", "verdict"],
    }
    if tools:
        completion = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            temperature=0,
            tools=[{"type": "function", "function": {"name": "verdict", "parameters": schema}}],
        )
        calls = completion.choices[0].message.tool_calls
        assert calls is not None
        data = json.loads(calls[0].function.arguments)  # type: ignore[union-attr]
    else:
        completion = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], temperature=0
        )
        data = json.loads(completion.choices[0].message.content or "")
    assert set(data) == {"reasoning", "verdict"} and data["verdict"] in ("A", "B", "tie")
    assert isinstance(data["reasoning"], str) and data["reasoning"]
    return data


def test_a_pair_judge_round_trip_over_http(stub: StubHandle) -> None:
    client = openai.OpenAI(base_url=stub.openai_base_url, api_key="x", max_retries=0)
    original, swapped = _prompt(GOOD, BAD), _prompt(BAD, GOOD)
    for tools in (False, True):
        assert _ask(client, "stub-sim-pair", original, tools)["verdict"] == "A"
        assert _ask(client, "stub-sim-pair-a1-P0", swapped, tools)["verdict"] == "B"
    # Always the first shown, whatever the content.
    assert _ask(client, "stub-sim-pair-P1", swapped)["verdict"] == "A"
    broken = client.chat.completions.create(
        model="stub-sim-pair-b1", messages=[{"role": "user", "content": original}]
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken.choices[0].message.content or "")


def test_one_answer_shown_twice_is_a_tie() -> None:
    """An A/A comparison: the same gold response in both places is a pair whose truth is a
    tie, so an accurate judge answers tie in both orders."""
    from juryflow.standin.pairwise_sim import find_pair

    text = "The cafe opens at nine."
    gold = {text: object()}
    prompt = f"<answer_a>\n{text}\n</answer_a>\n<answer_b>\n{text}\n</answer_b>"
    assert find_pair(prompt, gold) == (text, text)  # type: ignore[arg-type]
