"""The batch client interface, its errors, and the submission every provider shares."""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from juryflow.judges.batches.records import (
    BatchEntry,
    BatchFailure,
    BatchIntent,
    BatchLimits,
    BatchRequest,
    BatchResult,
    BatchStatus,
    SubmittedBatch,
    new_marker,
)
from juryflow.judges.batches.splitting import split
from juryflow.judges.providers.base import ProviderError

LineT = TypeVar("LineT")

OnCreated = Callable[[SubmittedBatch], Awaitable[None] | None]
"""Told of each batch the moment the provider has accepted it, before the next is sent and
before any poll: the place to journal it, so a killed run polls it instead of paying again."""
OnCreating = Callable[[BatchIntent], Awaitable[None] | None]
"""Told of each batch just before its create request is sent: the place to journal the
intent, so a run killed before the batch's id came back finds the batch (:meth:`find`)."""

FOUND_EARLIER_SECONDS = 300.0
"""How much earlier than the intent's time (our clock) a batch it made may say it was
created (the provider's clock): clocks apart by up to this much still match."""
FOUND_LATER_SECONDS = 900.0
"""... and how much later: the create request's longest wait (600 s), and clocks apart."""


@runtime_checkable
class BatchClient(Protocol):
    provider: str
    limits: BatchLimits
    marks_batches: bool
    """Whether a batch keeps its intent's marker (found exactly by :meth:`find`); without
    it batches are told apart by size and time, so a run creates them one at a time."""

    async def submit(
        self,
        requests: Sequence[BatchRequest],
        *,
        on_created: OnCreated | None = None,
        on_creating: OnCreating | None = None,
    ) -> list[SubmittedBatch]:
        """Send ``requests`` as as many batches as the limits need, in order.

        Each batch's intent goes to ``on_creating`` before its create request (if that
        raises, nothing more is sent). If sending one fails, the error is raised; the
        batches created before it were already reported to ``on_created``. If
        ``on_created`` raises, submission stops there and its error is raised: the batch
        it was told of exists at the provider.
        """
        ...

    async def find(self, intents: Sequence[BatchIntent], known: Collection[str]) -> dict[str, str]:
        """The batches the provider made of ``intents`` (their create requests sent, their
        answers lost): marker -> batch id, for those found. ``known``: batch ids already
        accounted for, never taken for an intent's."""
        ...

    async def poll(self, batch_id: str) -> BatchStatus: ...

    def results(self, batch: SubmittedBatch) -> AsyncIterator[BatchResult]:
        """One result per entry of an ended batch (raises :class:`BatchNotEnded` before).

        May be read again: nothing is sent to a model twice."""
        ...

    async def cancel(self, batch_id: str) -> BatchStatus:
        """Ask the provider to stop: requests not yet run come back ``canceled``."""
        ...


class BatchUnsupported(ProviderError):
    """The server has no batch API (vLLM, Ollama and most compatible servers)."""

    def __init__(self, judge_ids: Sequence[str], where: str, detail: str) -> None:
        judges = ", ".join(repr(judge) for judge in judge_ids) or "this judge"
        super().__init__(
            f"{where} has no batch API ({detail}): use real-time calls: "
            f"drop --batch, or set batch: false for judge {judges}",
            retryable=False,
            kind="not_found",
        )


class BatchNotEnded(ProviderError):
    """Results were asked of a batch still running: poll until it has ended."""

    def __init__(self, status: BatchStatus) -> None:
        super().__init__(
            f"batch {status.batch_id} is {status.provider_state}: its results come once it ends",
            retryable=True,
            kind="client",
        )
        self.batch_status = status


class BatchTooLarge(ProviderError):
    """One request is over the provider's batch size on its own."""

    def __init__(self, request: BatchRequest, size: int, limits: BatchLimits) -> None:
        super().__init__(
            f"judge {request.judge_id!r}, item {request.item_id!r}: the request is {size:,} "
            f"bytes, over the {limits.max_bytes:,} bytes a batch may hold: judge it in real time",
            retryable=False,
            kind="client",
        )


def check_unique(requests: Sequence[BatchRequest]) -> None:
    seen: set[str] = set()
    for request in requests:
        if request.custom_id in seen:
            raise ValueError(
                f"judge {request.judge_id!r}, item {request.item_id!r} is asked twice in one "
                "submission: a batch answers each (item, judge) once"
            )
        seen.add(request.custom_id)


