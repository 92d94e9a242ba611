"""Prompt caching (issue 24, point 2): the static part of a split prompt goes first, marked
for Anthropic's cache and keyed for OpenAI's; the providers' cache counts are parsed,
priced and stored. Real SDKs over real HTTP against the stand-in, which caches prefixes as
the APIs do."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.pricing import cost_usd, price_for
from juryflow.judges.providers.price import Price
from juryflow.judges.ratelimit import reset_limiters
from juryflow.maths.records import Item
from juryflow.prompts.loader import load_template
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

KEY = "sk-test-fake-key-0123456789abcdef"
SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ragtruth_data2txt_sample.jsonl"
STATIC = load_template("data2txt_spans").static_text
STATIC_TOKENS = len(STATIC) // 4  # the stand-in's tokens: four characters each
_OPEN: list[LLMJudge] = []


def _items(n: int) -> list[Item]:
    """The first item of each of ``n`` sources (items of one source share a reference)."""
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    firsts = list({r["source_id"]: r for r in reversed(rows)}.values())[::-1][:n]
    return [Item(r["id"], {"reference": r["reference"], "response": r["response"]}) for r in firsts]


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_limiters()
    yield
    reset_limiters()


@pytest.fixture(autouse=True)
async def _close_judges() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubHandle]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with running_stub_server(StubConfig()) as handle:
        yield handle


def _judge(
    stub: StubHandle,
    provider: str,
    model: str,
    prompt: str = "data2txt_spans",
    prices: dict[str, Price] | None = None,
    **spec: Any,
) -> tuple[LLMJudge, list[dict[str, Any]]]:
    """A judge built by the factory, and the request bodies its client sends."""
    settings: dict[str, Any] = {"id": f"{provider}-j", "timeout": 5.0, "max_attempts": 1, **spec}
    if provider == "anthropic":
        settings.setdefault("base_url", stub.anthropic_base_url)
    judge = build_judge(
        JudgeSpec(provider=provider, model=model, prompt=prompt, **settings),  # type: ignore[arg-type]
        prices or {},
    )
    assert isinstance(judge, LLMJudge)
    _OPEN.append(judge)
    sent: list[dict[str, Any]] = []
    build = judge.client._parameters  # type: ignore[attr-defined]

    def spy(request: Any) -> dict[str, Any]:
        body = build(request)
        sent.append(body)
        return body  # the very dict the client posts

    judge.client._parameters = spy  # type: ignore[attr-defined]
    return judge, sent


async def test_anthropic_marks_the_static_block_first_and_reads_it_on_the_next_call(
    stub: StubHandle,
) -> None:
    judge, sent = _judge(stub, "anthropic", "stub-spans-good")
    first, second = _items(2)
    one = await judge.judge(first)
    two = await judge.judge(second)

    content = sent[0]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": STATIC, "cache_control": {"type": "ephemeral"}}
    assert content[1]["text"].startswith("## Input Format\n") and "cache_control" not in content[1]
    assert first.variables["response"] in content[1]["text"]
    # The stand-in caches what precedes the breakpoint: the static block, written once...
    assert one.usage.cache_write_tokens == STATIC_TOKENS == 1866
    assert one.usage.cache_read_tokens == 0
    # ...and read by the next item's call, though its own part differs.
    assert two.usage.cache_write_tokens == 0
    assert two.usage.cache_read_tokens == STATIC_TOKENS
    prompt = STATIC + content[1]["text"]
    assert one.usage.input_tokens == len(prompt) // 4  # every prompt token, the cached included
    assert one.scored and two.scored and one.prompt_name == "data2txt_spans@v2"


async def test_a_template_without_a_split_sends_one_string_and_marks_nothing(
    stub: StubHandle,
) -> None:
    judge, sent = _judge(stub, "anthropic", "stub-spans-good", prompt="data2txt_spans@v1")
    for item in _items(2):
        judgment = await judge.judge(item)
        assert judgment.usage.cache_write_tokens == judgment.usage.cache_read_tokens == 0
    assert all(isinstance(body["messages"][0]["content"], str) for body in sent)
    sent_prompt = sent[0]["messages"][0]["content"]
    assert sent_prompt.index("**Generated Article:**") < sent_prompt.index("## Output Format")


async def test_a_static_part_under_the_models_minimum_is_not_cached(stub: StubHandle) -> None:
    # Claude Haiku 4.5 caches prefixes of 4,096 tokens and more: the seed's ~1,900 are not.
    judge, _ = _judge(stub, "anthropic", "claude-haiku-4-5")
    for item in _items(2):
        judgment = await judge.judge(item)
        assert judgment.usage.cache_write_tokens == judgment.usage.cache_read_tokens == 0


async def test_openai_gets_the_static_prefix_first_and_a_cache_key_of_its_own(
    stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No base_url: OpenAI itself, which the SDK is pointed at the stand-in for by its variable.
    monkeypatch.setenv("OPENAI_BASE_URL", stub.openai_base_url)
    judge, sent = _judge(stub, "openai", "gpt-4.1-mini")
    first, second = _items(2)
    one = await judge.judge(first)
    two = await judge.judge(second)

    (message,) = sent[0]["messages"]
    assert message["content"].startswith(STATIC + "## Input Format\n")
    key = sent[0]["prompt_cache_key"]
    assert key.startswith("juryflow-") and sent[1]["prompt_cache_key"] == key
    assert "max_completion_tokens" in sent[0] and "max_tokens" not in sent[0]
    # OpenAI reports no writes; the second call reads the longest prefix both prompts
    # share, cut at 1,024 tokens + a multiple of 128.
    assert one.usage.cache_read_tokens == 0 and one.usage.cache_write_tokens is None
    shared = _shared_prefix(sent[0]["messages"][0]["content"], sent[1]["messages"][0]["content"])
    assert two.usage.cache_read_tokens == 1024 + (shared // 4 - 1024) // 128 * 128 == 1792
    # Priced by hand: gpt-4.1-mini at $0.40 / M input, $0.10 / M cached input, $1.60 / M out.
    usage = two.usage
    assert usage.input_tokens is not None and usage.output_tokens is not None
    by_hand = ((usage.input_tokens - 1792) * 0.40 + 1792 * 0.10 + usage.output_tokens * 1.60) / 1e6
    assert usage.cost_usd == pytest.approx(by_hand)


def _shared_prefix(first: str, second: str) -> int:
    n = 0
    while n < min(len(first), len(second)) and first[n] == second[n]:
        n += 1
    return n


async def test_a_compatible_server_gets_no_prompt_cache_key(stub: StubHandle) -> None:
    judge, sent = _judge(stub, "openai", "stub-spans-good", base_url=stub.openai_base_url)
    judgment = await judge.judge(_items(1)[0])
    assert judgment.scored
    assert "prompt_cache_key" not in sent[0] and "max_tokens" in sent[0]
    assert sent[0]["messages"][0]["content"].startswith(STATIC)


async def test_judges_have_keys_of_their_own_and_share_the_models_cache(
    stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", stub.openai_base_url)
    a, sent_a = _judge(stub, "openai", "gpt-5-mini", id="a")
    b, sent_b = _judge(stub, "openai", "gpt-5-mini", id="b")
    v1, sent_v1 = _judge(stub, "openai", "gpt-5-mini", id="a", prompt="data2txt_spans@v1")
    item = _items(1)[0]
    await a.judge(item)
    read = await b.judge(item)  # OpenAI caches by prefix (per organisation), not by key
    await v1.judge(item)
    keys = {body["prompt_cache_key"] for body in (*sent_a, *sent_b, *sent_v1)}
    assert len(keys) == 3  # per judge and per template
    assert read.usage.cache_read_tokens and read.usage.cache_read_tokens >= STATIC_TOKENS - 128


def test_cost_prices_cache_writes_reads_and_batches() -> None:
    # claude-sonnet-4-5: $3 / M input, so $3.75 / M to write the cache and $0.30 to read it.
    assert cost_usd("claude-sonnet-4-5", 3000, 500, cache_write_tokens=2000) == pytest.approx(
        (1000 * 3.0 + 2000 * 3.75 + 500 * 15.0) / 1e6
    )
    assert cost_usd("claude-sonnet-4-5", 3000, 500, cache_read_tokens=2000) == pytest.approx(
        0.0111  # (1000 x 3.00 + 2000 x 0.30 + 500 x 15.00) / 1e6, by hand
    )
    # Batches: half of everything, cache prices included.
    assert cost_usd(
        "claude-sonnet-4-5", 3000, 500, cache_read_tokens=2000, batch=True
    ) == pytest.approx(0.00555)
    assert cost_usd("gpt-4o", 2000, 100, cache_read_tokens=1024) == pytest.approx(
        (976 * 2.5 + 1024 * 1.25 + 100 * 10.0) / 1e6
    )
    price = price_for("gpt-5")
    assert price is not None and price.cache_read_price() == 0.125
    assert price.input_price(batch=True) == 0.625 and price.output_price(batch=True) == 5.0
    # A price that gives its own batch figures is taken at its word.
    own = Price(input=1.0, output=2.0, batch_input=0.4, batch_output=1.0)
    assert own.cost(1_000_000, 1_000_000, cache_read_tokens=500_000, batch=True) == pytest.approx(
        0.2 + 0.5 * 0.1 * 0.4 + 1.0
    )
    # Without cache counts (older stores, servers that report none) nothing changes.
    assert cost_usd("gpt-4.1", 1_000_000, 1_000_000) == pytest.approx(10.0)


async def test_budget_spends_the_cached_price(stub: StubHandle) -> None:
    prices = {"stub-spans-good": Price(input=3.0, output=15.0)}
    judge, _ = _judge(stub, "anthropic", "stub-spans-good", prices=prices)
    first, second = _items(2)
    await judge.judge(first)
    judgment = await judge.judge(second)
    usage = judgment.usage
    assert usage.input_tokens is not None and usage.output_tokens is not None
    uncached = usage.input_tokens - STATIC_TOKENS
    by_hand = (uncached * 3.0 + STATIC_TOKENS * 0.30 + usage.output_tokens * 15.0) / 1e6
    assert usage.cost_usd == pytest.approx(by_hand)
    assert judge.call_cost("", _as_response(usage)) == pytest.approx(by_hand)


def _as_response(usage: Any) -> Any:
    from juryflow.judges.providers.base import ModelResponse

    return ModelResponse(
        text="",
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_read_tokens=usage.cache_read_tokens,
    )


def test_each_stand_in_has_a_cache_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)

    async def one_call(handle: StubHandle) -> int | None:
        judge, _ = _judge(handle, "anthropic", "stub-spans-good")
        _OPEN.remove(judge)
        try:
            return (await judge.judge(_items(1)[0])).usage.cache_write_tokens
        finally:
            await judge.aclose()

    for _ in range(2):  # a new server's first call writes the prefix again
        with running_stub_server(StubConfig()) as handle:
            assert asyncio.run(one_call(handle)) == STATIC_TOKENS
