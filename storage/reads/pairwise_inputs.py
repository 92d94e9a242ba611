"""What a pairwise run's head-to-head and Bradley–Terry figures need beyond the samples: per
item the two candidate models' names and the panel's consensus.

Items come in the order of :func:`juryflow.storage.reads.analysis.load_run_data` (row
order), so the arrays line up with :func:`~juryflow.storage.reads.sample_inputs.load_samples`.
The models are read from the item's ``model_a`` / ``model_b`` (its metadata, else its prompt
variables). Bound parameters only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from juryflow.storage.store import Store

_ITEMS = """
    SELECT coalesce(i.metadata->>'model_a', i.variables->>'model_a') AS model_a,
           coalesce(i.metadata->>'model_b', i.variables->>'model_b') AS model_b,
           CASE WHEN c.status = 'ok' THEN c.score END AS consensus,
           lower(coalesce(i.metadata->>'preferred', i.variables->>'preferred')) AS preferred
    FROM items i LEFT JOIN consensus c USING (run_id, item_id)
    WHERE i.run_id = ?
    ORDER BY i.row_number, i.item_id
"""


@dataclass(frozen=True, slots=True)
class PairwiseInputs:
    models: tuple[str, ...]
    """The candidate models named by any item, sorted."""
    model_a: npt.NDArray[np.int64]
    """Per item, the index in ``models`` of answer A's model; -1 where the item names none."""
    model_b: npt.NDArray[np.int64]
    consensus: npt.NDArray[np.float64]
    """Per item, the panel's preference (B's share of the win); NaN without a consensus."""
    preferred: tuple[str | None, ...]
    """Per item, a human's preference (``a``, ``b`` or ``tie``, its ``preferred`` column)."""


def pairwise_inputs(store: Store, run_id: str) -> PairwiseInputs:
    with store.read() as con:
        rows = con.execute(_ITEMS, [run_id]).fetchall()
    models = tuple(sorted({str(m) for a, b, _, _ in rows for m in (a, b) if m}))
    index = {m: k for k, m in enumerate(models)}
    return PairwiseInputs(
        models=models,
        model_a=np.asarray([index.get(str(r[0]), -1) for r in rows], dtype=np.int64),
        model_b=np.asarray([index.get(str(r[1]), -1) for r in rows], dtype=np.int64),
        consensus=np.asarray(
            [np.nan if r[2] is None else float(r[2]) for r in rows], dtype=np.float64
        ),
        preferred=tuple(None if r[3] is None else str(r[3]) for r in rows),
    )
