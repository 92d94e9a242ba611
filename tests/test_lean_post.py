"""The lean call path sends what the SDK sends and fails as the SDK fails.

Per provider, against the stand-in over real HTTP: the same request sent through the SDK's
whole path (``JURYFLOW_SDK_CALLS=1``) and replayed by :mod:`juryflow.judges.providers.
lean_post` arrives as the same method, target, headers (the key's aside) and body bytes; and
each failure the stand-in can make (4xx, 429 with Retry-After, 5xx, a dropped connection, a
hang past the timeout) becomes the same :class:`ProviderError` on both paths.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.judges.providers import lean_post
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.base import ModelRequest, ProviderError, SDKClient
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.judges.ratelimit import reset_limiters
from juryflow.standin.http_wire import WireRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

FAKE_KEY = "sk-test-lean-0123456789abcdef"
KEY_HEADERS = ("authorization", "x-api-key")
PROVIDERS = ("anthropic", "openai")
MODEL = "stub-spans-good"


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_limiters()
    yield
    reset_limiters()


def _client(provider: str, url: str) -> SDKClient[Any]:
    if provider == "anthropic":
        return AnthropicClient(FAKE_KEY, base_url=url, headers={"x-team": "evals"})
    return OpenAIClient(FAKE_KEY, base_url=f"{url}/v1", headers={"x-team": "evals"})


def _request(prompt: str, *, timeout: float = 30.0, model: str = MODEL) -> ModelRequest:
    return ModelRequest(
        prompt=prompt,
        output_kind="spans",
        model=model,
        temperature=0.0,
        max_tokens=512,
        timeout=timeout,
        structured=True,
        static_prompt="Instructions that stay the same for every item. ",
        prompt_cache_key="judge-1",
    )


# Non-ASCII, quotes and a newline: the body's encoding must match the SDK's byte for byte.
PROMPTS = ('Le café "Zum Löwen" — 東京\nopens at 8:00.', "A second item, plain ASCII.")


def _sent_by_both(
    provider: str, stub: StubHandle, monkeypatch: pytest.MonkeyPatch, requests: list[ModelRequest]
) -> tuple[list[Any], list[Any]]:
    """Each request sent by the SDK's whole path, then by the replay; the outcomes of both."""

    async def send(request: ModelRequest, client: SDKClient[Any]) -> Any:
        try:
            return await client.complete(request)  # type: ignore[attr-defined]
        except ProviderError as error:
            return error

    async def run() -> tuple[list[Any], list[Any]]:
        monkeypatch.setenv("JURYFLOW_SDK_CALLS", "1")
        whole = _client(provider, stub.base_url)
        by_sdk = [await send(request, whole) for request in requests]
        await whole.aclose()
        monkeypatch.delenv("JURYFLOW_SDK_CALLS")
        lean = _client(provider, stub.base_url)
        # The first call of each (path, timeout) is the SDK's, and recorded; then replayed.
        for request in requests:
            await send(request, lean)
        sdk = lean._sdk()
        for request in requests:
            path = "/v1/messages" if provider == "anthropic" else "/chat/completions"
            assert lean_post.template(sdk, path, request.timeout) is not None

        async def refuse(*_: Any) -> Any:
            raise AssertionError("a recorded call went through the SDK's whole path")

        monkeypatch.setattr(lean, "_sdk_post", refuse)
        replayed = [await send(request, lean) for request in requests]
        await lean.aclose()
        return by_sdk, replayed

    return asyncio.run(run())


