"""A request recorded by one run is sent by the next without the SDK, byte for byte.

Per provider, against the stand-in over real HTTP: a run on the SDK's whole path
(``JURYFLOW_SDK_CALLS=1``) gives the reference bytes; a lean run records the SDK's request
and stores it (:mod:`juryflow.judges.providers.stored_requests`); a third, on a new event
loop and new clients as a new process has, sends every call from the store with no SDK
client built, and its requests arrive as the reference's (the key, another key, included).
A failure on the stored path is the SDK path's failure; a fresh process judging from the
store never imports the SDK; and the file holds no secret.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from juryflow.judges.providers import stored_requests
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.base import ModelRequest, ProviderError, SDKClient
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.judges.ratelimit import reset_limiters
from juryflow.standin.server import StubConfig, StubHandle, WireRequest, running_stub_server
from tests.conftest import REPO
from tests.test_lean_post import MODEL, PROMPTS, _described, _request

KEYS = ("sk-test-stored-0123456789abcdef", "sk-test-other-fedcba9876543210")
HEADER_SECRET = "team-token-5f2a9c81d07e4b36"
PROVIDERS = ("anthropic", "openai")


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Any:
    reset_limiters()
    yield
    reset_limiters()


def _client(provider: str, url: str, key: str = KEYS[0]) -> SDKClient[Any]:
    headers = {"x-team": "evals", "x-team-token": HEADER_SECRET}
    if provider == "anthropic":
        return AnthropicClient(key, base_url=url, headers=headers)
    return OpenAIClient(key, base_url=f"{url}/v1", headers=headers)


def _calls(
    provider: str,
    stub: StubHandle,
    requests: list[ModelRequest],
    *,
    key: str = KEYS[0],
    sdk_allowed: bool = True,
) -> tuple[list[Any], bool]:
    """The outcomes of ``requests`` on a new loop and client, and whether it built an SDK."""

    async def run() -> tuple[list[Any], bool]:
        client = _client(provider, stub.base_url, key)
        client.warm(requests[0].timeout)
        if not sdk_allowed:

            def refuse() -> Any:
                raise AssertionError("a stored request's call built the SDK's client")

            client._sdk = refuse  # type: ignore[method-assign]
        outcomes: list[Any] = []
        for request in requests:
            try:
                outcomes.append(await client.complete(request))  # type: ignore[attr-defined]
            except ProviderError as error:
                outcomes.append(error)
        built = client.shared.current(client.endpoint) is not None
        await client.aclose()
        return outcomes, built

    return asyncio.run(run())


def _comparable(wire: WireRequest) -> tuple[str, str, dict[str, str], bytes]:
    return wire.method, wire.target, dict(wire.headers), wire.body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stored_request_is_the_sdks_bytes_with_no_sdk_built(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [_request(prompt) for prompt in PROMPTS]
    n = len(requests)
    with running_stub_server() as stub:
        monkeypatch.setenv("JURYFLOW_SDK_CALLS", "1")
        by_sdk, _ = _calls(provider, stub, requests)
        by_sdk_other_key, _ = _calls(provider, stub, requests, key=KEYS[1])
        monkeypatch.delenv("JURYFLOW_SDK_CALLS")
        _, recorder_built = _calls(provider, stub, requests)  # records, and stores
        stored, built = _calls(provider, stub, requests, sdk_allowed=False)
        stored_other_key, _ = _calls(provider, stub, requests, key=KEYS[1], sdk_allowed=False)
        wire = stub.stats.wire_requests()
    assert recorder_built and not built
    assert len(wire) == 5 * n
    reference, reference_other = wire[:n], wire[n : 2 * n]
    assert [_comparable(w) for w in wire[3 * n : 4 * n]] == [_comparable(w) for w in reference]
    assert [_comparable(w) for w in wire[4 * n :]] == [_comparable(w) for w in reference_other]
    assert KEYS[1] in json.dumps(dict(reference_other[0].headers))  # the key is in the bytes
    assert stored == by_sdk and stored_other_key == by_sdk_other_key
    assert all(answer.structured is not None for answer in stored)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_stored_file_holds_no_secret(provider: str) -> None:
    with running_stub_server() as stub:
        _calls(provider, stub, [_request(PROMPTS[0])])
    text = (stored_requests.cache_dir() / stored_requests.FILE_NAME).read_text()
    assert "x-team-token" in text and "evals" in text  # the headers are there ...
    for secret in (*KEYS, HEADER_SECRET):
        assert secret not in text  # ... their secrets are not


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["400", "401", "429", "500", "drop", "hang"])
def test_a_failure_on_a_stored_request_is_the_sdk_paths_failure(
    provider: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {MODEL: ["ok", fault, "ok", fault]}
    requests = [_request(PROMPTS[0], timeout=1.0), _request(PROMPTS[1], timeout=1.0)]
    config = StubConfig(script=script, retry_after=2.5, hang_seconds=5.0)
    with running_stub_server(config) as stub:
        monkeypatch.setenv("JURYFLOW_SDK_CALLS", "1")
        reference, _ = _calls(provider, stub, requests)  # "ok", then the fault
        monkeypatch.delenv("JURYFLOW_SDK_CALLS")
        _calls(provider, stub, requests[:1])  # "ok": recorded and stored
        on_stored, built = _calls(provider, stub, requests[1:])  # the fault, from the store
        wire = stub.stats.wire_requests()
    assert len(wire) == 4 and "x-stainless-retry-count" in wire[3].headers
    assert isinstance(reference[1], ProviderError) and isinstance(on_stored[0], ProviderError)
    assert _described(on_stored[0]) == _described(reference[1])
    assert built  # the SDK was built for the error, to make its exception
    if fault == "429":
        assert on_stored[0].retry_after == 2.5
    if fault == "drop":
        assert on_stored[0].kind == "connection"
    if fault == "hang":
        assert on_stored[0].kind == "timeout"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_fresh_process_judging_from_the_store_never_imports_the_sdk(
    provider: str, tmp_path: Path
) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from tests.test_stored_requests import _client
        from tests.test_lean_post import _request

        async def main():
            client = _client({provider!r}, sys.argv[1])
            answer = await client.complete(_request("one item"))
            await client.aclose()
            print(answer.structured is not None, {provider!r} in sys.modules)

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with running_stub_server() as stub:
        runs = [
            subprocess.run(
                [sys.executable, "-c", script, stub.base_url],
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO,
                check=False,
                timeout=300,
            )
            for _ in range(2)
        ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    # The first records through the SDK; the second sends the stored request alone.
    assert [run.stdout.split() for run in runs] == [["True", "True"], ["True", "False"]]


@pytest.mark.parametrize(
    ("base_url", "environment"),
    [
        ("https://127.0.0.1:9/v1", {}),  # TLS settings are not part of the key
        ("http://user:secret@127.0.0.1:9/v1", {}),
        ("http://127.0.0.1:9/v1", {"HTTP_PROXY": "http://127.0.0.1:3128"}),
        ("http://127.0.0.1:9/v1", {"OPENAI_ORG_ID": "org-1"}),  # a header the SDK adds
    ],
)
def test_a_request_is_not_stored_where_more_than_the_key_could_change_it(
    base_url: str, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    client = OpenAIClient(KEYS[0], base_url=base_url)
    assert client._stored_key("/chat/completions", 30.0) is None
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("OPENAI_ORG_ID", raising=False)
    plain = OpenAIClient(KEYS[0], base_url="http://127.0.0.1:9/v1")
    assert plain._stored_key("/chat/completions", 30.0) is not None
