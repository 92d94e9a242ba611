"""Human adjudications of a run's items (the ``annotations`` table): write one, read them.

Interface shared by the viewer (which saves and shows them) and by ``--gold annotations``
and ``juryflow export-annotations`` (which read them as labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from juryflow.storage.store import Store

__all__ = [
    "GOLD_SOURCES",
    "Annotation",
    "GoldSource",
    "NewAnnotation",
    "SpanDecision",
    "latest_annotation",
    "next_in_queue",
    "save_annotation",
]


GoldSource = Literal["dataset", "annotations", "both"]
"""Where human labels come from: the dataset's own, reviewers' annotations, or both (an
item's latest annotation replaces its dataset label)."""
GOLD_SOURCES: tuple[GoldSource, ...] = ("dataset", "annotations", "both")


@dataclass(frozen=True, slots=True)
class SpanDecision:
    """A reviewer's decision on one consensus span: accepted as a real error, or rejected."""

    char_start: int
    char_end: int
    accepted: bool


@dataclass(frozen=True, slots=True)
class NewAnnotation:
    """What a reviewer submits for one item.

    ``missed`` are spans the reviewer marked that the consensus did not flag; ``verdict`` is
    True for hallucinated, False for clean, None when the reviewer left it unset. The labelled
    spans of the annotation are the accepted consensus spans plus ``missed``.
    """

    run_id: str
    item_id: str
    reviewer: str
    decisions: tuple[SpanDecision, ...]
    missed: tuple[tuple[int, int], ...]
    verdict: bool | None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Annotation:
    annotation_id: int
    run_id: str
    item_id: str
    reviewer: str
    created_at: datetime
    decisions: tuple[SpanDecision, ...]
    missed: tuple[tuple[int, int], ...]
    spans: tuple[tuple[int, int], ...]
    verdict: bool | None
    note: str


def save_annotation(store: Store, annotation: NewAnnotation) -> Annotation:
    """Store one annotation in one short transaction; never touches the dataset's labels.

    Raises :class:`juryflow.storage.connection.StoreError` (one line naming the fix) for an
    unknown run or item, or spans outside the item's judged text.
    """
    raise NotImplementedError


def latest_annotation(store: Store, run_id: str, item_id: str) -> Annotation | None:
    """The item's most recent annotation (any reviewer), or None."""
    raise NotImplementedError


def next_in_queue(store: Store, run_id: str, after: str | None = None) -> str | None:
    """The most disputed item of the run with no annotation yet (``item_disagreement``
    order, ties by item_id), skipping ``after``; None when every item is reviewed."""
    raise NotImplementedError
