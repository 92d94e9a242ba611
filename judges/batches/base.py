"""The batch client interface, its errors, and the submission every provider shares."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from juryflow.judges.batches.records import (
    BatchLimits,
    BatchRequest,
    BatchResult,
    BatchStatus,
    SubmittedBatch,
)
from juryflow.judges.batches.splitting import split
from juryflow.judges.providers.base import ProviderError

OnCreated = Callable[[SubmittedBatch], Awaitable[None] | None]
"""Told of each batch the moment the provider has accepted it, before the next is sent and
before any poll: the place to journal it, so a killed run polls it instead of paying again."""


@runtime_checkable
class BatchClient(Protocol):
    provider: str
    limits: BatchLimits

    async def submit(
        self, requests: Sequence[BatchRequest], *, on_created: OnCreated | None = None
    ) -> list[SubmittedBatch]:
        """Send ``requests`` as as many batches as the limits need, in order.

        If sending one fails, the error is raised; the batches created before it were
        already reported to ``on_created``. If ``on_created`` raises, submission stops
        there and its error is raised: the batch it was told of exists at the provider.
        """
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
    create: Callable[[range], Awaitable[str]],
    on_created: OnCreated | None,
    overhead: int = 0,
) -> list[SubmittedBatch]:
    """Create one batch per range :func:`split` cuts, reporting each as soon as it exists.

    ``create`` sends the requests of a range and returns the provider's batch id.
    """
    for request, size in zip(requests, sizes, strict=True):
        if overhead + size > limits.max_bytes:
            raise BatchTooLarge(request, size, limits)
    submitted: list[SubmittedBatch] = []
    for chunk in split(sizes, limits, overhead):
        batch_id = await create(chunk)
        batch = SubmittedBatch(provider, batch_id, tuple(requests[i].entry() for i in chunk))
        if on_created is not None:
            outcome = on_created(batch)
            if inspect.isawaitable(outcome):
                await outcome
        submitted.append(batch)
    return submitted
