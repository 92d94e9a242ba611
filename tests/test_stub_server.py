"""The local stand-in server: wire formats, the model-name rules, faults, scripts, stats, CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from juryflow.judges.providers.base import TOOL_NAME, output_schema
from juryflow.prompts.loader import load_template
from juryflow.standin.model import (
    Rule,
    article_of,
    fuzzy_span,
    good_spans,
    normalized_span,
    repeated_word,
)
from juryflow.standin.server import (
    StubConfig,
    StubHandle,
    parse_model,
    running_stub_server,
)

ARTICLE = (
    "The team won 3 of 4 games in May. The team lost to Leeds at home, and the coach "
    "praised the defence after the final whistle."
)
SPANS_PROMPT = load_template("data2txt_spans").render({"reference": "{}", "response": ARTICLE})
SCORE_PROMPT = load_template("hallucination_score").render({"input": "q", "output": "a"})


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(retry_after=2)) as handle:
        yield handle


def anthropic_call(
    stub: StubHandle, model: str, prompt: str = SCORE_PROMPT, **body: Any
) -> httpx.Response:
    payload = {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": prompt}],
        **body,
    }
    headers = {"anthropic-version": "2026-10-21", "x-api-key": "k"}
    return httpx.post(f"{stub.base_url}/v1/messages", json=payload, headers=headers, timeout=30)


def openai_call(
    stub: StubHandle, model: str, prompt: str = SCORE_PROMPT, **body: Any
) -> httpx.Response:
    payload = {"model": model, "messages": [{"role": "user", "content": prompt}], **body}
    return httpx.post(f"{stub.openai_base_url}/chat/completions", json=payload, timeout=30)


# --- model-name rules ----------------------------------------------------------------------


def test_parse_model_grammar() -> None:
    rule = parse_model("stub-score-0.6+fenced+429x2+500x1+ms50")
    assert rule == Rule(
        answer="score-0.6", faults=(("429", 2), ("500", 1)), fenced=True, latency_ms=50.0
    )
    assert [rule.fault_for(i) for i in range(5)] == ["429", "429", "500", None, None]
    assert parse_model("stub-broken+hang").fault_for(99) == "hang"
    assert parse_model("claude-sonnet-4-5") == Rule(answer="random")
    with pytest.raises(ValueError, match="unknown option"):
        parse_model("stub-score-0.1+sometimes")


def test_spans_are_cut_from_the_generated_article() -> None:
    assert article_of(SPANS_PROMPT) == ARTICLE
    assert article_of(SCORE_PROMPT) == ""
    assert all(span in ARTICLE for span in good_spans(ARTICLE))
    assert "3" in good_spans(ARTICLE)
    normalized = normalized_span(ARTICLE)
    assert normalized not in ARTICLE
    assert normalized.rstrip(".").lower() in ARTICLE.lower()
    fuzzy = fuzzy_span(ARTICLE)
    assert fuzzy not in ARTICLE and len(fuzzy.split()) == 5
    word = repeated_word(ARTICLE)
    assert ARTICLE.count(word) >= 2


# --- wire formats --------------------------------------------------------------------------


def test_anthropic_text_and_tool_use_formats(stub: StubHandle) -> None:
    text = anthropic_call(stub, "stub-score-0.6").json()
    assert text["type"] == "message" and text["role"] == "assistant"
    assert text["content"][0]["type"] == "text"
    assert json.loads(text["content"][0]["text"])["score"] == 0.6
    assert text["usage"]["input_tokens"] > 0 and text["usage"]["output_tokens"] > 0

    tools = [{"name": TOOL_NAME, "input_schema": output_schema("spans")}]
    tool_choice = {"type": "tool", "name": TOOL_NAME}
    tooled = anthropic_call(
        stub, "stub-spans-good", SPANS_PROMPT, tools=tools, tool_choice=tool_choice
    ).json()
    block = tooled["content"][0]
    assert tooled["stop_reason"] == "tool_use"
    assert block["type"] == "tool_use" and block["name"] == TOOL_NAME
    assert block["input"]["hallucination_list"] == good_spans(ARTICLE)


def test_anthropic_sampling_parameters_are_refused_at_the_new_api_version(
    stub: StubHandle,
) -> None:
    response = anthropic_call(stub, "stub-score-0.6", temperature=0.0)
    assert response.status_code == 400
    assert "temperature" in response.json()["error"]["message"]


def test_openai_content_tool_calls_and_json_schema_formats(stub: StubHandle) -> None:
    plain = openai_call(stub, "stub-score-0.3").json()
    assert plain["object"] == "chat.completion"
    assert json.loads(plain["choices"][0]["message"]["content"])["score"] == 0.3
    assert plain["usage"]["total_tokens"] == (
        plain["usage"]["prompt_tokens"] + plain["usage"]["completion_tokens"]
    )

    schema = {"type": "json_schema", "json_schema": {"name": TOOL_NAME, "schema": {}}}
    structured = openai_call(stub, "stub-score-0.3", response_format=schema).json()
    assert json.loads(structured["choices"][0]["message"]["content"]) == {
        "score": 0.3,
        "reasoning": "stub judge: score 0.3",
    }

    tools = [{"type": "function", "function": {"name": TOOL_NAME, "parameters": {}}}]
    called = openai_call(stub, "stub-score-0.3", tools=tools).json()
    choice = called["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    arguments = choice["message"]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments)["score"] == 0.3


def test_kind_comes_from_the_schema_or_the_prompt(stub: StubHandle) -> None:
    spans = openai_call(stub, "stub-random", SPANS_PROMPT).json()
    assert "hallucination_list" in spans["choices"][0]["message"]["content"]
    score = openai_call(stub, "any-real-model-name", SCORE_PROMPT).json()
    assert "score" in json.loads(score["choices"][0]["message"]["content"])


def test_random_answers_are_seeded_by_prompt(stub: StubHandle) -> None:
    first = openai_call(stub, "stub-random", SPANS_PROMPT).json()
    second = openai_call(stub, "stub-random", SPANS_PROMPT).json()
    assert first["choices"][0]["message"] == second["choices"][0]["message"]
    spans = json.loads(first["choices"][0]["message"]["content"])["hallucination_list"]
    assert all(span in ARTICLE for span in spans)


def test_fenced_broken_and_prose_answers(stub: StubHandle) -> None:
    fenced = openai_call(stub, "stub-score-0.1+fenced").json()["choices"][0]["message"]
    assert fenced["content"].startswith("```json\n") and fenced["content"].endswith("\n```")
    broken = anthropic_call(stub, "stub-broken").json()["content"][0]["text"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken)
    prose = openai_call(stub, "stub-prose").json()["choices"][0]["message"]["content"]
    assert "{" not in prose


# --- faults --------------------------------------------------------------------------------


def test_429_then_answer_with_retry_after(stub: StubHandle) -> None:
    first = anthropic_call(stub, "stub-score-0.6+429x1")
    assert first.status_code == 429
    assert first.headers["retry-after"] == "2"
    assert first.json()["error"]["type"] == "rate_limit_error"
    assert anthropic_call(stub, "stub-score-0.6+429x1").status_code == 200


def test_error_statuses_in_each_api_shape(stub: StubHandle) -> None:
    assert openai_call(stub, "stub-score-0.6+500").status_code == 500
    assert anthropic_call(stub, "stub-score-0.6+400").status_code == 400
    unauthorized = openai_call(stub, "stub-score-0.6+401")
    assert unauthorized.status_code == 401
    assert unauthorized.json()["error"]["code"] == "invalid_api_key"


def test_dropped_connection_gets_no_response(stub: StubHandle) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        openai_call(stub, "stub-score-0.6+drop")


def test_hang_outlasts_the_client_timeout(stub: StubHandle) -> None:
    started = time.perf_counter()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{stub.openai_base_url}/chat/completions",
            json={"model": "stub-score-0.6+hang", "messages": []},
            timeout=0.2,
        )
    assert time.perf_counter() - started < 2
    deadline = time.monotonic() + 2
    while stub.stats.snapshot()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.01)  # the server notices the client has gone and frees the request
    assert stub.stats.snapshot()["by_outcome"] == {"hang": 1}


def test_fault_rates_are_applied() -> None:
    with running_stub_server(StubConfig(fault_500=1.0)) as stub:
        statuses = {openai_call(stub, "gpt-4o").status_code for _ in range(5)}
    assert statuses == {500}
    with running_stub_server(StubConfig(fault_429=0.5, seed=7)) as stub:
        codes = [openai_call(stub, "gpt-4o").status_code for _ in range(40)]
    assert set(codes) == {200, 429}
    with pytest.raises(ValueError):
        StubConfig(fault_429=0.7, fault_500=0.7)


def test_script_queue_runs_before_the_name_rule() -> None:
    config = StubConfig(script={"m": ["500", "raw:not json at all"]})
    with running_stub_server(config) as stub:
        stub.enqueue("m", "score-0.9")
        assert openai_call(stub, "m").status_code == 500
        raw = openai_call(stub, "m").json()["choices"][0]["message"]["content"]
        assert raw == "not json at all"
        third = openai_call(stub, "m").json()["choices"][0]["message"]["content"]
        assert json.loads(third)["score"] == 0.9


def test_latency_is_applied() -> None:
    # A long configured latency keeps the check meaningful on a loaded 2-core machine.
    with running_stub_server(StubConfig(latency_ms=1500)) as stub:
        started = time.perf_counter()
        openai_call(stub, "stub-score-0.1")
        assert time.perf_counter() - started >= 1.5
        started = time.perf_counter()
        openai_call(stub, "stub-score-0.1+ms0")
        assert time.perf_counter() - started < 1.0


# --- stats and concurrency -----------------------------------------------------------------


def test_stats_endpoint_and_reset(stub: StubHandle) -> None:
    openai_call(stub, "stub-score-0.1")
    anthropic_call(stub, "stub-score-0.2")
    anthropic_call(stub, "stub-score-0.2+500")
    stats = httpx.get(f"{stub.base_url}/_stats").json()
    assert stats["total"] == 3
    assert stats["by_model"] == {"stub-score-0.1": 1, "stub-score-0.2": 1, "stub-score-0.2+500": 1}
    assert stats["by_path"] == {"/v1/chat/completions": 1, "/v1/messages": 2}
    assert stats["by_outcome"] == {"ok": 2, "500": 1}
    assert stub.stats.requests() == 3 and stub.stats.requests("stub-score-0.1") == 1
    httpx.post(f"{stub.base_url}/_reset")
    assert stub.stats.requests() == 0
    assert httpx.get(f"{stub.base_url}/nowhere").status_code == 404


async def test_serves_many_requests_at_once() -> None:
    # Each answer takes 3 s, so the 128 requests overlap however slowly a loaded machine
    # sends them; how fast they are served is bench/bench_throughput.py's business.
    with running_stub_server(StubConfig(latency_ms=3000)) as stub:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            responses = await asyncio.gather(
                *(
                    client.post(
                        f"{stub.openai_base_url}/chat/completions",
                        json={"model": "stub-score-0.5", "messages": [{"content": str(n)}]},
                    )
                    for n in range(128)
                )
            )
        snapshot = stub.stats.snapshot()
    assert all(r.status_code == 200 for r in responses)
    assert snapshot["total"] == 128
    assert snapshot["max_in_flight"] >= 64  # served at once, not one after another


def test_command_line_entry_point() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "juryflow.standin.server", "--port", "0", "--latency-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split()[4]
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/_stats", timeout=5).json()["total"] == 0
    finally:
        process.terminate()
        process.wait(10)
