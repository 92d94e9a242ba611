"""Batch clients end to end: the official SDKs' batch methods over real HTTP against the
stand-in's batch endpoints, for both providers."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from juryflow.judges.batches.anthropic import AnthropicBatchClient
from juryflow.judges.batches.base import BatchClient, BatchNotEnded, BatchUnsupported
from juryflow.judges.batches.factory import batch_client
from juryflow.judges.batches.openai import OpenAIBatchClient
from juryflow.judges.batches.records import (
    BatchLimits,
    BatchRequest,
    BatchResult,
    BatchStatus,
    SubmittedBatch,
)
from juryflow.judges.batches.waiting import Backoff, wait_for
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.base import ModelRequest, ProviderError
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.standin.batches import stats_of
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

FAKE_KEY = "sk-test-fake-key-0123456789abcdef"
PROVIDERS = ("openai", "anthropic")
NO_WAIT = Backoff(0, 1, 0)
JUDGE = "judge/one \u00e9"
ODD_IDS = ("item/1", "\u00edtem 2 \u2713", 'quote"3\nline', "x" * 200)

ModelClient = OpenAIClient | AnthropicClient
MakeClient = Callable[..., tuple[ModelClient, BatchClient]]


@contextmanager
def stub(**config: Any) -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(**config)) as handle:
        yield handle


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    """Batch clients on fresh model clients, closed when the test ends."""
    opened: list[ModelClient] = []

    def make(
        handle: StubHandle, provider: str, limits: BatchLimits | None = None
    ) -> tuple[ModelClient, BatchClient]:
        client: ModelClient
        if provider == "openai":
            client = OpenAIClient(FAKE_KEY, base_url=handle.openai_base_url, timeout=10)
        else:
            client = AnthropicClient(FAKE_KEY, base_url=handle.anthropic_base_url, timeout=10)
        opened.append(client)
        return client, batch_client(client, JUDGE, limits)

    yield make
    for client in opened:
        await client.aclose()


def request(
    model: str, item_id: str, judge_id: str = JUDGE, structured: bool = True
) -> BatchRequest:
    prompt = f"Rate how far this answer is made up.\n\nItem: {item_id}"
    return BatchRequest(
        item_id,
        judge_id,
        ModelRequest(
            prompt=prompt,
            output_kind="score",
            model=model,
            temperature=0.0,
            max_tokens=200,
            timeout=10.0,
            structured=structured,
        ),
    )


async def finish(client: BatchClient, batches: list[SubmittedBatch]) -> dict[str, BatchStatus]:
    statuses = await wait_for(client, [b.batch_id for b in batches], backoff=NO_WAIT, max_polls=30)
    assert all(status.ended for status in statuses.values())
    return statuses


async def results(client: BatchClient, batches: list[SubmittedBatch]) -> list[BatchResult]:
    return [result for batch in batches async for result in client.results(batch)]


def by_item(found: list[BatchResult]) -> dict[str, BatchResult]:
    assert len({r.item_id for r in found}) == len(found), "one result per request"
    return {r.item_id: r for r in found}


# --- submit, poll, results -----------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_batch_answers_are_the_real_time_answers_with_usage(
    make_client: MakeClient, provider: str
) -> None:
    with stub() as handle:
        client, batches_client = make_client(handle, provider)
        requests = [
            request("stub-score-0.3", ODD_IDS[0]),
            request("stub-random", ODD_IDS[1]),
            request("stub-score-0.6", ODD_IDS[2], structured=False),
            request("stub-score-0.6+fenced", ODD_IDS[3]),
        ]
        created: list[tuple[SubmittedBatch, int]] = []
        polls = stats_of(handle.server)

        submitted = await batches_client.submit(
            requests, on_created=lambda batch: created.append((batch, polls.get("polls")))
        )

        assert [batch for batch, _ in created] == submitted
        assert all(polls_then == 0 for _, polls_then in created), "journaled before any poll"
        # OpenAI takes one model per batch; Anthropic mixes them.
        assert len(submitted) == (4 if provider == "openai" else 1)
        await finish(batches_client, submitted)
        found = by_item(await results(batches_client, submitted))
        assert set(found) == set(ODD_IDS)
        for each in requests:
            result = found[each.item_id]
            assert result.judge_id == JUDGE and result.failure is None
            assert result.response == await client.complete(each.request)
            assert result.response is not None
            assert (result.response.input_tokens or 0) > 0
            assert (result.response.output_tokens or 0) > 0
        assert found[ODD_IDS[0]].response.structured == {  # type: ignore[union-attr]
            "score": 0.3,
            "reasoning": "stub judge: score 0.3",
        }


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_progress_shows_the_providers_states(make_client: MakeClient, provider: str) -> None:
    with stub(batch_polls_to_finish=3) as handle:
        _, batches_client = make_client(handle, provider)
        submitted = await batches_client.submit(
            [request("stub-score-0.3", f"item-{n}") for n in range(4)]
        )
        seen: list[BatchStatus] = []
        await wait_for(batches_client, [submitted[0].batch_id], seen.append, NO_WAIT)

    states = [(s.state, s.done, s.total) for s in seen]
    if provider == "openai":
        assert states == [("in_progress", 2, 4), ("finalizing", 4, 4), ("completed", 4, 4)]
    else:  # Anthropic counts nothing done until the whole batch has ended
        assert states == [("in_progress", 0, 4), ("in_progress", 0, 4), ("completed", 4, 4)]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_may_end_on_time_instead_of_polls(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_seconds_to_finish=0.0) as handle:
        _, batches_client = make_client(handle, provider)
        submitted = await batches_client.submit([request("stub-score-0.3", "a")])
        status = await batches_client.poll(submitted[0].batch_id)
    assert status.state == "completed"


# --- splitting -----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_requests_split_at_the_request_limit(make_client: MakeClient, provider: str) -> None:
    with stub(batch_max_requests=3) as handle:
        _, batches_client = make_client(handle, provider, BatchLimits(3, 10**9))
        requests = [request("stub-score-0.3", f"item-{n}") for n in range(7)]
        submitted = await batches_client.submit(requests)
        assert [len(b.entries) for b in submitted] == [3, 3, 1]
        await finish(batches_client, submitted)
        found = by_item(await results(batches_client, submitted))
    assert sorted(found) == sorted(r.item_id for r in requests)
    assert all(r.response is not None for r in found.values())


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_requests_split_at_the_byte_limit(make_client: MakeClient, provider: str) -> None:
    limit = 2_000  # a few requests of ~450 bytes each; the stand-in refuses a byte more
    with stub(batch_max_bytes=limit) as handle:
        _, batches_client = make_client(handle, provider, BatchLimits(1_000, limit))
        requests = [request("stub-score-0.3", f"item-{n}") for n in range(12)]
        submitted = await batches_client.submit(requests)
        assert len(submitted) > 2
        await finish(batches_client, submitted)
        found = by_item(await results(batches_client, submitted))
    assert len(found) == 12 and all(r.response is not None for r in found.values())


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_stand_in_refuses_a_batch_over_its_limit(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_max_requests=2) as handle:
        _, batches_client = make_client(handle, provider)  # the providers' own, larger limits
        requests = [request("stub-score-0.3", f"item-{n}") for n in range(3)]
        if provider == "anthropic":
            with pytest.raises(ProviderError) as refused:
                await batches_client.submit(requests)
            assert refused.value.status == 400 and "at most 2" in refused.value.message
            return
        submitted = await batches_client.submit(requests)
        status = (await finish(batches_client, submitted))[submitted[0].batch_id]
        found = await results(batches_client, submitted)
    assert status.state == "failed" and "exceed 2" in (status.message or "")
    assert {r.failure.kind for r in found if r.failure} == {"failed"} and len(found) == 3


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_failed_and_expired_requests_come_back_with_the_providers_reason(
    make_client: MakeClient, provider: str
) -> None:
    with stub() as handle:
        _, batches_client = make_client(handle, provider)
        models = {
            "ok": "stub-score-0.3",
            "invalid": "stub-score-0.3+400",
            "unknown model": "stub-score-0.3+404",
            "bad key": "stub-score-0.3+401",
            "never ran": "stub-score-0.3+hang",
        }
        requests = [request(model, item) for item, model in models.items()]
        submitted = await batches_client.submit(requests)
        await finish(batches_client, submitted)
        found = by_item(await results(batches_client, submitted))

    assert found["ok"].response is not None
    failures = {item: r.failure for item, r in found.items() if r.failure is not None}
    assert {item: (f.kind, f.status) for item, f in failures.items()} == {
        "invalid": ("errored", 400),
        "unknown model": ("errored", 404),
        "bad key": ("errored", 401),
        "never ran": ("expired", None),
    }
    assert failures["invalid"].reason == "stub: batch request failed with HTTP 400"
    assert failures["never ran"].reason == "expired"
    # The stand-in quotes the key as some servers do; the reason never carries it.
    assert "Incorrect API key" in failures["bad key"].reason
    assert FAKE_KEY not in failures["bad key"].reason


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_that_expires_returns_what_it_did_and_expires_the_rest(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_polls_to_finish=5, batch_polls_to_expire=2) as handle:
        _, batches_client = make_client(handle, provider)
        submitted = await batches_client.submit(
            [request("stub-score-0.3", f"item-{n}") for n in range(8)]
        )
        await finish(batches_client, submitted)
        found = await results(batches_client, submitted)
        paid = stats_of(handle.server).get("batch_requests")

    kinds = [r.failure.kind if r.failure else "succeeded" for r in found]
    assert kinds.count("succeeded") == 2 == paid  # one of four steps done before expiry
    assert kinds.count("expired") == 6


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cancelled_batch_returns_its_requests_canceled_and_pays_nothing(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_never_finishes=True) as handle:
        _, batches_client = make_client(handle, provider)
        submitted = await batches_client.submit(
            [request("stub-score-0.3", f"item-{n}") for n in range(3)]
        )
        batch_id = submitted[0].batch_id
        assert (await batches_client.poll(batch_id)).state == "in_progress"
        assert (await batches_client.cancel(batch_id)).state == "canceling"
        final = (await finish(batches_client, submitted))[batch_id]
        found = await results(batches_client, submitted)
        counters = stats_of(handle.server).snapshot()

    assert final.state == "canceled"
    assert [(r.failure.kind, r.failure.reason) for r in found if r.failure] == [
        ("canceled", "canceled")
    ] * 3
    assert counters["cancels"] == 1 and counters["batch_requests"] == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_that_never_finishes_is_still_in_progress_after_n_polls(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_never_finishes=True) as handle:
        _, batches_client = make_client(handle, provider)
        submitted = await batches_client.submit([request("stub-score-0.3", "item")])
        batch_id = submitted[0].batch_id
        statuses = await wait_for(batches_client, [batch_id], backoff=NO_WAIT, max_polls=6)
        polls = stats_of(handle.server).get("polls")
        with pytest.raises(BatchNotEnded, match="in_progress"):
            await results(batches_client, submitted)

    assert statuses[batch_id].state == "in_progress" and not statuses[batch_id].ended
    assert polls == 6


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_without_batch_endpoints_gets_one_line_refusal(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_api=False) as handle:
        _, batches_client = make_client(handle, provider)
        with pytest.raises(BatchUnsupported) as refused:
            await batches_client.submit([request("stub-score-0.3", "item", "local judge")])
        counters = stats_of(handle.server).snapshot()

    message = str(refused.value)
    assert "\n" not in message
    assert "has no batch API (HTTP 404 on POST /" in message
    assert message.endswith(
        "use real-time calls: drop --batch, or set batch: false for judge 'local judge'"
    )
    assert refused.value.fatal
    assert counters["batches_created"] == 0 and counters["files_uploaded"] == 0


# --- nothing paid twice --------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_results_read_twice_and_after_a_restart_are_paid_once(
    make_client: MakeClient, provider: str
) -> None:
    model = "stub-random"
    with stub(batch_polls_to_finish=4) as handle:
        client, first = make_client(handle, provider)
        journal: list[str] = []
        requests = [request(model, f"item-{n}") for n in range(5)]
        await first.submit(requests, on_created=lambda batch: journal.append(batch.to_json()))
        await first.poll(SubmittedBatch.from_json(journal[0]).batch_id)  # in flight

        # The run is killed here; a new process reads its journal and carries on.
        await client.aclose()
        _, resumed = make_client(handle, provider)
        batches = [SubmittedBatch.from_json(text) for text in journal]
        await finish(resumed, batches)
        once = await results(resumed, batches)
        twice = await results(resumed, batches)
        await finish(resumed, batches)  # polled again after the end: nothing changes
        counters = stats_of(handle.server).snapshot()

    assert once == twice and len(once) == 5
    assert all(r.response is not None for r in once)
    assert counters["batches_created"] == 1
    assert counters["batch_requests"] == 5 == handle.stats.requests(model)
    assert counters["batch_requests_by_model"] == {model: 5}


def test_the_stats_endpoint_counts_batches_and_resets() -> None:
    async def run(handle: StubHandle) -> None:
        client = AnthropicClient(FAKE_KEY, base_url=handle.anthropic_base_url)
        try:
            batches_client = batch_client(client, JUDGE)
            submitted = await batches_client.submit([request("stub-score-0.3", "a")])
            await finish(batches_client, submitted)
        finally:
            await client.aclose()

    with stub(batch_polls_to_finish=1) as handle:
        asyncio.run(run(handle))
        stats = _get(handle.base_url + "/_stats")
        assert stats["batches"]["batches_created"] == 1
        assert stats["batches"]["batch_requests"] == 1 and stats["batches"]["polls"] == 1
        assert stats["by_path"] == {"batch /v1/messages": 1}
        _post(handle.base_url + "/_reset")
        assert _get(handle.base_url + "/_stats")["batches"]["batches_created"] == 0


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        data: dict[str, Any] = json.load(response)
        return data


def _post(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url, b"", method="POST"), timeout=10).close()


# --- waiting -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_waiting_sleeps_between_polls_and_can_be_cancelled(
    make_client: MakeClient, provider: str
) -> None:
    with stub(batch_never_finishes=True) as handle:
        _, batches_client = make_client(handle, provider)
        submitted = await batches_client.submit([request("stub-score-0.3", "item")])
        polled = asyncio.Event()
        hour = Backoff(3600, 2, 3600)
        waiting = asyncio.create_task(
            wait_for(batches_client, [submitted[0].batch_id], lambda _: polled.set(), hour)
        )
        await polled.wait()
        await asyncio.sleep(0)  # the waiter is now asleep for an hour
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert stats_of(handle.server).get("polls") == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_waiting_for_an_unknown_batch_raises(make_client: MakeClient, provider: str) -> None:
    with stub() as handle:
        _, batches_client = make_client(handle, provider)
        with pytest.raises(ProviderError) as unknown:
            await wait_for(batches_client, ["batch_nope"], backoff=NO_WAIT, max_polls=3)
    assert unknown.value.kind == "not_found"


# --- interface -----------------------------------------------------------------------------


def test_each_provider_client_gets_its_batch_client() -> None:
    openai_client = OpenAIClient(FAKE_KEY)
    anthropic_client = AnthropicClient(FAKE_KEY)
    assert isinstance(batch_client(openai_client, JUDGE), OpenAIBatchClient)
    assert isinstance(batch_client(anthropic_client, JUDGE), AnthropicBatchClient)
    small = BatchLimits(3, 1_000)
    assert batch_client(openai_client, JUDGE, small).limits == small
    assert isinstance(batch_client(anthropic_client, JUDGE), BatchClient)

    class Local:
        provider = "local"

    with pytest.raises(BatchUnsupported, match="set batch: false for judge"):
        batch_client(Local(), "offline")  # type: ignore[arg-type]


async def test_one_submission_may_not_ask_the_same_pair_twice(make_client: MakeClient) -> None:
    with stub() as handle:
        _, batches_client = make_client(handle, "anthropic")
        twice = [request("stub-score-0.3", "same"), request("stub-score-0.6", "same")]
        with pytest.raises(ValueError, match="asked twice"):
            await batches_client.submit(twice)


async def test_an_async_journal_is_awaited_before_the_next_batch(make_client: MakeClient) -> None:
    order: list[str] = []

    async def journal(batch: SubmittedBatch) -> None:
        await asyncio.sleep(0)
        order.append(batch.batch_id)

    with stub(batch_max_requests=1) as handle:
        _, batches_client = make_client(handle, "anthropic", BatchLimits(1, 10**9))
        submitted = await batches_client.submit(
            [request("stub-score-0.3", f"item-{n}") for n in range(3)], on_created=journal
        )
    assert order == [b.batch_id for b in submitted] and len(order) == 3


# --- results lines no answer needs (issue 44, point 7) ---------------------------------------

DEEP_LINE = b"[" * 5000 + b"]" * 5000
"""A results line nested 5,000 deep: json.loads stops in it with a RecursionError."""


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_results_line_nested_past_the_limits_comes_back_as_missing(
    make_client: MakeClient, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix the OpenAI line raised RecursionError out of `except ValueError`, and
    the Anthropic SDK's json.loads did the same: a traceback, and the run's other answers
    in the batch never read."""
    from juryflow.standin import batches as standin_batches
    from juryflow.standin.batch_state import store_of

    model = "stub-random"
    with stub(batch_polls_to_finish=1) as handle:
        _, client = make_client(handle, provider)
        requests = [request(model, f"item-{n}") for n in range(3)]
        submitted = await client.submit(requests)
        await finish(client, submitted)
        if provider == "openai":
            # the batch's output file as the server stored it, its first line replaced
            store = store_of(handle.server)
            (batch,) = (b for b in store.batches.values() if b.id == submitted[0].batch_id)
            output = store.files[str(batch.output_file_id)]
            output.data = DEEP_LINE + b"\n" + output.data.split(b"\n", 1)[1]
            read = {"item-1", "item-2"}
        else:
            # the stand-in's results stream, its second line replaced
            real_jsonl = standin_batches.jsonl

            def deep_second_line(lines: list[dict[str, Any]]) -> bytes:
                first, _, rest = real_jsonl(lines).split(b"\n", 2)
                return first + b"\n" + DEEP_LINE + b"\n" + rest

            monkeypatch.setattr(standin_batches, "jsonl", deep_second_line)
            read = {"item-0"}  # the SDK's reading ends at the line it cannot parse
        found = by_item(await results(client, submitted))

    assert set(found) == {"item-0", "item-1", "item-2"}
    assert {item for item, r in found.items() if r.response is not None} == read
    missing = {item for item, r in found.items() if r.failure is not None}
    assert missing == set(found) - read
    assert all(found[item].failure.kind == "missing" for item in missing)  # type: ignore[union-attr]
