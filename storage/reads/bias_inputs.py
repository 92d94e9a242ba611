"""What the bias probes need beyond the agreement arrays: per item its response's length,
its source and the model that wrote it; per judge its provider, model and ``family:``.

Items come in the order of :func:`juryflow.storage.reads.analysis.load_run_data` (row
order), so the lists line up with its arrays. Bound parameters only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from juryflow.storage.reads.analysis import GROUP_COLUMNS
from juryflow.storage.store import Store

WRITER_COLUMNS = ("model", "generator")
"""Item metadata columns that name the model that wrote the response, tried in this order
(RAGTruth rows have ``model``: ``gpt-4-0613``, ``llama-2-7b-chat``, ...)."""


@dataclass(frozen=True, slots=True)
class JudgeModel:
    provider: str | None
    model: str | None
    family: str | None
    """The panel's ``family:`` override, if any."""


@dataclass(frozen=True, slots=True)
class BiasInputs:
    lengths: list[int]
    """Characters of the judged response (``response``, else ``output``)."""
    groups: list[str]
    """Each item's source (the first of ``GROUP_COLUMNS`` the items have), else its id."""
    group_column: str | None
    writers: list[str | None]
    """The model that wrote each response, None where the item does not say."""
    judges: dict[str, JudgeModel]


def _metadata(raw: Any) -> dict[str, Any]:
    value = json.loads(raw) if isinstance(raw, str) else raw
    return value if isinstance(value, dict) else {}


def bias_inputs(store: Store, run_id: str) -> BiasInputs:
    with store.read() as con:
        items = con.execute(
            "SELECT item_id, length(coalesce(variables->>'response', variables->>'output', '')), "
            "metadata FROM items WHERE run_id = ? ORDER BY row_number, item_id",
            [run_id],
        ).fetchall()
        panel_row = con.execute("SELECT panel FROM runs WHERE run_id = ?", [run_id]).fetchone()
    metadata = [_metadata(m) for _, _, m in items]
    present = {key for m in metadata for key in m}
    group_column = next((c for c in GROUP_COLUMNS if c in present), None)
    writer_column = next((c for c in WRITER_COLUMNS if c in present), None)
    panel = _metadata(panel_row[0]) if panel_row else {}
    judges = {
        str(j["id"]): JudgeModel(j.get("provider"), j.get("model"), j.get("family"))
        for j in panel.get("judges", [])
        if isinstance(j, dict) and "id" in j
    }
    return BiasInputs(
        lengths=[int(n or 0) for _, n, _ in items],
        groups=[
            str(m.get(group_column, item_id)) if group_column else str(item_id)
            for (item_id, _, _), m in zip(items, metadata, strict=True)
        ],
        group_column=group_column,
        writers=[
            str(m[writer_column]) if writer_column and m.get(writer_column) else None
            for m in metadata
        ],
        judges=judges,
    )
