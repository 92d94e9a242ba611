"""The stand-in samples: a request at temperature above 0 is one draw of its judge.

Identical requests at temperature 0 get byte-identical answers (as before sampling existed);
identical requests at 0.7 are independent draws, the first of which equals the answer at 0.
Real HTTP against the stand-in, in the OpenAI and Anthropic wire formats.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from juryflow.prompts.loader import load_template
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ragtruth_data2txt_sample.jsonl"
NOISY = "stub-sim-score-F0.5+text"
"""A score judge whose verdict flips with chance 0.5 on every draw."""
DRAWS = 8


@pytest.fixture(scope="module")
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


def _prompt(row: int) -> str:
    line = SAMPLE.read_text(encoding="utf-8").splitlines()[row]
    record = json.loads(line)
    values = {"input": record["reference"], "output": record["response"]}
    return load_template("hallucination_score").render(values)


def _content(stub: StubHandle, model: str, prompt: str, temperature: float | None) -> str:
    """The answer's text alone (ids and counters differ between any two replies)."""
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if temperature is not None:
        body["temperature"] = temperature
    reply = httpx.post(f"{stub.openai_base_url}/chat/completions", json=body, timeout=30)
    reply.raise_for_status()
    return str(reply.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize("model", [NOISY, "stub-random+text"])
def test_identical_requests_at_temperature_0_are_copies(stub: StubHandle, model: str) -> None:
    prompt = _prompt(0)
    answers = {_content(stub, model, prompt, 0) for _ in range(DRAWS)}
    answers |= {_content(stub, model, prompt, None) for _ in range(DRAWS)}
    assert len(answers) == 1


@pytest.mark.parametrize("model", [NOISY, "stub-random+text"])
def test_identical_requests_at_temperature_07_are_draws(stub: StubHandle, model: str) -> None:
    # A prompt this test alone sends, so its first sampled request is draw 0.
    prompt = _prompt(1) + f"\n\n(case {model})"
    unsampled = _content(stub, model, prompt, 0)
    draws = [_content(stub, model, prompt, 0.7) for _ in range(DRAWS)]
    assert draws[0] == unsampled
    assert len(set(draws)) > 1
    # Sampled requests do not move the unsampled answer.
    assert _content(stub, model, prompt, 0) == unsampled


def test_a_sim_judge_draws_its_noise_per_sample(stub: StubHandle) -> None:
    """Over the sample's rows, the noisy judge's samples disagree on some items."""
    differing = 0
    for row in range(6):
        prompt = _prompt(row)
        scores = {json.loads(_content(stub, NOISY, prompt, 0.7))["score"] for _ in range(DRAWS)}
        differing += len(scores) > 1
    assert differing >= 1


def test_anthropic_answers_sample_too(stub: StubHandle) -> None:
    """The Messages route counts draws the same way (with a version that takes temperature)."""
    prompt = _prompt(2) + "\n\n(anthropic case)"
    texts = []
    for temperature in (0.0, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7):
        reply = httpx.post(
            f"{stub.base_url}/v1/messages",
            json={
                "model": "stub-random+text",
                "max_tokens": 200,
                "temperature": temperature,
                "messages": [{"role": "user", "content": prompt}],
            },
            headers={"anthropic-version": "2023-06-01", "x-api-key": "sk-test"},
            timeout=30,
        )
        reply.raise_for_status()
        texts.append(reply.json()["content"][0]["text"])
    assert texts[1] == texts[0]
    assert len(set(texts)) > 1


def test_a_sim_judge_without_noise_answers_every_draw_alike(stub: StubHandle) -> None:
    """Only the drawn parameters vary between samples: a perfect judge's samples agree (and
    so the prompts above were answered from the gold labels, not at random)."""
    for row in range(6):
        prompt = _prompt(row)
        scores = {
            json.loads(_content(stub, "stub-sim-score+text", prompt, 0.7))["score"]
            for _ in range(4)
        }
        assert len(scores) == 1
