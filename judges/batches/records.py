"""What goes into a batch and what comes out of it: plain records, no I/O."""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from typing import Any, Literal

from juryflow.judges.batches.custom_ids import custom_id
from juryflow.judges.providers.base import ModelRequest, ModelResponse

BatchState = Literal[
    "validating",
    "in_progress",
    "finalizing",
    "canceling",
    "completed",
    "canceled",
    "expired",
    "failed",
]
ENDED_STATES: frozenset[str] = frozenset({"completed", "canceled", "expired", "failed"})

FailureKind = Literal["errored", "expired", "canceled", "failed", "missing"]
"""errored: the provider answered the request with an error; expired: the batch's window
closed before it ran; canceled: the batch was cancelled before it ran; failed: the whole
batch failed validation; missing: the batch ended without a line for it."""


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """How much one batch may hold. The providers' figures are the defaults; tests pass small
    ones to see batches split."""

    max_requests: int
    max_bytes: int
    """Of the OpenAI input file, or of the Anthropic create request's body."""

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.max_bytes < 1:
            raise ValueError("batch limits must be at least 1 request and 1 byte")


OPENAI_LIMITS = BatchLimits(max_requests=50_000, max_bytes=200_000_000)
"""OpenAI Batch API: 50,000 requests and 200 MB per input file."""
ANTHROPIC_LIMITS = BatchLimits(max_requests=100_000, max_bytes=256_000_000)
"""Anthropic Message Batches: 100,000 requests or 256 MB per batch, whichever comes first."""


RequestKey = tuple[str, int]
"""(item id, sample index) of one judge's request: sample 0 for a judge asked once; a
sampled judge's (``samples: N``, a pairwise judge's two orders) 0..N-1."""


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One judge's call for one item (one sample of it), to be sent inside a batch."""

    item_id: str
    judge_id: str
    request: ModelRequest
    sample: int = 0

    @property
    def custom_id(self) -> str:
        return custom_id(self.item_id, self.judge_id, self.sample)

    def entry(self) -> BatchEntry:
        return BatchEntry(
            self.custom_id, self.item_id, self.judge_id, self.request.structured, self.sample
        )


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """A request as a submitted batch remembers it: enough to map its result back and parse
    it as the real-time call would (``structured`` changes how an OpenAI answer is read)."""

    custom_id: str
    item_id: str
    judge_id: str
    structured: bool
    sample: int = 0

    @property
    def key(self) -> RequestKey:
        return (self.item_id, self.sample)


@dataclass(frozen=True, slots=True)
class SubmittedBatch:
    """A batch the provider has accepted: what to journal, to poll it and read its results
    after a restart (:meth:`to_json` / :meth:`from_json`)."""

    provider: str
    batch_id: str
    entries: tuple[BatchEntry, ...]
    marker: str | None = None
    """The :class:`BatchIntent` it was created for (None: journaled by an older juryflow)."""

    @property
    def judge_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(entry.judge_id for entry in self.entries))

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "provider": self.provider,
            "batch_id": self.batch_id,
            "entries": _entries_data(self.entries),
        }
        if self.marker is not None:
            data["marker"] = self.marker
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SubmittedBatch:
        try:
            data: Any = json.loads(text)
            marker = data.get("marker")
            return cls(
                str(data["provider"]),
                str(data["batch_id"]),
                _entries_of(data["entries"]),
                str(marker) if marker is not None else None,
            )
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"not a journaled batch: {error}") from None


@dataclass(frozen=True, slots=True)
class BatchIntent:
    """A batch about to be created, journaled before the create request is sent.

    The request's effects at the provider may outlive the process (kill -9 after the
    provider created the batch, before its id came back), and a batch is paid for whether
    or not anyone reads it. So before creating anew, a resume (or a retry after a failed
    create) looks for the batch this intent made among the provider's: by ``marker`` where
    the API keeps one (OpenAI's ``metadata``), else by size and creation time (Anthropic's
    Message Batches keep nothing of the caller's), and adopts it.
    """

    provider: str
    marker: str
    """Unique to this create request: put in the request where the API keeps it."""
    at: float
    """Seconds since the epoch, just before the create request was sent."""
    entries: tuple[BatchEntry, ...]

    def created(self, batch_id: str) -> SubmittedBatch:
        """The batch the provider made of this intent."""
        return SubmittedBatch(self.provider, batch_id, self.entries, self.marker)

    def to_json(self) -> str:
        data = {
            "provider": self.provider,
            "marker": self.marker,
            "at": self.at,
            "entries": _entries_data(self.entries),
        }
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> BatchIntent:
        try:
            data: Any = json.loads(text)
            entries = _entries_of(data["entries"])
            return cls(str(data["provider"]), str(data["marker"]), float(data["at"]), entries)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"not a journaled batch intent: {error}") from None


def new_marker() -> str:
    """A marker no other create request of any run shares (128 random bits)."""
    return "jf_" + secrets.token_hex(16)


def _entries_data(entries: tuple[BatchEntry, ...]) -> list[list[Any]]:
    # A sample 0 is written as before samples went into batches: older journals read alike.
    return [list(asdict(entry).values())[: 5 if entry.sample else 4] for entry in entries]


def _entries_of(data: Any) -> tuple[BatchEntry, ...]:
    return tuple(
        BatchEntry(str(c), str(i), str(j), bool(s), int(rest[0]) if rest else 0)
        for c, i, j, s, *rest in data
    )


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """Where a batch stands: for progress, and to know when its results can be read."""

    batch_id: str
    state: BatchState
    provider_state: str
    """The provider's own word (``in_progress``, ``ended``, ``cancelling``, ...)."""
    succeeded: int
    failed: int
    """Errored, expired and canceled requests."""
    total: int
    message: str | None = None
    """Why a batch failed as a whole (OpenAI's validation errors)."""

    @property
    def ended(self) -> bool:
        """Whether the batch will not change any more: its results can be read."""
        return self.state in ENDED_STATES

    @property
    def done(self) -> int:
        return self.succeeded + self.failed


@dataclass(frozen=True, slots=True)
class BatchFailure:
    kind: FailureKind
    reason: str
    """The provider's error message, or ``expired`` / ``canceled`` / what went missing."""
    status: int | None = None
    """The HTTP status the provider gave the request, when it answered with an error."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One request's outcome: a response exactly as a real-time call returns it, or a
    failure. Exactly one of ``response`` and ``failure`` is set."""

    entry: BatchEntry
    response: ModelResponse | None = None
    failure: BatchFailure | None = None

    def __post_init__(self) -> None:
        if (self.response is None) == (self.failure is None):
            raise ValueError("a batch result is a response or a failure")

    @property
    def custom_id(self) -> str:
        return self.entry.custom_id

    @property
    def item_id(self) -> str:
        return self.entry.item_id

    @property
    def judge_id(self) -> str:
        return self.entry.judge_id

    @property
    def key(self) -> RequestKey:
        return self.entry.key
