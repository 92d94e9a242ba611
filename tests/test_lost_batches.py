"""Batches whose ids a run lost (issue 44, point 4), in process: the stand-in's batch
listings through both official SDKs over real HTTP, each provider's ``find``, a create that
timed out although the provider made the batch, and the journal's open intents.

The end-to-end kill -9 at each step of creating a batch is in tests/test_paid_once.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from juryflow.flows.lost_batches import LostBatches
from juryflow.judges.batches.base import BatchClient
from juryflow.judges.batches.factory import batch_client
from juryflow.judges.batches.records import BatchIntent, BatchRequest, SubmittedBatch
from juryflow.judges.batches.waiting import Backoff, wait_for
from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.maths.records import unscored
from juryflow.standin.batch_state import store_of
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.journal import Journal
from tests.test_batch_clients import FAKE_KEY, PROVIDERS, request

ModelClient = OpenAIClient | AnthropicClient
MakeClient = Callable[..., BatchClient]


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    opened: list[ModelClient] = []

    def make(handle: StubHandle, provider: str, timeout: float = 10) -> BatchClient:
        client: ModelClient
        if provider == "openai":
            client = OpenAIClient(FAKE_KEY, base_url=handle.openai_base_url, timeout=timeout)
        else:
            client = AnthropicClient(FAKE_KEY, base_url=handle.anthropic_base_url, timeout=timeout)
        opened.append(client)
        return batch_client(client, "judge")

    yield make
    for client in opened:
        await client.aclose()


def requests(n: int, judge: str = "judge") -> list[BatchRequest]:
    return [request("stub-score-0.3", f"item-{i}", judge) for i in range(n)]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_stand_in_lists_batches_newest_first_page_by_page(
    make_client: MakeClient, provider: str
) -> None:
    with running_stub_server(StubConfig()) as handle:
        client = make_client(handle, provider)
        made: list[SubmittedBatch] = []
        for n in range(5):
            made += await client.submit(requests(n + 1))
        assert client.marks_batches == (provider == "openai")
        sdk = client.client._sdk()  # type: ignore[attr-defined]
        pages = sdk.batches if provider == "openai" else sdk.messages.batches
        listed = [batch async for batch in pages.list(limit=2)]  # the SDK turns the pages
        stats = store_of(handle.server).stats
        assert stats.get("lists") == 3 and stats.get("polls") == 0
    assert [batch.id for batch in listed] == [batch.batch_id for batch in reversed(made)]
    if provider == "openai":  # the intent's marker travels in the batch's metadata
        assert [b.metadata for b in listed] == [
            {"juryflow_intent": batch.marker} for batch in reversed(made)
        ]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_find_takes_an_intents_batch_and_no_other(
    make_client: MakeClient, provider: str
) -> None:
    with running_stub_server(StubConfig()) as handle:
        client = make_client(handle, provider)
        known = await client.submit(requests(3))  # made before: the journal knows it
        ours = await client.submit(requests(3))
        theirs = await client.submit(requests(3))  # the same size, made after ours
        intent = BatchIntent(provider, ours[0].marker or "", time.time(), ours[0].entries)
        found = await client.find([intent], {known[0].batch_id})
        # an intent of a batch never made: no batch the run knows is taken for it
        never = BatchIntent(provider, "jf_never_sent", time.time(), ours[0].entries)
        every = {batch[0].batch_id for batch in (known, ours, theirs)}
        nothing = await client.find([never], every)
        # long before: no batch of now is taken for it
        old = BatchIntent(provider, "jf_old", time.time() - 86_400, ours[0].entries)
        too_old = await client.find([old], set())
    # OpenAI by its marker; Anthropic by size and time, the earliest batch not known
    assert found == {intent.marker: ours[0].batch_id}
    assert nothing == {} and too_old == {}


async def test_an_ended_anthropic_batch_is_taken_only_if_it_answers_the_intents_requests(
    make_client: MakeClient,
) -> None:
    with running_stub_server(StubConfig(batch_polls_to_finish=1)) as handle:
        client = make_client(handle, "anthropic")
        other = await client.submit(requests(2, judge="another judge"))
        await wait_for(client, [other[0].batch_id], backoff=Backoff(0, 1, 0))
        ours = await client.submit(requests(2))
        await wait_for(client, [ours[0].batch_id], backoff=Backoff(0, 1, 0))
        intent = BatchIntent("anthropic", "jf_x", time.time(), ours[0].entries)
        found = await client.find([intent], set())
    assert found == {"jf_x": ours[0].batch_id}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_create_that_timed_out_after_the_provider_made_the_batch_is_adopted(
    make_client: MakeClient, provider: str, tmp_path: Path
) -> None:
    """The create's answer never comes (held by the stand-in): the client times out and
    tries again; before sending, it finds the batch the provider made, and adopts it."""
    journal = Journal(tmp_path / "run.jsonl")
    with running_stub_server(StubConfig()) as handle:
        store_of(handle.server).hold = {f"{provider}:created"}
        client = make_client(handle, provider, timeout=1)
        created: list[SubmittedBatch] = []

        def on_created(batch: SubmittedBatch) -> None:  # as the run does
            journal.append_batch(batch)
            created.append(batch)

        await LostBatches(journal).submit(client, requests(4), on_created, attempts=3)
        stats = store_of(handle.server).stats
        assert stats.get("batches_created") == 1
        assert stats.get(f"held:{provider}:created") == 1
    assert len(created) == 1 and len(created[0].entries) == 4
    sends = journal.open_sends()
    # the intent, then the batch adopted for it: nothing left open
    assert [b.batch_id for b in sends.batches] == [created[0].batch_id]
    assert sends.intents == [] and sends.batch_ids == {created[0].batch_id}


def test_the_journal_keeps_an_intent_open_until_a_batch_or_answers_settle_its_requests(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "run.jsonl")
    entries = tuple(r.entry() for r in requests(3))
    first = BatchIntent("openai", "jf_1", 1.0, entries)
    journal.append_intent(first)  # killed as its batch was made: open
    settled = BatchIntent("openai", "jf_2", 2.0, entries[:1])
    journal.append_intent(settled)
    journal.append_batch(settled.created("batch_2"))  # made and journaled
    journal.append(unscored("item-1", "judge", "score", "answered later"))
    sends = journal.open_sends()
    assert sends.batch_ids == {"batch_2"}
    # item-0 went into batch_2 since, item-1 is answered: first keeps item-2 open, whole
    assert sends.intents == [(first, entries[2:])]
    assert [(b.batch_id, b.entries) for b in sends.batches] == [("batch_2", entries[:1])]
    assert journal.open_sends(keep=lambda item, judge: item != "item-2").intents == []


def test_a_sampled_judges_judgment_settles_every_sample_its_batches_held(tmp_path: Path) -> None:
    """A sampled judge journals only its reduction: that line settles all its samples (a
    run stopped before the last sample was read leaves them all open, to be read again)."""
    journal = Journal(tmp_path / "run.jsonl")
    entries = tuple(
        BatchRequest(item, "judge", request("m", item, "judge").request, sample).entry()
        for item in ("item-0", "item-1")
        for sample in (0, 1)
    )
    journal.append_batch(SubmittedBatch("openai", "batch_1", entries[:3]))
    journal.append_batch(SubmittedBatch("openai", "batch_2", entries[3:]))
    journal.append(unscored("item-0", "judge", "score", "both samples read"))
    sends = journal.open_sends()
    assert [(b.batch_id, b.entries) for b in sends.batches] == [
        ("batch_1", entries[2:3]),
        ("batch_2", entries[3:]),
    ]
    assert len({entry.custom_id for entry in entries}) == 4