async def submit_split(
    provider: str,
    requests: Sequence[BatchRequest],
    sizes: Sequence[int],
    limits: BatchLimits,
    create: Callable[[range, str], Awaitable[str]],
    on_created: OnCreated | None,
    overhead: int = 0,
    on_creating: OnCreating | None = None,
) -> list[SubmittedBatch]:
    """Create one batch per range :func:`split` cuts, its intent reported before its create
    request and the batch as soon as it exists.

    ``create`` sends the requests of a range with the intent's marker and returns the
    provider's batch id.
    """
    for request, size in zip(requests, sizes, strict=True):
        if overhead + size > limits.max_bytes:
            raise BatchTooLarge(request, size, limits)
    submitted: list[SubmittedBatch] = []
    for chunk in split(sizes, limits, overhead):
        entries = tuple(requests[i].entry() for i in chunk)
        intent = BatchIntent(provider, new_marker(), time.time(), entries)
        await _told(on_creating, intent)
        batch = intent.created(await create(chunk, intent.marker))
        await _told(on_created, batch)
        submitted.append(batch)
    return submitted


async def _told(hook: Callable[[Any], Awaitable[None] | None] | None, value: object) -> None:
    if hook is not None:
        outcome = hook(value)
        if inspect.isawaitable(outcome):
            await outcome


def in_window(intent: BatchIntent, created_at: float) -> bool:
    """Whether a batch created at ``created_at`` (seconds, the provider's clock) may be the
    one ``intent`` made."""
    return intent.at - FOUND_EARLIER_SECONDS <= created_at <= intent.at + FOUND_LATER_SECONDS


class _RealTimeClient(Protocol):
    """What a batch client uses of the real-time client beside its SDK."""

    _base_url: str | None

    def _translate(self, error: Any) -> ProviderError: ...


ClientT = TypeVar("ClientT", bound=_RealTimeClient)


class SdkBatchClient(Generic[ClientT]):
    """A :class:`BatchClient` on a real-time model client's endpoint, key and SDK client,
    sending the request bodies it sends in real time. What the providers share: the client,
    the limits, the duplicate check before a submission; a provider writes :meth:`_submit`
    (how it cuts and sends batches)."""

    provider: str
    marks_batches: bool
    api_name: ClassVar[str]
    """How a refusal names the provider's own API (no ``base_url``)."""
    default_limits: ClassVar[BatchLimits]

    def __init__(self, client: ClientT, limits: BatchLimits | None = None) -> None:
        self.client = client
        self.limits = limits if limits is not None else self.default_limits

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"

    async def submit(
        self,
        requests: Sequence[BatchRequest],
        *,
        on_created: OnCreated | None = None,
        on_creating: OnCreating | None = None,
    ) -> list[SubmittedBatch]:
        check_unique(requests)
        return await self._submit(requests, on_created, on_creating)

    async def _submit(
        self,
        requests: Sequence[BatchRequest],
        on_created: OnCreated | None,
        on_creating: OnCreating | None,
    ) -> list[SubmittedBatch]:
        raise NotImplementedError

    def _creation_error(
        self, error: Exception, route: str, judge_ids: Sequence[str]
    ) -> ProviderError:
        """Sending a batch failed: a server without a batch API (404 or 405 on the route)
        is refused naming the fix; any other error is translated as in real time."""
        status = getattr(error, "status_code", None)  # the SDKs' APIStatusError
        if status in (404, 405):
            where = self.client._base_url or self.api_name
            detail = f"HTTP {status} on {route}"
            return BatchUnsupported(list(dict.fromkeys(judge_ids)), where, detail)
        return self.client._translate(error)


async def answer_each(
    batch: SubmittedBatch,
    lines: AsyncIterator[LineT],
    custom_id: Callable[[LineT], str],
    answer: Callable[[BatchEntry, LineT], BatchResult],
    unanswered: Callable[[], BatchFailure],
) -> AsyncIterator[BatchResult]:
    """One result per entry of ``batch``: ``answer`` for the first line of each entry,
    ``unanswered()`` for an entry no line answers."""
    entries = {entry.custom_id: entry for entry in batch.entries}
    seen: set[str] = set()
    async for line in lines:
        entry = entries.get(custom_id(line))
        # A line of another submission (a journal that lost entries) or repeated: nothing
        # of ours to answer with it.
        if entry is None or entry.custom_id in seen:
            continue
        seen.add(entry.custom_id)
        yield answer(entry, line)
    for entry in batch.entries:
        if entry.custom_id not in seen:
            yield BatchResult(entry, failure=unanswered())
