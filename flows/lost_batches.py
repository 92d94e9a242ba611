"""Batches a run may have made at the provider without learning their ids (issue 44).

A create request's effects can outlive the process that sent it: killed with SIGKILL after
the provider made the batch but before its id reached the journal, or a create that timed
out although the provider went on with it. Such a batch is paid for whether or not anyone
reads it, so sending its requests again would pay for them twice. Each batch's intent is
therefore journaled before its create request (``Journal.append_intent``), and before its
requests are sent again the intent's batch is looked for at the provider
(``BatchClient.find``) and adopted: journaled, polled and read as any journaled batch.

A provider that keeps a marker in its batches (OpenAI's ``metadata``) is asked exactly;
one that keeps nothing of the caller's (Anthropic) is matched by size and creation time, so
a run creates those batches one at a time: at most one of its intents is open at a kill.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from prefect import get_run_logger

from juryflow.judges.batches.base import BatchClient, BatchUnsupported, OnCreated
from juryflow.judges.batches.records import (
    BatchIntent,
    BatchRequest,
    RequestKey,
    SubmittedBatch,
)
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import ProviderError
from juryflow.judges.retry import RetriesExhausted, call_with_retries
from juryflow.storage.journal import Journal, OpenSends

Request = tuple[str, str, int]
"""(item id, judge id, sample index)"""


class CannotLook(Exception):
    """The provider could not be asked whether an intent's batch exists: sending its
    requests again might pay for them twice, so the run stops (resumable) instead."""


class LostBatches:
    """The run's open intents and the batches it knows, in the flow's process."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.intents: dict[Request, BatchIntent] = {}
        """Requests of journaled intents no batch line settled: looked for before they are
        sent again."""
        self.known: set[str] = set()
        """Every batch the journal names: none is taken for an intent's batch."""
        self._creating: dict[str, asyncio.Lock] = {}

    def load(self, sends: OpenSends) -> None:
        """What a resumed run's journal left open."""
        self.known |= sends.batch_ids
        for intent, entries in sends.intents:
            for entry in entries:
                self.intents[(entry.item_id, entry.judge_id, entry.sample)] = intent

    async def adopt(
        self, client: BatchClient, spec: JudgeSpec, keys: Iterable[RequestKey]
    ) -> dict[Request, SubmittedBatch]:
        """The batches of the open intents holding ``spec``'s requests ``keys``, found at
        the provider and journaled: each open request of theirs, with its batch. Intents
        not found were never made: their requests are sent anew. Raises
        :class:`CannotLook` when the provider cannot be asked."""
        intents: dict[str, BatchIntent] = {}
        for item_id, sample in keys:
            intent = self.intents.get((item_id, spec.id, sample))
            if intent is not None:
                intents[intent.marker] = intent
        if not intents:
            return {}
        found = await self._find(client, spec, list(intents.values()))
        adopted: dict[Request, SubmittedBatch] = {}
        for marker, intent in intents.items():
            batch = intent.created(found[marker]) if marker in found else None
            if batch is not None:
                self.journal.append_batch(batch)
                self.known.add(batch.batch_id)
                get_run_logger().info(
                    "judge %s: batch %s, created as the run was stopped, found at the "
                    "provider; its requests are read from it, not sent again",
                    spec.id,
                    batch.batch_id,
                )
            for entry in intent.entries:
                request = (entry.item_id, entry.judge_id, entry.sample)
                if self.intents.get(request) is intent:
                    del self.intents[request]
                    if batch is not None:
                        adopted[request] = batch
        return adopted

    async def _find(
        self, client: BatchClient, spec: JudgeSpec, intents: list[BatchIntent]
    ) -> dict[str, str]:
        async def find() -> dict[str, str]:
            return await self._look(client, intents)

        try:
            found, _ = await call_with_retries(find, lambda e: e.retryable, spec.max_attempts)
        except (RetriesExhausted, ProviderError) as error:
            last = error.last_error if isinstance(error, RetriesExhausted) else error
            raise CannotLook(
                f"judge {spec.id!r}: could not look at the provider for the batch a stopped "
                f"run may have left there ({last}); --resume looks again, and sends nothing "
                "twice"
            ) from None
        return found

    async def _look(self, client: BatchClient, intents: list[BatchIntent]) -> dict[str, str]:
        """``client.find``; a server that lists no batches cannot say whether it made one,
        and the intents' requests are sent anew (with a warning)."""
        try:
            return await client.find(intents, self.known)
        except BatchUnsupported as error:
            get_run_logger().warning(
                "judge %s: cannot look for the batch a stopped create may have left at the "
                "provider (%s); its requests are sent again",
                intents[0].entries[0].judge_id,  # a batch holds one judge's requests
                error.message,
            )
            return {}

    async def submit(
        self,
        client: BatchClient,
        requests: list[BatchRequest],
        on_created: OnCreated,
        attempts: int,
    ) -> None:
        """``client.submit`` with the judge's retries, each batch's intent journaled before
        its create request. Before a retry, the batches a failed create made all the same
        (one that timed out, say) are found and adopted: a retry sends only the requests no
        batch holds. Errors as :func:`call_with_retries` raises them."""
        created: list[SubmittedBatch] = []
        intents: list[BatchIntent] = []

        def creating(intent: BatchIntent) -> None:
            self.journal.append_intent(intent)
            intents.append(intent)

        def made(batch: SubmittedBatch) -> None:
            on_created(batch)
            self.known.add(batch.batch_id)
            created.append(batch)

        async def send() -> None:
            settled = {batch.marker for batch in created}
            lost = [intent for intent in intents if intent.marker not in settled]
            if lost:
                found = await self._look(client, lost)
                intents[:] = [i for i in intents if i.marker in settled or i.marker in found]
                for intent in lost:
                    if intent.marker in found:
                        made(intent.created(found[intent.marker]))
            sent = {entry.custom_id for batch in created for entry in batch.entries}
            left = [r for r in requests if r.custom_id not in sent]
            if left:
                await client.submit(left, on_created=made, on_creating=creating)

        async with self._one_at_a_time(client):
            await call_with_retries(send, lambda e: e.retryable, attempts)

    def _one_at_a_time(self, client: BatchClient) -> contextlib.AbstractAsyncContextManager[object]:
        """Nothing for a client whose batches keep their marker; else one create at a time
        per provider, so that at most one intent of the run is open at a kill."""
        if client.marks_batches:
            return contextlib.nullcontext()
        return self._creating.setdefault(client.provider, asyncio.Lock())