def _comparable(wire: WireRequest) -> tuple[str, str, dict[str, str], bytes]:
    headers = {k: v for k, v in wire.headers.items() if k not in KEY_HEADERS}
    return wire.method, wire.target, headers, wire.body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replayed_requests_are_the_sdks_bytes_on_the_wire(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [_request(prompt) for prompt in PROMPTS]
    with running_stub_server() as stub:
        by_sdk, replayed = _sent_by_both(provider, stub, monkeypatch, requests)
        wire = stub.stats.wire_requests()
    n = len(requests)
    assert len(wire) == 3 * n  # SDK path, recording calls, replays
    sdk_wire, replay_wire = wire[:n], wire[2 * n :]
    for sent_by_sdk, sent_by_replay in zip(sdk_wire, replay_wire, strict=True):
        assert _comparable(sent_by_replay) == _comparable(sent_by_sdk)
        # the key is sent, and the same one
        assert {k: v for k, v in sent_by_replay.headers.items() if k in KEY_HEADERS} == {
            k: v for k, v in sent_by_sdk.headers.items() if k in KEY_HEADERS
        }
    assert "x-stainless-retry-count" in sdk_wire[0].headers  # it is the SDK's request
    assert sdk_wire[0].headers["x-team"] == "evals"
    assert replayed == by_sdk  # the same answers, read the same way
    assert all(answer.structured is not None for answer in replayed)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_another_timeout_is_recorded_again_not_replayed_with_the_old_header(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [_request(PROMPTS[0], timeout=30.0), _request(PROMPTS[0], timeout=12.5)]
    with running_stub_server() as stub:
        _sent_by_both(provider, stub, monkeypatch, requests)
        wire = stub.stats.wire_requests()
    read_timeouts = [w.headers.get("x-stainless-read-timeout") for w in wire[4:]]
    assert read_timeouts == [w.headers.get("x-stainless-read-timeout") for w in wire[:2]]
    assert read_timeouts[0] != read_timeouts[1]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["400", "401", "404", "429", "500", "drop"])
def test_a_failure_is_the_same_error_on_both_paths(
    provider: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One good answer first, so the replay has a request to replay; then the fault, on every
    # path: the SDK's, the recording call's and the replay's.
    script = {MODEL: ["ok", fault, "ok", fault, "ok", fault]}
    requests = [_request(PROMPTS[0]), _request(PROMPTS[1])]
    with running_stub_server(StubConfig(script=script, retry_after=2.5)) as stub:
        by_sdk, replayed = _sent_by_both(provider, stub, monkeypatch, requests)
    error = by_sdk[1]
    assert isinstance(error, ProviderError)
    assert isinstance(replayed[1], ProviderError)
    assert _described(replayed[1]) == _described(error)
    if fault == "429":
        assert error.retry_after == 2.5
    if fault == "drop":
        assert error.kind == "connection"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hang_past_the_timeout_is_the_same_timeout_on_both_paths(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {MODEL: ["ok", "hang", "ok", "hang", "ok", "hang"]}
    requests = [_request(PROMPTS[0], timeout=1.0), _request(PROMPTS[1], timeout=1.0)]
    config = StubConfig(script=script, hang_seconds=5.0)
    with running_stub_server(config) as stub:
        by_sdk, replayed = _sent_by_both(provider, stub, monkeypatch, requests)
    assert isinstance(by_sdk[1], ProviderError) and by_sdk[1].kind == "timeout"
    assert isinstance(replayed[1], ProviderError)
    assert _described(replayed[1]) == _described(by_sdk[1])


def _described(error: ProviderError) -> tuple[Any, ...]:
    return (str(error), error.kind, error.status, error.retryable, error.retry_after)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_warm_builds_the_loops_client_before_any_call(provider: str) -> None:
    """A chunk warms its judge's client first, so the header-pacing probe (the first call,
    which the others wait for) does not also pay for building the client."""

    async def run() -> tuple[str | None, str | None]:
        client = _client(provider, "http://127.0.0.1:9")
        before = client.transport()
        client.warm()
        after = client.transport()
        await client.aclose()
        return before, after

    assert asyncio.run(run()) == (None, "aiohttp")


# --- request bodies: orjson where it writes json's bytes, json everywhere else ---------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.sampled_from([0.0, -0.0, 1e-4, 1e-5, 1e15, 1e16, 1e20, 0.7, 2048.0])
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def json_bytes(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5))
def test_a_body_is_encoded_to_the_bytes_json_writes(body: dict[str, Any]) -> None:
    try:
        expected = json_bytes(body)
    except UnicodeEncodeError:  # a lone surrogate: json's error, as before
        with pytest.raises(UnicodeEncodeError):
            lean_post.encode(body)
        return
    assert lean_post.encode(body) == expected


def test_a_long_prompt_with_every_escape_is_encoded_as_json_does() -> None:
    prompt = "".join(chr(c) for c in range(0x3000) if not 0xD800 <= c < 0xE000) * 3
    body = {
        "model": "m",
        "max_tokens": 2048,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": prompt + "\u2028\u2029\U0001f600"}],
    }
    assert lean_post.encode(body) == json_bytes(body)
