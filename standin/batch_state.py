"""The stand-in's batch state: stored files, batches, what each request came to, counters.

One :class:`BatchStore` per server, kept beside it (:func:`store_of`); the server's event
loop thread is the only one that changes it, the counters are read from any thread.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from juryflow.standin.model import ServerState

Api = Literal["openai", "anthropic"]
OutcomeKind = Literal["succeeded", "errored", "expired", "canceled"]

OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200 * 1000 * 1000
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256 * 1000 * 1000


HELD = "held:"
"""The counter of requests held at a step is ``held:<step>`` (see :attr:`BatchStore.hold`)."""
HOLD_STEPS = (
    "openai:upload",
    "openai:uploaded",
    "openai:create",
    "openai:created",
    "openai:poll",
    "anthropic:create",
    "anthropic:created",
    "anthropic:poll",
)
"""Where a batch request can be held: ``upload`` / ``create`` / ``poll`` as it arrives (the
file not stored, the batch not created, the poll not counted), ``uploaded`` / ``created``
once done, its answer not sent."""


class BatchStats:
    """Batch counters, updated by the server thread and read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.counts: Counter[str] = Counter()
            self.by_model: Counter[str] = Counter()

    def count(self, name: str, model: str | None = None) -> None:
        with self._lock:
            self.counts[name] += 1
            if model is not None:
                self.by_model[model] += 1

    def get(self, name: str) -> int:
        with self._lock:
            return self.counts[name]

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            names = (
                "files_uploaded",
                "batches_created",
                "batch_requests",
                "polls",
                "results_fetched",
                "cancels",
                "lists",
            )
            counts = self.counts.items()
            held = {name.removeprefix(HELD): n for name, n in counts if name.startswith(HELD)}
            return {
                **{name: self.counts[name] for name in names},
                "batch_requests_by_model": dict(self.by_model),
                "held": held,
            }


@dataclass
class StoredFile:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass(frozen=True)
class Entry:
    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    """The message or completion when succeeded; the API's error body when errored."""


@dataclass
class Batch:
    api: Api
    id: str
    entries: list[Entry]
    created_at: float
    started: float
    key: str
    """The key the batch was created with: a ``401`` fault quotes it, as real-time does."""
    version: str = ""
    input_file_id: str = ""
    metadata: dict[str, str] | None = None
    """What the OpenAI create request's ``metadata`` set (returned, and listed, as given)."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """Validation errors of an OpenAI input file: the batch fails at its first poll."""
    polls: int = 0
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    state: Literal["running", "canceling", "completed", "canceled", "expired", "failed"] = "running"
    cancel_at: float | None = None
    ended_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in ("completed", "canceled", "expired", "failed")


class BatchStore:
    """One server's files, batches and counters."""

    def __init__(self) -> None:
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}
        self.stats = BatchStats()
        self._ids = itertools.count(1)
        self.hold: set[str] = set()
        """Steps of :data:`HOLD_STEPS` at which a request is held unanswered until its
        connection closes, then dropped: a client killed there (tests of kill -9 while a
        batch is created). Counted in the stats as ``held:<step>``."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"


_STORES: weakref.WeakKeyDictionary[ServerState, BatchStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def store_of(server: ServerState) -> BatchStore:
    # Kept beside the server rather than in it, so the server needs only its routes.
    with _STORES_LOCK:
        store = _STORES.get(server)
        if store is None:
            store = _STORES[server] = BatchStore()
        return store


def stats_of(server: ServerState) -> BatchStats:
    """The batch counters of ``server`` (also in ``GET /_stats`` under ``batches``)."""
    return store_of(server).stats
