"""`juryflow export-annotations RUN -o labels.jsonl`: a run's adjudicated items as a dataset.

Each annotated item becomes one JSONL row in the format ``juryflow run`` reads gold labels
from (:mod:`juryflow.storage.datasets`): its id (``id``), the columns kept with it (its
variables, under the names the run read them by, and the other scalar columns of its row),
and the item's newest annotation as labels, RAGTruth style: ``labels`` a list of
``{start, end, text}`` into the judged text, and ``hallucinated``. Fed back with
``juryflow run labels.jsonl ...``, the new run's gold labels are exactly the annotations
(the ``annotation_labels`` view of the old run), whatever the dataset said before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juryflow.storage.annotations import Annotation, latest_annotations
from juryflow.storage.datasets import SPAN_TEXT_VARIABLES
from juryflow.storage.files import write_private_text
from juryflow.storage.paths import reason, writable_file
from juryflow.storage.store import Store


class ExportError(ValueError):
    """Nothing to export, or nowhere to write it; the message says what to do."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    path: Path
    run_id: str
    n_items: int


def _labels(annotation: Annotation, text: str) -> dict[str, Any]:
    """The annotation as the dataset reader's label fields (see ``annotation_labels``).

    ``labels`` is written when the spans are span labels (some span, a clean verdict, or
    span decisions with the verdict unset); ``hallucinated`` when there is a verdict. The
    reader derives a missing verdict from the spans, as the view does.
    """
    spans = list(annotation.spans)
    span_labels = (
        bool(spans)
        or annotation.verdict is False
        or (annotation.verdict is None and bool(annotation.decisions))
    )
    fields: dict[str, Any] = {}
    if annotation.verdict is not None:
        fields["hallucinated"] = annotation.verdict
    if span_labels:
        fields["labels"] = [{"start": s, "end": e, "text": text[s:e]} for s, e in spans]
    return fields


def _rows(store: Store, run_id: str, annotations: list[Annotation]) -> Iterator[dict[str, Any]]:
    wanted = [a.item_id for a in annotations]
    with store.read() as con:
        found = con.execute(
            "SELECT item_id, variables, metadata FROM items "
            "WHERE run_id = ? AND list_contains(?, item_id)",
            [run_id, wanted],
        ).fetchall()
    items = {
        str(item_id): (
            json.loads(variables) if isinstance(variables, str) else dict(variables or {}),
            json.loads(metadata) if isinstance(metadata, str) else dict(metadata or {}),
        )
        for item_id, variables, metadata in found
    }
    for annotation in annotations:
        variables, metadata = items[annotation.item_id]
        text = next((variables[v] for v in SPAN_TEXT_VARIABLES if v in variables), "")
        # metadata first: a variable of the same name is what the run judged
        yield {
            "id": annotation.item_id,
            **metadata,
            **variables,
            **_labels(annotation, str(text)),
        }


def export_annotations(store: Store, run_id: str, path: str | Path) -> ExportResult:
    """Write run ``run_id``'s annotated items (their newest annotations) to ``path``.

    Raises :class:`ExportError` for an unknown run, a run without annotations or a path that
    cannot be written.
    """
    target = Path(path).expanduser()
    if store.get_run(run_id) is None:
        raise ExportError(f"no run {run_id!r} in {store.path}: pick one from `juryflow runs`")
    annotations = latest_annotations(store, run_id)
    if not annotations:
        raise ExportError(
            f"run {run_id} has no annotations yet: review its items with `juryflow view` "
            "(or its queue), then export again"
        )
    try:
        target = writable_file(target, "-o")
    except ValueError as error:
        raise ExportError(str(error)) from None
    lines = [
        json.dumps(row, ensure_ascii=False) + "\n" for row in _rows(store, run_id, annotations)
    ]
    try:
        write_private_text(target, "".join(lines))
    except OSError as error:
        raise ExportError(
            f"cannot write {target}: {reason(error)}; pass -o a writable path"
        ) from None
    return ExportResult(target, run_id, len(lines))


__all__ = ["ExportError", "ExportResult", "export_annotations"]
