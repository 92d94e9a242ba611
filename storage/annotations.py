"""Human adjudications of a run's items (the ``annotations`` table): write one, read them.

Interface shared by the viewer (which saves and shows them) and by ``--gold annotations``
and ``juryflow export-annotations`` (which read them as labels).
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import duckdb

from juryflow.maths import agreement
from juryflow.storage.connection import StoreError
from juryflow.storage.store import Store
from juryflow.storage.store.base import has_table

__all__ = [
    "GOLD_SOURCES",
    "REVIEWER_ENV",
    "Annotation",
    "GoldSource",
    "NewAnnotation",
    "SpanDecision",
    "annotated_item_ids",
    "annotation_count",
    "latest_annotation",
    "latest_annotations",
    "merge_spans",
    "next_in_queue",
    "resolve_reviewer",
    "save_annotation",
]


GoldSource = Literal["dataset", "annotations", "both"]
"""Where human labels come from: the dataset's own, reviewers' annotations, or both (an
item's latest annotation replaces its dataset label)."""
GOLD_SOURCES: tuple[GoldSource, ...] = ("dataset", "annotations", "both")

REVIEWER_ENV = "JURYFLOW_REVIEWER"
"""The reviewer's name when `juryflow view` is given no ``--reviewer``."""

MAX_NOTE = 10_000
"""Characters of a note kept; a longer one is refused (a pasted document, not a note)."""


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


def resolve_reviewer(explicit: str | None = None) -> str:
    """The reviewer's name: ``explicit`` (``--reviewer``), else ``$JURYFLOW_REVIEWER``, else
    the login name; raises StoreError when none is set."""
    for candidate in (explicit, os.environ.get(REVIEWER_ENV)):
        if candidate is not None and candidate.strip():
            return candidate.strip()
    try:
        login = getpass.getuser()
    except (KeyError, OSError):
        login = ""
    if login.strip():
        return login.strip()
    raise StoreError(f"no reviewer name: pass --reviewer NAME or set {REVIEWER_ENV}")


def merge_spans(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The characters ``spans`` cover, as sorted disjoint intervals (touching ones joined):
    :func:`juryflow.maths.agreement.merge_spans`, as tuples."""
    merged = agreement.merge_spans(list(spans)).tolist()
    return tuple((int(a), int(b)) for a, b in merged)


_TEXT_SQL = (
    "SELECT coalesce(variables->>'response', variables->>'output', '') "
    "FROM items WHERE run_id = ? AND item_id = ?"
)

_COLUMNS = (
    "annotation_id, run_id, item_id, reviewer, created_at, decisions, missed, spans, verdict, note"
)


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    return has_table(con, "annotations")


def _one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _check(annotation: NewAnnotation, text: str, consensus: set[tuple[int, int]]) -> None:
    """Refuse what cannot be a label of this item (StoreError, one line)."""
    where = f"item {_one_line(annotation.item_id)!r} of run {annotation.run_id}"
    if not annotation.reviewer.strip():
        raise StoreError(f"no reviewer name: pass --reviewer NAME or set {REVIEWER_ENV}")
    if annotation.verdict is not None and not isinstance(annotation.verdict, bool):
        raise StoreError(f"verdict {annotation.verdict!r}: use hallucinated, clean or unset")
    if len(annotation.note) > MAX_NOTE:
        raise StoreError(
            f"the note has {len(annotation.note)} characters; keep it under {MAX_NOTE}"
        )
    length = len(text)
    for start, end in annotation.missed:
        if not (0 <= start < end <= length):
            raise StoreError(
                f"missed span {start}-{end} is not within the judged text of {where} "
                f"({length} characters): mark a span with 0 <= start < end <= {length}"
            )
    decided: set[tuple[int, int]] = set()
    for decision in annotation.decisions:
        key = (decision.char_start, decision.char_end)
        if key not in consensus:
            raise StoreError(
                f"span {key[0]}-{key[1]} is not a consensus span of {where}: decide only on "
                "the consensus spans the item page shows"
            )
        if key in decided:
            raise StoreError(f"span {key[0]}-{key[1]} is decided twice: accept or reject it once")
        decided.add(key)


def save_annotation(store: Store, annotation: NewAnnotation) -> Annotation:
    """Store one annotation in one short transaction; never touches the dataset's labels.

    Raises :class:`juryflow.storage.connection.StoreError` (one line naming the fix) for an
    unknown run or item, or spans outside the item's judged text.
    """
    missed = tuple((int(a), int(b)) for a, b in annotation.missed)
    annotation = NewAnnotation(
        run_id=annotation.run_id,
        item_id=annotation.item_id,
        reviewer=annotation.reviewer.strip(),
        decisions=tuple(
            SpanDecision(int(d.char_start), int(d.char_end), bool(d.accepted))
            for d in annotation.decisions
        ),
        missed=missed,
        verdict=annotation.verdict,
        note=annotation.note,
    )
    created = datetime.now(UTC)
    try:
        try:
            return _save(store, annotation, created)
        except _Outdated:
            # a store written before migration 6: this write brings it up to date first
            store.migrate()
            return _save(store, annotation, created)
    except duckdb.Error as error:
        raise StoreError(
            f"cannot save the annotation in {store.path}: {_one_line(str(error))}"
        ) from None


class _Outdated(Exception):
    """The store predates the annotations table (rolled back, nothing written)."""


def _save(
    store: Store,
    annotation: NewAnnotation,
    created: datetime,
) -> Annotation:
    run_id, item_id = annotation.run_id, annotation.item_id

    def body(con: duckdb.DuckDBPyConnection) -> Annotation:
        if not _has_table(con):
            # checked, not left to fail: DuckDB would read a Python variable named
            # ``annotations`` in place of the missing table
            raise _Outdated
        if con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone() is None:
            raise StoreError(f"no run {run_id!r} in {store.path}: pick a run from `juryflow runs`")
        found = con.execute(_TEXT_SQL, [run_id, item_id]).fetchone()
        if found is None:
            raise StoreError(
                f"run {run_id} has no item {_one_line(item_id)!r}: annotate an item of the run"
            )
        consensus = {
            (int(a), int(b))
            for a, b in con.execute(
                "SELECT char_start, char_end FROM consensus_spans WHERE run_id = ? AND item_id = ?",
                [run_id, item_id],
            ).fetchall()
        }
        _check(annotation, str(found[0]), consensus)
        # the labelled characters: accepted consensus spans and missed ones, merged
        accepted = [(d.char_start, d.char_end) for d in annotation.decisions if d.accepted]
        spans = merge_spans([*accepted, *annotation.missed])
        # max + 1 inside the transaction: DuckDB lets one process write a file at a time,
        # and within a process writes are serialised, so two ids cannot collide. On a lake
        # two processes can; both UPDATE this row first, so one of them is run again.
        if store.lake is not None:
            con.execute("UPDATE store_meta SET value = value WHERE key = 'annotation_ids'")
        row = con.execute("SELECT coalesce(max(annotation_id), 0) + 1 FROM annotations").fetchone()
        annotation_id = int(row[0]) if row else 1
        con.execute(
            f"INSERT INTO annotations ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                annotation_id,
                run_id,
                item_id,
                annotation.reviewer,
                created,
                json.dumps(
                    [
                        {"char_start": d.char_start, "char_end": d.char_end, "accepted": d.accepted}
                        for d in annotation.decisions
                    ]
                ),
                json.dumps([list(m) for m in annotation.missed]),
                json.dumps([list(s) for s in spans]),
                annotation.verdict,
                annotation.note,
            ],
        )
        return Annotation(
            annotation_id=annotation_id,
            run_id=run_id,
            item_id=item_id,
            reviewer=annotation.reviewer,
            created_at=created,
            decisions=annotation.decisions,
            missed=annotation.missed,
            spans=spans,
            verdict=annotation.verdict,
            note=annotation.note,
        )

    return store.transact(body, "save the annotation")


def _pairs(raw: Any) -> tuple[tuple[int, int], ...]:
    values = json.loads(raw) if isinstance(raw, str) else raw
    return tuple((int(a), int(b)) for a, b in values or [])


def _from_row(row: Sequence[Any]) -> Annotation:
    annotation_id, run_id, item_id, reviewer, created, decisions, missed, spans, verdict, note = row
    raw = json.loads(decisions) if isinstance(decisions, str) else decisions
    return Annotation(
        annotation_id=int(annotation_id),
        run_id=str(run_id),
        item_id=str(item_id),
        reviewer=str(reviewer),
        created_at=created,
        decisions=tuple(
            SpanDecision(int(d["char_start"]), int(d["char_end"]), bool(d["accepted"]))
            for d in raw or []
        ),
        missed=_pairs(missed),
        spans=_pairs(spans),
        verdict=None if verdict is None else bool(verdict),
        note=str(note or ""),
    )


def latest_annotation(store: Store, run_id: str, item_id: str) -> Annotation | None:
    """The item's most recent annotation (any reviewer), or None."""
    with store.read() as con:
        if not _has_table(con):
            return None
        row = con.execute(
            f"SELECT {_COLUMNS} FROM annotations WHERE run_id = ? AND item_id = ? "
            "ORDER BY annotation_id DESC LIMIT 1",
            [run_id, item_id],
        ).fetchone()
    return _from_row(row) if row else None


def latest_annotations(store: Store, run_id: str) -> list[Annotation]:
    """Each annotated item's most recent annotation, in the run's item order."""
    with store.read() as con:
        if not _has_table(con):
            return []
        rows = con.execute(
            f"SELECT {', '.join('a.' + c.strip() for c in _COLUMNS.split(','))} "
            "FROM annotations a JOIN items i USING (run_id, item_id) WHERE a.run_id = ? "
            "QUALIFY row_number() OVER (PARTITION BY a.item_id ORDER BY a.annotation_id DESC) = 1 "
            "ORDER BY i.row_number, a.item_id",
            [run_id],
        ).fetchall()
    return [_from_row(r) for r in rows]


def annotation_count(store: Store, run_id: str) -> int:
    """How many of the run's items have an annotation."""
    with store.read() as con:
        if not _has_table(con):
            return 0
        row = con.execute(
            "SELECT count(DISTINCT item_id) FROM annotations WHERE run_id = ?", [run_id]
        ).fetchone()
    return int(row[0]) if row else 0


def annotated_item_ids(store: Store, run_id: str) -> set[str]:
    """The run's items that have an annotation."""
    with store.read() as con:
        if not _has_table(con):
            return set()
        rows = con.execute(
            "SELECT DISTINCT item_id FROM annotations WHERE run_id = ?", [run_id]
        ).fetchall()
    return {str(r[0]) for r in rows}


def next_in_queue(store: Store, run_id: str, after: str | None = None) -> str | None:
    """The most disputed item of the run with no annotation yet (``item_disagreement``
    order, ties by item_id), skipping ``after``; None when every item is reviewed."""
    with store.read() as con:
        reviewed = (
            "AND NOT EXISTS (SELECT 1 FROM annotations a "
            "WHERE a.run_id = d.run_id AND a.item_id = d.item_id) "
            if _has_table(con)
            else ""
        )
        row = con.execute(
            "SELECT d.item_id FROM item_disagreement d WHERE d.run_id = ? "
            f"{reviewed}AND (? IS NULL OR d.item_id <> ?) "
            "ORDER BY d.disagreement_rank, d.item_id LIMIT 1",
            [run_id, after, after],
        ).fetchone()
    return str(row[0]) if row else None
