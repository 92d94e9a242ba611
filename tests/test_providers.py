"""LLM judges end to end: the official SDK clients over real HTTP against the local stand-in.

Every test runs for both providers, with both seed prompts where the output kind matters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from typing import Any

import pytest

from juryflow.judges.factory import build_client, build_judge, check_keys
from juryflow.judges.keys import PLACEHOLDER_KEY, resolve_api_key
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec, PanelSpec
from juryflow.judges.pricing import cost_usd, price_for
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.base import MissingKeyError, ModelRequest, ProviderError
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.judges.providers.price import Price
from juryflow.judges.ratelimit import reset_limiters
from juryflow.maths.records import Item, Judgment
from juryflow.prompts.loader import load_template
from juryflow.standin.model import good_spans
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

FAKE_KEY = "sk-test-fake-key-0123456789abcdef"
PROVIDERS = ("anthropic", "openai")

ARTICLE = (
    "The company reported a 15% increase in revenue in 2023 and expanded to 5 new "
    "countries. The company also opened a new headquarters in Berlin, Germany, where "
    "the board met in March."
)
SPANS_ITEM = Item(
    "spans-1",
    {"reference": '{"revenue_growth": "10%", "expansion": "3 countries"}', "response": ARTICLE},
)
SCORE_ITEM = Item(
    "score-1",
    {"input": "List the files in the repo.", "output": "I ran ls and found main.py and a.py."},
)
SCORE_PROMPT = "hallucination_score"
SPANS_PROMPT = "data2txt_spans"


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_limiters()
    yield
    reset_limiters()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    return FAKE_KEY


@pytest.fixture(autouse=True)
async def _close_judges() -> AsyncIterator[None]:
    # SDK clients left open would be garbage-collected on a later test's event loop.
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


_OPEN: list[LLMJudge | AnthropicClient | OpenAIClient] = []


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(retry_after=0.01)) as handle:
        yield handle


def base_url(stub: StubHandle, provider: str) -> str:
    return stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url


def make_judge(
    stub: StubHandle,
    provider: str,
    model: str,
    prompt: str = SCORE_PROMPT,
    prices: dict[str, Price] | None = None,
    **spec: Any,
) -> LLMJudge:
    """A judge built the production way (factory, key lookup), with test-sized delays."""
    settings: dict[str, Any] = {
        "timeout": 2.0,
        "max_attempts": 4,
        "base_url": base_url(stub, provider),
        **spec,
    }
    judge_spec = JudgeSpec(
        id=f"{provider}-judge",
        provider=provider,  # type: ignore[arg-type]
        model=model,
        prompt=prompt,
        **settings,
    )
    judge = build_judge(judge_spec, prices or {})
    assert isinstance(judge, LLMJudge)
    judge.base_delay = 0.001
    judge.max_delay = 0.05
    _OPEN.append(judge)
    return judge


def item_for(prompt: str) -> Item:
    return SPANS_ITEM if prompt == SPANS_PROMPT else SCORE_ITEM


def assert_no_key(judgment: Judgment, key: str = FAKE_KEY) -> None:
    for f in fields(judgment):
        assert key not in repr(getattr(judgment, f.name)), f.name


# --- well-formed answers -------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_score_prompt_scored_with_full_record(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-score-0.6")
    judgment = await judge.judge(SCORE_ITEM)

    template = load_template(SCORE_PROMPT)
    assert judgment.score == 0.6
    assert judgment.unscored_reason is None
    assert judgment.reasoning and "0.6" in judgment.reasoning
    assert judgment.prompt_name == "hallucination_score@v1"
    assert judgment.prompt_hash == template.sha256
    assert judgment.provider == provider
    assert judgment.model == "stub-score-0.6"
    assert judgment.attempts == 1
    assert judgment.cache_key == judge.cache_key(SCORE_ITEM)
    assert judgment.usage.input_tokens and judgment.usage.output_tokens
    assert judgment.usage.cost_usd is None  # no price known for a stub model
    assert judgment.latency_ms > 0
    assert json.loads(judgment.raw_output or "")["score"] == 0.6
    assert stub.stats.requests("stub-score-0.6") == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_spans_prompt_exact_spans_anchored(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judgment = await make_judge(stub, provider, "stub-spans-good", SPANS_PROMPT).judge(SPANS_ITEM)

    assert judgment.score == 1.0
    assert judgment.output_kind == "spans"
    assert judgment.prompt_name == "data2txt_spans@v2"
    assert [s.text for s in judgment.spans] == good_spans(ARTICLE)
    assert "15%" in good_spans(ARTICLE)
    for span in judgment.spans:
        assert span.match == "exact"
        assert span.char_start is not None and span.char_end is not None
        assert ARTICLE[span.char_start : span.char_end] == span.text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_spans_prompt_without_spans_scores_zero(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judgment = await make_judge(stub, provider, "stub-spans-none", SPANS_PROMPT).judge(SPANS_ITEM)
    assert judgment.score == 0.0
    assert judgment.spans == ()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_near_miss_spans_anchor_normalized_and_fuzzy(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-spans-nearmiss", SPANS_PROMPT)
    judgment = await judge.judge(SPANS_ITEM)

    normalized, fuzzy = judgment.spans
    assert normalized.match == "normalized"
    assert normalized.requested != normalized.text  # the judge's string was not verbatim
    assert normalized.requested.rstrip(".").lower() == normalized.text.lower()
    assert fuzzy.match == "fuzzy"
    assert fuzzy.similarity is not None and fuzzy.similarity >= judge.spec.fuzzy_threshold
    for span in judgment.spans:
        assert span.char_start is not None and span.char_end is not None
        assert ARTICLE[span.char_start : span.char_end] == span.text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_repeated_spans_anchor_to_successive_occurrences(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judgment = await make_judge(stub, provider, "stub-spans-repeat", SPANS_PROMPT).judge(SPANS_ITEM)
    first, second = judgment.spans
    assert first.text == second.text == "company"
    assert (first.match, second.match) == ("exact", "repeat")
    assert first.char_start == ARTICLE.index("company")
    assert second.char_start == ARTICLE.index("company", (first.char_end or 0))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("prompt", [SCORE_PROMPT, SPANS_PROMPT])
async def test_fenced_json_is_parsed(
    stub: StubHandle, keys: str, provider: str, prompt: str
) -> None:
    answer = "score-0.3" if prompt == SCORE_PROMPT else "spans-good"
    judgment = await make_judge(stub, provider, f"stub-{answer}+fenced", prompt).judge(
        item_for(prompt)
    )
    assert judgment.scored, judgment.unscored_reason
    assert (judgment.raw_output or "").startswith("```json")
    assert judgment.score == (0.3 if prompt == SCORE_PROMPT else 1.0)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("prompt", [SCORE_PROMPT, SPANS_PROMPT])
async def test_structured_answers_come_through_the_tool_or_schema(
    stub: StubHandle, keys: str, provider: str, prompt: str
) -> None:
    answer = "score-0.6" if prompt == SCORE_PROMPT else "spans-good"
    judgment = await make_judge(stub, provider, f"stub-{answer}", prompt).judge(item_for(prompt))
    assert judgment.scored, judgment.unscored_reason
    # Tool / schema arguments are stored as compact json.dumps, text answers as written.
    assert judgment.raw_output is not None and "\n" not in judgment.raw_output


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_plain_text_mode_when_structured_output_off(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-score-0.3", structured_output=False)
    judgment = await judge.judge(SCORE_ITEM)
    assert judgment.score == 0.3
    assert judgment.raw_output is not None and "\n" in judgment.raw_output  # the text itself


async def test_openai_tool_call_answer_is_parsed(stub: StubHandle, keys: str) -> None:
    client = OpenAIClient(FAKE_KEY, base_url=stub.openai_base_url, timeout=30)
    _OPEN.append(client)
    request = ModelRequest("judge this", "score", "stub-score-0.2+tool", 0.0, 256, 2.0, True)
    response = await client.complete(request)
    assert response.structured == {"score": 0.2, "reasoning": "stub judge: score 0.2"}


async def test_anthropic_tool_use_answer_is_parsed(stub: StubHandle, keys: str) -> None:
    client = AnthropicClient(FAKE_KEY, base_url=stub.anthropic_base_url, timeout=30)
    _OPEN.append(client)
    request = ModelRequest("judge this", "score", "stub-score-0.2", 0.0, 256, 2.0, True)
    response = await client.complete(request)
    assert response.structured == {"score": 0.2, "reasoning": "stub judge: score 0.2"}
    assert response.text == ""
    plain = await client.complete(
        ModelRequest("judge this", "score", "stub-score-0.2", 0.0, 256, 2.0, False)
    )
    assert plain.structured is None and json.loads(plain.text)["score"] == 0.2


# --- malformed answers ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("prompt", [SCORE_PROMPT, SPANS_PROMPT])
@pytest.mark.parametrize("answer", ["broken", "prose"])
async def test_unparseable_output_is_unscored_with_reason(
    stub: StubHandle, keys: str, provider: str, prompt: str, answer: str
) -> None:
    judgment = await make_judge(stub, provider, f"stub-{answer}", prompt).judge(item_for(prompt))
    assert judgment.score is None
    assert (judgment.unscored_reason or "").startswith("unparseable output: ")
    assert judgment.raw_output  # kept for inspection
    assert judgment.attempts == 1  # a bad answer is not a provider failure: no retry
    assert judgment.usage.input_tokens is not None


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_answer_of_the_wrong_kind_is_unscored(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judgment = await make_judge(stub, provider, "stub-score-0.6", SPANS_PROMPT).judge(SPANS_ITEM)
    assert judgment.score is None
    assert "hallucination_list" in (judgment.unscored_reason or "")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_missing_prompt_variable_is_unscored(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-score-0.6")
    judgment = await judge.judge(Item("x", {"input": "only input"}))
    assert judgment.score is None
    assert (judgment.unscored_reason or "").startswith("missing variable")
    assert "output" in (judgment.unscored_reason or "")
    assert stub.stats.requests() == 0


# --- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("prompt", [SCORE_PROMPT, SPANS_PROMPT])
async def test_429_with_retry_after_is_retried(
    stub: StubHandle, keys: str, provider: str, prompt: str
) -> None:
    answer = "score-0.6" if prompt == SCORE_PROMPT else "spans-good"
    model = f"stub-{answer}+429x2"
    judgment = await make_judge(stub, provider, model, prompt).judge(item_for(prompt))
    assert judgment.scored, judgment.unscored_reason
    assert judgment.attempts == 3
    assert stub.stats.snapshot()["by_outcome"] == {"429": 2, "ok": 1}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_carries_retry_after_into_our_error(stub: StubHandle, provider: str) -> None:
    client = _client(stub, provider)
    request = ModelRequest("p", "score", "stub-score-0.1+429", 0.0, 64, 2.0, False)
    with pytest.raises(ProviderError) as caught:
        await client.complete(request)
    error = caught.value
    assert (error.kind, error.status, error.retryable) == ("rate_limit", 429, True)
    assert error.retry_after == pytest.approx(0.01)
    assert client.should_retry(error)


def _client(stub: StubHandle, provider: str) -> AnthropicClient | OpenAIClient:
    client: AnthropicClient | OpenAIClient
    if provider == "anthropic":
        client = AnthropicClient(FAKE_KEY, base_url=stub.anthropic_base_url, timeout=0.3)
    else:
        client = OpenAIClient(FAKE_KEY, base_url=stub.openai_base_url, timeout=0.3)
    _OPEN.append(client)
    return client


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fault", "kind", "retryable", "status"),
    [
        ("500", "server", True, 500),
        ("drop", "connection", True, None),
        ("hang", "timeout", True, None),
        ("400", "client", False, 400),
        ("401", "auth", False, 401),
    ],
)
async def test_sdk_errors_translate_at_the_boundary(
    stub: StubHandle,
    provider: str,
    fault: str,
    kind: str,
    retryable: bool,
    status: int | None,
) -> None:
    client = _client(stub, provider)
    request = ModelRequest("p", "score", f"stub-score-0.1+{fault}", 0.0, 64, 0.3, False)
    with pytest.raises(ProviderError) as caught:
        await client.complete(request)
    error = caught.value
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)
    assert client.should_retry(error) is retryable
    assert FAKE_KEY not in str(error) and FAKE_KEY not in error.message


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("prompt", [SCORE_PROMPT, SPANS_PROMPT])
@pytest.mark.parametrize("fault", ["500x2", "dropx1", "hangx1"])
async def test_transient_faults_are_retried(
    stub: StubHandle, keys: str, provider: str, prompt: str, fault: str
) -> None:
    answer = "score-0.6" if prompt == SCORE_PROMPT else "spans-good"
    judge = make_judge(stub, provider, f"stub-{answer}+{fault}", prompt, timeout=0.3)
    judgment = await judge.judge(item_for(prompt))
    assert judgment.scored, judgment.unscored_reason
    assert judgment.attempts == int(fault[-1]) + 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["hang", "500", "drop"])
async def test_persistent_fault_ends_unscored_after_max_attempts(
    stub: StubHandle, keys: str, provider: str, fault: str
) -> None:
    model = f"stub-score-0.6+{fault}"
    judge = make_judge(stub, provider, model, timeout=0.3, max_attempts=2)
    judgment = await judge.judge(SCORE_ITEM)
    kind = {"hang": "timeout", "500": "server", "drop": "connection"}[fault]
    assert judgment.score is None
    assert (judgment.unscored_reason or "").startswith(f"provider error after 2 attempts: {kind}: ")
    assert judgment.attempts == 2
    assert judgment.cache_key is not None and judgment.prompt_hash is not None
    assert stub.stats.requests(model) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("fault", "kind"), [("400", "client"), ("401", "auth")])
async def test_client_and_auth_errors_are_not_retried(
    stub: StubHandle, keys: str, provider: str, fault: str, kind: str
) -> None:
    model = f"stub-score-0.6+{fault}"
    judgment = await make_judge(stub, provider, model).judge(SCORE_ITEM)
    assert judgment.score is None
    assert (judgment.unscored_reason or "").startswith(f"provider error after 1 attempt: {kind}: ")
    assert judgment.attempts == 1
    assert stub.stats.requests(model) == 1
    assert_no_key(judgment)


# --- keys ----------------------------------------------------------------------------------


def _spec(provider: str, **extra: Any) -> JudgeSpec:
    return JudgeSpec(
        id="claude" if provider == "anthropic" else "gpt",
        provider=provider,  # type: ignore[arg-type]
        model="stub-score-0.5",
        prompt=SCORE_PROMPT,
        **extra,
    )


@pytest.mark.parametrize(
    ("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_missing_key_names_the_variable_before_any_call(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    monkeypatch.delenv(variable, raising=False)
    spec = _spec(provider)
    with pytest.raises(MissingKeyError, match=variable) as caught:
        build_judge(spec, {})
    assert caught.value.variable == variable
    assert f"judge {spec.id!r} needs an API key" in str(caught.value)
    panel = PanelSpec(judges=(JudgeSpec(id="n", provider="offline", detector="numbers"), spec))
    with pytest.raises(MissingKeyError, match=variable):
        check_keys(panel)


def test_custom_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_GATEWAY_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)  # must not be used instead
    with pytest.raises(MissingKeyError, match="MY_GATEWAY_KEY"):
        resolve_api_key(_spec("anthropic", api_key_env="MY_GATEWAY_KEY"))
    monkeypatch.setenv("MY_GATEWAY_KEY", "gateway-key")
    assert resolve_api_key(_spec("anthropic", api_key_env="MY_GATEWAY_KEY")) == "gateway-key"


def test_check_keys_passes_with_keys_and_offline_judges(keys: str) -> None:
    panel = PanelSpec(
        judges=(
            JudgeSpec(id="n", provider="offline", detector="numbers"),
            _spec("anthropic"),
            _spec("openai"),
        )
    )
    check_keys(panel)


def test_local_openai_server_gets_placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real OpenAI key must not travel to whatever server base_url names.
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    spec = _spec("openai", base_url="http://127.0.0.1:9/v1")
    assert resolve_api_key(spec) == PLACEHOLDER_KEY
    explicit = _spec("openai", base_url="http://127.0.0.1:9/v1", api_key_env="VLLM_KEY")
    monkeypatch.delenv("VLLM_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="VLLM_KEY"):
        resolve_api_key(explicit)


async def test_local_openai_judge_works_without_any_key(
    stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judgment = await make_judge(stub, "openai", "stub-score-0.6").judge(SCORE_ITEM)
    assert judgment.score == 0.6


def test_prefect_secret_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.blocks import system

    class FakeSecret:
        def __init__(self, value: str) -> None:
            self.value = value

        def get(self) -> str:
            return self.value

    loaded: list[str] = []

    def load(name: str, **_: Any) -> FakeSecret:
        loaded.append(name)
        return FakeSecret("secret-from-block")

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(system.Secret, "load", load)
    spec = _spec("anthropic", api_key_secret="anthropic-key")
    assert resolve_api_key(spec) == "secret-from-block"
    assert loaded == ["anthropic-key"]

    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)  # the variable wins
    assert resolve_api_key(spec) == FAKE_KEY


def test_failing_secret_block_is_a_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.blocks import system

    def load(name: str, **_: Any) -> Any:
        raise ValueError(f"block {name} not found; value was {FAKE_KEY}")

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(system.Secret, "load", load)
    with pytest.raises(MissingKeyError) as caught:
        resolve_api_key(_spec("anthropic", api_key_secret="anthropic-key"))
    message = str(caught.value)
    assert "ANTHROPIC_API_KEY" in message and "'anthropic-key'" in message
    assert FAKE_KEY not in message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_key_never_reaches_a_judgment(stub: StubHandle, keys: str, provider: str) -> None:
    judgments = [
        await make_judge(stub, provider, model, prompt).judge(item_for(prompt))
        for model, prompt in [
            ("stub-score-0.6", SCORE_PROMPT),
            ("stub-spans-good", SPANS_PROMPT),
            ("stub-broken", SCORE_PROMPT),
            ("stub-score-0.6+401", SCORE_PROMPT),
            ("stub-score-0.6+400", SCORE_PROMPT),
        ]
    ]
    assert len(judgments) == 5
    for judgment in judgments:
        assert_no_key(judgment)
    client = build_client(_spec(provider, base_url=base_url(stub, provider)))
    assert FAKE_KEY not in repr(client)


# --- cost, cache key, concurrency ----------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cost_uses_panel_price_overrides(stub: StubHandle, keys: str, provider: str) -> None:
    prices = {"stub-score-0.6": Price(input=3.0, output=15.0)}
    judgment = await make_judge(stub, provider, "stub-score-0.6", prices=prices).judge(SCORE_ITEM)
    usage = judgment.usage
    assert usage.input_tokens is not None and usage.output_tokens is not None
    expected = (usage.input_tokens * 3.0 + usage.output_tokens * 15.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected)


def test_price_table_and_lookup() -> None:
    assert price_for("claude-sonnet-4-5") == Price(input=3.0, output=15.0)
    assert price_for("claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    assert price_for("gpt-4o-mini-2024-07-18") == price_for("gpt-4o-mini")
    assert price_for("gpt-4o-2024-08-06") == price_for("gpt-4o")
    assert price_for("llama3.1:8b") is None
    override = {"gpt-4o": Price(input=1.0, output=1.0)}
    assert price_for("gpt-4o", override) == Price(input=1.0, output=1.0)
    assert cost_usd("gpt-4.1", 1_000_000, 1_000_000) == pytest.approx(10.0)
    assert cost_usd("local-model", 100, 100) is None
    assert cost_usd("gpt-4.1", None, 100) is None


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cache_key_tracks_prompt_model_and_parameters(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-score-0.6")
    key = judge.cache_key(SCORE_ITEM)
    assert key == make_judge(stub, provider, "stub-score-0.6").cache_key(SCORE_ITEM)
    other_item = Item("other", {**SCORE_ITEM.variables, "output": "different"})
    assert judge.cache_key(other_item) != key
    assert make_judge(stub, provider, "stub-score-0.7").cache_key(SCORE_ITEM) != key
    warmer = make_judge(stub, provider, "stub-score-0.6", temperature=0.7)
    assert warmer.cache_key(SCORE_ITEM) != key
    # The item id is not part of the answer: same text, same key.
    assert judge.cache_key(Item("renamed", SCORE_ITEM.variables)) == key


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_many_concurrent_judgments_through_the_sdk(keys: str, provider: str) -> None:
    with running_stub_server(StubConfig(latency_ms=100)) as stub:
        judge = make_judge(stub, provider, "stub-score-0.3", max_concurrency=64)
        items = [
            Item(f"i{n}", {"input": f"question {n}", "output": f"answer {n}"}) for n in range(80)
        ]
        judgments = await asyncio.gather(*(judge.judge(item) for item in items))
        snapshot = stub.stats.snapshot()
    assert all(j.score == 0.3 for j in judgments)
    assert snapshot["total"] == 80
    assert 32 <= snapshot["max_in_flight"] <= 64
    assert judge.limiter.max_in_flight <= 64


# --- the call path: one pooled SDK client per endpoint and loop ----------------------------


def _sdk_of(judge: LLMJudge) -> Any:
    client = judge.client
    assert isinstance(client, AnthropicClient | OpenAIClient)
    return client._sdk()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_calls_go_through_the_sdks_aiohttp_transport(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-score-0.6")
    assert (await judge.judge(SCORE_ITEM)).score == 0.6
    client = judge.client
    assert isinstance(client, AnthropicClient | OpenAIClient)
    assert client.transport() == "aiohttp"
    # The SDK still sends: its own user agent reaches the server.
    agents = [headers.get("user-agent", "") for _, headers in stub.stats.requests_seen()]
    assert agents and all(a.startswith(("AsyncAnthropic/", "AsyncOpenAI/")) for a in agents)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_url_credentials_fall_back_to_httpx(
    stub: StubHandle, keys: str, provider: str
) -> None:
    # aiohttp refuses a URL's user:password next to the Basic header httpx derives from it.
    url = base_url(stub, provider).replace("http://", "http://alice:secret-pw@")
    judge = make_judge(stub, provider, "stub-score-0.6", base_url=url)
    assert (await judge.judge(SCORE_ITEM)).score == 0.6
    assert judge.client.transport() == "httpx"  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_pool_is_sized_from_max_concurrency(
    stub: StubHandle, keys: str, provider: str
) -> None:
    judge = make_judge(stub, provider, "stub-score-0.6", max_concurrency=13)
    assert (await judge.judge(SCORE_ITEM)).score == 0.6
    transport = _sdk_of(judge)._client._transport
    assert transport.limits.max_connections == 13
    assert transport.client.connector.limit == 13  # the aiohttp session really holds 13
    # A second model on the same endpoint has its own limiter: the shared pool grows to both.
    other = make_judge(stub, provider, "stub-score-0.7", max_concurrency=5)
    assert (await other.judge(SCORE_ITEM)).score == 0.7
    assert _sdk_of(other)._client._transport.limits.max_connections == 18
    assert _sdk_of(judge) is _sdk_of(other)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_one_client_per_endpoint_and_loop_reused_across_chunks_and_closed_at_run_end(
    stub: StubHandle, keys: str, provider: str
) -> None:
    from juryflow.flows.tasks import close_judges, judge_chunk, judge_for

    spec = JudgeSpec(
        id=f"{provider}-judge",
        provider=provider,  # type: ignore[arg-type]
        model="stub-score-0.6",
        prompt=SCORE_PROMPT,
        base_url=base_url(stub, provider),
        timeout=30.0,
    )
    # Another judge on the same endpoint, built (as the flow builds its panel) before any call.
    twin = make_judge(stub, provider, "stub-score-0.7")
    items = [Item(f"i{n}", {"input": f"q{n}", "output": f"a{n}"}) for n in range(6)]
    first = await judge_chunk.fn(spec, {}, items[:3], 0)
    judge = judge_for(spec, {})
    assert isinstance(judge, LLMJudge)
    sdk = _sdk_of(judge)
    second = await judge_chunk.fn(spec, {}, items[3:], 1)
    assert [j.score for j in (*first.judgments, *second.judgments)] == [0.6] * 6
    assert _sdk_of(judge_for(spec, {})) is sdk  # the same client served both chunks

    assert _sdk_of(twin) is sdk  # shared by the endpoint's judges
    assert sdk._client._transport.limits.max_connections == 16  # both judges' 8

    # Another loop gets its own.

    async def on_other_loop() -> object:
        other_sdk = _sdk_of(judge)
        await judge.aclose()
        return other_sdk

    other_loop_sdk = await asyncio.to_thread(asyncio.run, on_other_loop())
    assert other_loop_sdk is not sdk
    assert _sdk_of(judge) is sdk  # closing the other loop's client left this one alone

    await close_judges()  # what the flow does when the run ends
    assert sdk._client.is_closed
    assert judge.client.transport() is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_base_url_with_a_query_keeps_its_path_and_sends_the_query(
    stub: StubHandle, keys: str, provider: str
) -> None:
    """Issue 29: the SDKs appended their path after the query (``/v1?api-version=1/...``);
    the query now goes with every request, the path stays the API's."""
    judge = make_judge(
        stub, provider, "stub-score-0.7", base_url=base_url(stub, provider) + "?api-version=7"
    )
    judgment = await judge.judge(SCORE_ITEM)
    assert judgment.score == pytest.approx(0.7), judgment.unscored_reason
    target, _ = stub.stats.requests_seen()[-1]
    path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
    assert target.startswith(path + "?") and "api-version=7" in target, target
