"""Which item of a run a typed id means (``juryflow show RUN ITEM``): its exact id, else the
one item whose id starts with it, as run ids are looked up
(:func:`juryflow.storage.reads.run_queries.resolve_run_id_in`).

Bound parameters only: the typed text never becomes SQL text.
"""

from __future__ import annotations

import duckdb

SHOWN_CANDIDATES = 5


class ItemIdError(ValueError):
    """The text names no item of the run, or more than one; the message says what to do."""


def resolve_item_id_in(con: duckdb.DuckDBPyConnection, run_id: str, text: str) -> str:
    """The item of ``run_id`` that ``text`` names; :class:`ItemIdError` when none or several."""
    if con.execute(
        "SELECT 1 FROM items WHERE run_id = ? AND item_id = ?", [run_id, text]
    ).fetchone():
        return text
    # starts_with, not LIKE: a % or _ in the text is a character, not a wildcard
    found = con.execute(
        "SELECT item_id FROM items WHERE run_id = ? AND starts_with(item_id, ?) "
        "ORDER BY item_id LIMIT ?",
        [run_id, text, SHOWN_CANDIDATES + 1],
    ).fetchall()
    if len(found) == 1:
        return str(found[0][0])
    if not found:
        raise ItemIdError(
            f"no item {text!r} in run {run_id}; `juryflow disagreements {run_id}` lists items"
        )
    shown = ", ".join(repr(str(row[0])) for row in found[:SHOWN_CANDIDATES])
    more = ", ..." if len(found) > SHOWN_CANDIDATES else ""
    raise ItemIdError(
        f"item id {text!r} is ambiguous in run {run_id}: it starts {shown}{more}; "
        "give more of the id"
    )
